"""A chosen pipeline's last stage made lighter by the output head's worth, as Megatron recipes make it.

An even split gives the last rank its share of the layers and the output head (and any MTP block) on top, so it
sets the pipeline's pace. Megatron-Core can give it fewer decoder layers (``--decoder-last-pipeline-num-layers``,
or a ``pipeline_model_parallel_layout``; Megatron-Bridge's DeepSeek-V3 recipes take 3 off the last rank, its Llama
3.1 405B and Qwen3-235B ones 1 by counting the loss as a layer). Where the framework runs uneven stages and the
search may use them, each chosen layout with a pipeline is priced again with its last rank 1 to
``MAX_LAYERS_OFF`` layers lighter (``Layout.last_stage_layers``), and the fastest that fits is kept: a few
estimates per chosen layout, after the vectorized search, so the search's speed is unchanged.
"""

from __future__ import annotations

import numpy as np

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.compute.stages import stage_split
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.system import System
from clustersim.training.estimate import evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

MAX_LAYERS_OFF = 6
"""The most decoder layers taken off the last rank (an output head of a large vocabulary is worth a few)."""


def lighter_last_stages(model: Transformer, layout: Layout) -> list[Layout]:
    """``layout`` with its last rank 1, 2, ... layers lighter than an even split gives it, each leaving every
    other rank a layer (none where the layout has no pipeline or already states its split)."""
    if layout.pp < 2 or layout.last_stage_layers is not None:
        return []
    _, last = stage_split(model, LayoutArrays.of([layout]))
    even = int(last[0]) - model.mtp_layers  # decoder layers an even split leaves the last rank
    most = model.layers - (layout.pp - 1)
    counts = [n for n in range(even - 1, max(even - 1 - MAX_LAYERS_OFF, 0), -1) if 1 <= n <= most]
    return [layout.model_copy(update={"last_stage_layers": n, "uneven_stages": True}) for n in counts]


def uneven_allowed(space_uneven: bool | None, software: SoftwareProfile | None) -> bool:
    """Whether a search may split stages unevenly: as asked (``--uneven-stages/--even-stages``), else where the
    framework runs it (``SoftwareProfile.uneven_stages``)."""
    return bool(software is not None and software.uneven_stages) if space_uneven is None else space_uneven


def balance_last_stages(
    model: Transformer,
    system: System,
    job: TrainingJob,
    ranked: list[tuple[Layout, float]],
    *,
    usable_bytes: float,
    software: SoftwareProfile | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
) -> list[tuple[Layout, float]]:
    """Each of ``ranked`` (layout, step) or, where one is faster and needs no more than ``usable_bytes`` a device,
    the lighter last stage (``lighter_last_stages``) that makes its step shortest, with its step; every variant
    priced in one call."""
    groups = [[layout, *lighter_last_stages(model, layout)] for layout, _ in ranked]
    if all(len(group) == 1 for group in groups):
        return list(ranked)
    tried = [layout for group in groups for layout in group]
    terms, memory = evaluate_layouts(
        model, system, LayoutArrays.of(tried), job, efficiency=efficiency, cost=cost, software=software
    )
    step_s = np.where(memory.required <= usable_bytes, terms.step_s, np.inf)
    out, start = [], 0
    for group in groups:
        mine = step_s[start : start + len(group)].copy()
        mine[0] = terms.step_s[start]  # the layout as chosen (it fit the search's memory) stays a candidate
        best = int(np.argmin(mine))
        out.append((group[best], float(mine[best])))
        start += len(group)
    return out


BALANCE_POOL = 2
"""The fastest pipelined layouts that fit a search prices with lighter last stages beside the ones it keeps
(``Ranking.with_pipelined``): an even split prices a pipeline's last rank with the output head on top, so a
pipelined layout behind the fastest may overtake it once balanced (DeepSeek-V3 on 512 H100: pp 8 from 7.88 s to
6.46 s a step, past the 7.63 s of the fastest even-split layout, pp 1 with full recompute)."""
BALANCE_REACH = 0.25
"""How much slower than the fastest such a pipelined layout may be (a share of its step): a margin over what a
lighter last rank gains in the example above (18%, up to ``MAX_LAYERS_OFF`` layers off)."""


def chosen_layouts(
    model: Transformer,
    system: System,
    job: TrainingJob,
    ranked: list[tuple[Layout, float]],
    *,
    keep: int,
    space_uneven: bool | None,
    usable_bytes: float,
    software: SoftwareProfile | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
) -> list[Layout]:
    """The ``keep`` fastest of a search's ``ranked`` (layout, step) as it reports them: each flagged uneven where
    its layers do not divide by its chunks (the flag counts in the rules only), and, where uneven stages are
    allowed, its last stage balanced before they are ranked again (the pipelined ones beyond ``keep`` that
    ``Ranking.with_pipelined`` adds may overtake)."""
    flagged = [
        (layout.model_copy(update={"uneven_stages": model.layers % (layout.pp * layout.vp) != 0}), step_s)
        for layout, step_s in ranked
    ]
    if not uneven_allowed(space_uneven, software):
        return [layout for layout, _ in flagged[:keep]]
    balanced = balance_last_stages(
        model, system, job, flagged, usable_bytes=usable_bytes, software=software, efficiency=efficiency, cost=cost
    )
    order = sorted(range(len(balanced)), key=lambda i: (balanced[i][1], i))  # ties: the search's order
    return [balanced[i][0] for i in order[:keep]]
