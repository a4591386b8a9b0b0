"""Searches over candidate layouts: the fastest that fits, the k fastest, and the Pareto front.

The search offers only what the framework runs: its ZeRO stages (``zero_stages``), uneven pipeline stages
where it supports them (``uneven_stages``: Megatron-Core's ``--decoder-first-pipeline-num-layers`` and
``--decoder-last-pipeline-num-layers``), and ZeRO 2-3 with pipelining only where the framework shards
while it pipelines (``sharded_pipeline``: the FSDP2 stacks, torchtitan and NeMo AutoModel): DeepSpeed
refuses the combination ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
deepspeed/runtime/pipe/engine.py) and Megatron-Core pipelines with its distributed optimizer. A layout
fits when it leaves the space's ``headroom`` share of device memory free.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.plan.space import DEFAULT_HEADROOM, SearchSpace, candidate_layouts, why_no_layout
from clustersim.system import System
from clustersim.training.estimate import evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
_GIB = 2**30


@dataclass(frozen=True)
class Ranking:
    """Candidate layouts with their step time and memory need, one element each."""

    layouts: LayoutArrays
    step_s: FloatArray
    required_bytes: FloatArray
    capacity_bytes: float
    headroom: float = DEFAULT_HEADROOM  # share of device memory a layout must leave free

    @property
    def usable_bytes(self) -> float:
        """Device memory a layout may need: the capacity less the headroom."""
        return self.capacity_bytes * (1 - self.headroom)

    @property
    def fits(self) -> npt.NDArray[np.bool_]:
        """Which layouts fit in device memory with the headroom left free."""
        return np.asarray(self.required_bytes <= self.usable_bytes)

    def fastest(self, k: int) -> list[tuple[Layout, float]]:
        """The ``k`` fastest layouts that fit, fastest first, with their step times (ties: earlier first)."""
        step = np.where(self.fits, self.step_s, np.inf)
        order = np.argsort(step, kind="stable")[:k]
        return [(self.layouts.layout(int(i)), float(step[i])) for i in order if np.isfinite(step[i])]


def rank_layouts(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> Ranking:
    """Evaluate every candidate of ``space`` the framework runs (see the module's note) in one vectorized call."""
    space = space or SearchSpace()
    if space.uneven_stages is None:
        space = replace(space, uneven_stages=software is not None and software.uneven_stages)
    layouts = candidate_layouts(model, system, job, space)
    if len(layouts) == 0:
        raise ClusterSimError(
            f"no layout of {model.name} keeps the rules on {system.num_devices} devices with global batch "
            f"{job.global_batch} and sequence {job.seq_len}: {why_no_layout(model, system, job, space)}",
            field="layout",
        )
    layouts = layouts.select(framework_runs(layouts, software))
    if len(layouts) == 0:
        stages = software.zero_stages if software is not None else None
        raise ClusterSimError(
            f"no layout of {model.name} in the search space is one {software.name if software else 'the framework'} "
            f"runs: ZeRO stages {list(stages) if stages else [0, 1, 2, 3]}, ZeRO 2-3 only with pp 1",
            field="zero",
        )
    terms, memory = evaluate_layouts(model, system, layouts, job, efficiency=efficiency, cost=cost, software=software)
    return Ranking(layouts, terms.step_s, memory.required, system.memory_bytes, space.headroom)


def framework_runs(layouts: LayoutArrays, software: SoftwareProfile | None) -> npt.NDArray[np.bool_]:
    """Which layouts the framework runs: its ZeRO stages, and ZeRO 2-3 with pipelining where it shards so."""
    runs = (layouts.zero < 2) | (layouts.pp == 1) | bool(software is not None and software.sharded_pipeline)
    if software is not None and software.zero_stages is not None:
        runs &= np.isin(layouts.zero, software.zero_stages)
    return np.asarray(runs)


def choose_layout(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> Layout:
    """The fastest candidate layout that fits in memory (``ClusterSimError`` when none fits)."""
    ranking = rank_layouts(model, system, job, space=space, efficiency=efficiency, cost=cost, software=software)
    best = ranking.fastest(1)
    if not best:
        need = float(ranking.required_bytes.min()) / _GIB
        kept = (
            f" less the {ranking.headroom:.0%} kept free ({ranking.usable_bytes / _GIB:.1f} GiB usable; "
            f"--headroom sets it)"
            if ranking.headroom > 0
            else ""
        )
        raise ClusterSimError(
            f"{model.name} does not fit on {system.name}: the leanest layout needs {need:.1f} GiB per device, "
            f"the device has {system.memory_bytes / _GIB:.1f} GiB{kept}; use more devices or a larger-memory "
            f"accelerator",
            field="nodes",
        )
    layout = best[0][0]
    uneven = model.layers % (layout.pp * layout.vp) != 0
    return layout if layout.uneven_stages == uneven else layout.model_copy(update={"uneven_stages": uneven})


def chosen_note(model: Transformer, layout: Layout) -> str:
    """What the output says of a chosen layout: its degrees and, with uneven stages, how the layers split."""
    note = f"layout chosen (fastest that fits): {layout.describe()}"
    if not layout.uneven_stages:
        return note
    chunks = layout.pp * layout.vp
    fullest = -(-model.layers // chunks)
    return (
        f"{note}; uneven pipeline stages: {model.layers} layers over pp*vp = {chunks} model chunks, at most "
        f"{fullest} layers each (Megatron-Core --decoder-first-pipeline-num-layers / "
        f"--decoder-last-pipeline-num-layers; --even-stages to keep them even)"
    )


def pareto_front(objectives: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Indices of the rows no other row beats on every column (all minimized), in input order.

    ``objectives`` has one row per candidate and one column per objective (step time, memory, cost).
    """
    values = np.asarray(objectives, dtype=float)
    if values.ndim != 2:
        raise ClusterSimError(f"objectives must be a 2-D array (candidates x objectives), got shape {values.shape}")
    no_worse = np.all(values[None, :, :] <= values[:, None, :], axis=2)  # [i, j]: j no worse than i anywhere
    better = np.any(values[None, :, :] < values[:, None, :], axis=2)  # [i, j]: j better than i somewhere
    dominated = np.any(no_worse & better, axis=1)
    return np.flatnonzero(~dominated)
