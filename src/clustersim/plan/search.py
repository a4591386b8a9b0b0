"""Searches over candidate layouts: the fastest that fits, the k fastest, and the Pareto front.

The search offers only what the framework runs: its ZeRO stages (``zero_stages``), uneven pipeline stages
where it supports them (``uneven_stages``: Megatron-Core's ``--decoder-first-pipeline-num-layers`` and
``--decoder-last-pipeline-num-layers``), and ZeRO 2-3 with pipelining only where the framework shards
while it pipelines (``sharded_pipeline``: the FSDP2 stacks, torchtitan and NeMo AutoModel): DeepSpeed
refuses the combination ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
deepspeed/runtime/pipe/engine.py) and Megatron-Core pipelines with its distributed optimizer. A layout
fits when it leaves the space's ``headroom`` share of device memory free (``--safe``: at the upper end of its
memory's interval, ``kept_free``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, fields, replace
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.memory import MemoryArrays, layers_to_offload, offloaded_required
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.intervals import DEFAULT_LEVEL, spread_for
from clustersim.intervals.layout import job_features
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.plan.ranking import Ranking as Ranking
from clustersim.plan.ranking import grid_layouts, terms_at
from clustersim.plan.space import CandidateGrid, SearchSpace, candidate_grid, offered_module_sets, why_no_layout
from clustersim.plan.stage_balance import BALANCE_POOL, BALANCE_REACH, chosen_layouts, uneven_allowed
from clustersim.recompute_layout import overlap_recompute_conflict
from clustersim.system import System
from clustersim.training.estimate import layouts_memory
from clustersim.training.job import TrainingJob
from clustersim.training.offload import offloaded_layer_bytes
from clustersim.training.pricing import Systems
from clustersim.training.step import step_terms
from clustersim.training.terms import StepTerms
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
_GIB = 2**30
CHUNK = 1 << 15  # layouts priced per vectorized call: large enough to amortize the call, small enough for cache


# a request's candidates on their grid, the memory of every grid position and its need: what the instance types of
# one node count share (memory reads no system)
CandidateMemo = dict[tuple[Any, ...], tuple[CandidateGrid, MemoryArrays, FloatArray]]
MEMO_ENTRIES = 64  # candidate grids a memo keeps (each of at most MEMO_GRID positions)
MEMO_GRID = 4 * CHUNK  # a grid's memory need alone is 8 bytes a position
# memory is sized over the open grid while its candidates are at least 1 / GRID_SHARE of its positions (the
# figures most memory terms read span a few axes, their last sums all: some 10 passes over the grid against
# building the candidates and some 100 passes over them), else over the candidates themselves
GRID_SHARE = 4


@dataclass(frozen=True)
class RankRequest:
    """One system and job to rank layouts on, with the fractions (None: the family's) and the framework (None:
    Megatron's profile on the family, which no memo shares)."""

    system: System
    job: TrainingJob
    efficiency: FamilyEfficiency | None = None
    software: SoftwareProfile | None = None


def rank_layouts(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
    memo: CandidateMemo | None = None,
) -> Ranking:
    """Every candidate of ``space`` the framework runs (see the module's note), its memory checked in one
    vectorized call and the step times of those that fit priced in a few more (``Ranking`` prices the others
    when asked). ``memo`` keeps the candidates of ``model`` and their memory between calls that share all they
    depend on (devices, scale-up domain, batch, sequence, space, and the framework's ZeRO stages, sharded
    pipelining, attention kernel and bytes per parameter): a planner's instance types of one node count share them;
    grids of up to ``MEMO_GRID`` positions, ``MEMO_ENTRIES`` of them."""
    found = next(rank_each(model, [RankRequest(system, job, efficiency, software)], space=space, cost=cost, memo=memo))
    if isinstance(found, ClusterSimError):
        raise found
    return found


def rank_each(
    model: Transformer,
    requests: Iterable[RankRequest],
    *,
    space: SearchSpace | None = None,
    cost: CollectiveCost = ANALYTIC,
    memo: CandidateMemo | None = None,
) -> Iterator[Ranking | ClusterSimError]:
    """``rank_layouts`` of each request, in order, or the error that says why it has no candidates. Consecutive
    requests on one framework, set of fractions, precision and sequence length have the layouts that fit priced
    together, in one vectorized call over their systems (``training.pricing.Systems``) of up to ``CHUNK``
    layouts, each as it would be alone; a request with more is priced alone, in chunks."""
    pending: list[_Candidates] = []
    for request in requests:
        try:
            found = _candidates(model, request, space or SearchSpace(), memo)
        except ClusterSimError as exc:
            yield from _price_together(model, pending, cost)
            pending = []
            yield exc
            continue
        if pending and (found.together != pending[0].together or _fitting(pending) + found.fitting > CHUNK):
            yield from _price_together(model, pending, cost)
            pending = []
        pending.append(found)
    yield from _price_together(model, pending, cost)


@dataclass(frozen=True)
class _Candidates:
    """A request's candidates and memory, those that fit, and the inputs its step is priced with."""

    system: System
    job: TrainingJob
    eff: FamilyEfficiency
    sw: SoftwareProfile
    headroom: float
    grid: CandidateGrid
    memory: MemoryArrays  # of every grid position, nothing offloaded
    required: FloatArray  # of every grid position, with its offloaded layers
    fit_positions: npt.NDArray[np.int64]
    offloaded: FloatArray | None = None  # layers each grid position offloads to fit (None: the search offloads none)

    @property
    def fitting(self) -> int:
        """Layouts that fit (those priced now)."""
        return len(self.fit_positions)

    @cached_property
    def fit_layouts(self) -> LayoutArrays:
        """The layouts that fit, in candidate order, each with the layers it offloads to fit."""
        return grid_layouts(self.grid, self.fit_positions, self.offloaded)

    @property
    def together(self) -> tuple[int, int, Any, int]:
        """What requests priced in one call share: framework and fractions (the same objects), precision and
        sequence length."""
        return id(self.sw), id(self.eff), self.job.precision, self.job.seq_len


def _fitting(pending: list[_Candidates]) -> int:
    return sum(found.fitting for found in pending)


def _candidates(
    model: Transformer, request: RankRequest, space: SearchSpace, memo: CandidateMemo | None
) -> _Candidates:
    """The request's candidates the framework runs and their memory (from ``memo`` where it has them), and the
    grid positions of those that fit."""
    system, job, software = request.system, request.job, request.software
    if space.uneven_stages is None:
        space = replace(space, uneven_stages=uneven_allowed(None, software))
    sw = software or software_for(None, system.accelerator.family)
    if space.module_sets is None:  # the framework's MoE recipes' selective sets, unless the modules are stated
        searched = "selective" in space.recompute and space.recompute_modules is None
        offered = offered_module_sets(model, sw.moe_recompute_module_sets) if searched else ()
        space = replace(space, module_sets=offered)
    # what the candidates and their memory read: the devices and the scale-up domain (their degrees), the job, the
    # space, and of the framework what it runs and how it holds memory, FP8 inputs included (instance types of one
    # node count share it)
    float8_inputs = sw.keeps_float8_inputs(job.precision)  # FP8 GEMM inputs kept in a byte
    holds = (
        sw.state_bytes,
        sw.selective_recompute,
        sw.loss_bytes_per_logit,
        sw.zero3_gathered_units / sw.zero3_collectives_per_layer,
        sw.tp_keeps_gathered_inputs,
        sw.pipeline_unsharded_state,
    )
    runs = (sw.zero_stages, sw.sharded_pipeline, sw.fused_attention, holds, float8_inputs)
    key = (system.num_devices, system.scaleup_devices, job.global_batch, job.seq_len, space, runs)
    known = memo.get(key) if memo is not None and software is not None else None
    if known is not None:
        grid, memory, required = known
    else:
        grid, memory = _framework_candidates(model, system, job, space, software, sw)
        required = memory.required
        if memo is not None and software is not None and required.size <= MEMO_GRID and len(memo) < MEMO_ENTRIES:
            memo[key] = (grid, memory, required)
    headroom = kept_free(system, sw, space)
    usable = system.memory_bytes * (1 - headroom)
    offloaded = _offloaded(model, system, job, sw, grid, required, usable)
    if offloaded is not None:
        required = offloaded_required(required, *offloaded)
    with np.errstate(invalid="ignore"):  # positions outside the rules may hold no figure
        fit_positions = grid.positions(required[0] <= usable)
    eff = request.efficiency or efficiency_for(system.accelerator)
    return _Candidates(
        system, job, eff, sw, headroom, grid, memory, required, fit_positions,
        None if offloaded is None else offloaded[1],
    )  # fmt: skip


def kept_free(system: System, sw: SoftwareProfile, space: SearchSpace) -> float:
    """The share of device memory a layout leaves free: the space's headroom, and with its ``memory_level`` what the
    upper end of the memory's interval at that level adds (the left-out residuals of published peak memory on runs
    like it: chip, framework, scale), so that the layout fits there too."""
    if space.memory_level is None:
        return space.headroom
    found = spread_for(
        "memory", accelerator=system.accelerator.id, family=system.accelerator.family, framework=sw.name,
        devices=system.num_devices, level=space.memory_level,
    )  # fmt: skip
    return space.headroom if found is None else 1 - (1 - space.headroom) * math.exp(-found.q_hi)


def _offloaded(
    model: Transformer,
    system: System,
    job: TrainingJob,
    sw: SoftwareProfile,
    grid: CandidateGrid,
    required: FloatArray,
    usable_bytes: float,
) -> tuple[FloatArray, FloatArray] | None:
    """Where the framework offloads activations and the device's host link is its own (NVLink-C2C: a PCIe link shares
    its switch with the NICs' GPUDirect traffic, which the offload term does not price, so a search does not propose
    it there; a given layout may): each grid position's activation bytes per layer and the fewest layers it must
    offload to fit ``usable_bytes`` (``layers_to_offload``), 0 where it fits, cannot fit, or offloads nothing (a
    pipeline or recompute: Megatron-Core refuses them with offload)."""
    if not sw.activation_offload or system.host_bytes_per_s is None or system.host_link_shared:
        return None
    lay = grid.arrays()
    with np.errstate(divide="ignore", invalid="ignore"):  # positions outside the rules may hold no figure
        per_layer = offloaded_layer_bytes(model, lay, seq_len=job.seq_len, precision=job.precision, sw=sw)
        count = layers_to_offload(required, per_layer, usable_bytes, model.layers)
    eligible = (lay.pp == 1) & ~lay.recompute_full & ~lay.recompute_selective
    return per_layer, np.where(eligible & (count > 0), count, 0.0)


def _framework_candidates(
    model: Transformer,
    system: System,
    job: TrainingJob,
    space: SearchSpace,
    software: SoftwareProfile | None,
    sw: SoftwareProfile,
) -> tuple[CandidateGrid, MemoryArrays]:
    """The candidates of ``space`` that keep the rules and that the framework runs, with the memory of every
    position of their grid; the error says why there are none."""
    grid = candidate_grid(model, system, job, space)
    if grid.count == 0:
        raise ClusterSimError(
            f"no layout of {model.name} keeps the rules on {system.num_devices} devices with global batch "
            f"{job.global_batch} and sequence {job.seq_len}: {why_no_layout(model, system, job, space)}",
            field="layout",
        )
    if grid.count * GRID_SHARE < math.prod(grid.shape):  # the rules prune hard: the candidates as their own grid
        layouts = grid.layouts(grid.positions())
        runs = framework_runs(layouts, software)
        grid = CandidateGrid.of(layouts if runs.all() else layouts.select(runs))
    else:
        grid = grid.narrowed(framework_runs(grid.fields, software))  # type: ignore[arg-type]  # open grid's fields
    if grid.count == 0:
        stages = software.zero_stages if software is not None else None
        raise ClusterSimError(
            f"no layout of {model.name} in the search space is one {software.name if software else 'the framework'} "
            f"runs: ZeRO stages {list(stages) if stages else [0, 1, 2, 3]}, ZeRO 2-3 only with pp 1, no expert "
            "all-to-all overlap beside full or MoE-layer recompute",
            field="zero",
        )
    # positions outside the rules may divide by zero (an expert group wider than its ranks): never read
    with np.errstate(divide="ignore", invalid="ignore"):
        return grid, layouts_memory(model, grid.arrays(), job, sw)


def _step_s(
    model: Transformer,
    system: System,
    layouts: LayoutArrays,
    job: TrainingJob,
    *,
    eff: FamilyEfficiency,
    cost: CollectiveCost,
    software: SoftwareProfile,
) -> tuple[FloatArray, StepTerms | None]:
    """Step times of ``layouts``, priced in chunks of ``CHUNK`` layouts (a chunk's arrays stay in cache), and
    their step terms where one chunk held them all."""
    step = np.empty(len(layouts))
    terms: StepTerms | None = None
    for start in range(0, len(layouts), CHUNK):
        part = layouts if len(layouts) <= CHUNK else layouts.select(np.arange(start, min(start + CHUNK, len(layouts))))
        terms = step_terms(
            model, system, eff, part, seq_len=job.seq_len,
            global_batch=job.global_batch, precision=job.precision, cost=cost, software=software,
        )  # fmt: skip
        step[start : start + CHUNK] = terms.step_s
    return step, terms if len(layouts) <= CHUNK else None


def _price_together(model: Transformer, pending: list[_Candidates], cost: CollectiveCost) -> Iterator[Ranking]:
    """The rankings of ``pending``: the layouts that fit priced in one call (one request: on its system, in
    chunks), each request's step times and terms its own slice; the others priced alone when asked."""
    if not pending:
        return
    first = pending[0]
    if len(pending) == 1:
        step, terms = _step_s(
            model, first.system, first.fit_layouts, first.job, eff=first.eff, cost=cost, software=first.sw
        )
        yield _ranking(model, first, step, terms, cost)
        return
    parts = [found.fit_layouts for found in pending]
    counts = [len(part) for part in parts]
    owner = np.repeat(np.arange(len(pending)), counts)
    systems = Systems(tuple(found.system for found in pending), owner)
    batches = np.array([found.job.global_batch for found in pending], dtype=np.int64)[owner]
    terms = step_terms(
        model, systems, first.eff, _joined(parts), seq_len=first.job.seq_len, global_batch=batches,
        precision=first.job.precision, cost=cost, software=first.sw,
    )  # fmt: skip
    step = terms.step_s
    ends = np.cumsum(counts)
    for found, end, count in zip(pending, ends, counts, strict=True):
        mine = slice(int(end) - count, int(end))
        yield _ranking(model, found, step[mine], terms_at(terms, mine), cost)


def _ranking(
    model: Transformer, found: _Candidates, fit_step_s: FloatArray, fit_terms: StepTerms | None, cost: CollectiveCost
) -> Ranking:
    """A request's ranking from the step times (and terms, where kept) of its layouts that fit."""

    def price(some: LayoutArrays) -> FloatArray:
        return _step_s(model, found.system, some, found.job, eff=found.eff, cost=cost, software=found.sw)[0]

    return Ranking(
        found.grid, found.required, found.system.memory_bytes, found.headroom, found.fit_positions,
        found.fit_layouts, fit_step_s, price, found.memory, fit_terms, found.offloaded,
    )  # fmt: skip


def _joined(parts: list[LayoutArrays]) -> LayoutArrays:
    """The layouts of ``parts``, one after another."""
    return LayoutArrays(**{f.name: np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(LayoutArrays)})


def framework_runs(layouts: LayoutArrays, software: SoftwareProfile | None) -> npt.NDArray[np.bool_]:
    """Which layouts the framework runs: its ZeRO stages, ZeRO 2-3 with pipelining where it shards so, and no
    overlapped expert all-to-all beside whole-layer or MoE-layer recompute (``overlap_recompute_conflict``)."""
    runs = (layouts.zero < 2) | (layouts.pp == 1) | bool(software is not None and software.sharded_pipeline)
    if software is not None and software.zero_stages is not None:
        runs &= np.isin(layouts.zero, software.zero_stages)
    overlap_default = bool(software is not None and software.ep_overlap)
    return np.asarray(runs & ~overlap_recompute_conflict(layouts, overlap_default))


def choose_layout(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
    safe: bool = False,
) -> Layout:
    """The fastest candidate layout that fits in memory (``ClusterSimError`` when none fits); ``safe``: of the
    ``SAFE_CANDIDATES`` fastest, the one whose step is lowest at the upper end of its interval (``safest``)."""
    ranking = rank_layouts(model, system, job, space=space, efficiency=efficiency, cost=cost, software=software)
    best = ranking.fastest(SAFE_CANDIDATES) if safe else ranking.with_pipelined(1, BALANCE_POOL, BALANCE_REACH)
    if safe and best:
        sw = software or software_for(None, system.accelerator.family)
        best = [safest(best, system, job, framework=sw.name)]
    if not best:
        need = float(ranking.required_bytes.min()) / _GIB
        safe_memory = (
            ", and --safe the upper end of the memory's interval" if (space or SearchSpace()).memory_level else ""
        )
        kept = (
            f" less the {ranking.headroom:.0%} kept free ({ranking.usable_bytes / _GIB:.1f} GiB usable; "
            f"--headroom sets it{safe_memory})"
            if ranking.headroom > 0
            else ""
        )
        raise ClusterSimError(
            f"{model.name} does not fit on {system.name}: the leanest layout needs {need:.1f} GiB per device, "
            f"the device has {system.memory_bytes / _GIB:.1f} GiB{kept}; use more devices or a larger-memory "
            f"accelerator",
            field="nodes",
        )
    (layout,) = chosen_layouts(
        model, system, job, best, keep=1, space_uneven=(space or SearchSpace()).uneven_stages,
        usable_bytes=ranking.usable_bytes, software=software, efficiency=efficiency, cost=cost,
    )  # fmt: skip
    return layout


SAFE_CANDIDATES = 32
"""How many of the fastest layouts that fit ``choose_layout(safe=True)`` weighs by their intervals."""


def safest(
    ranked: list[tuple[Layout, float]], system: System, job: TrainingJob, *, framework: str
) -> tuple[Layout, float]:
    """Of ``ranked`` (layout, step), the one whose step is lowest at the upper end of its 80% interval: the
    left-out residuals of runs like it (``intervals.spread_for``: chip, framework, scale, and the layout's
    features, whose spread widens a pipelined, expert-parallel or sharded layout, or a long sequence), as
    ``plan --safe`` ranks."""
    spreads: dict[tuple[str, ...], float] = {}

    def upper_s(item: tuple[Layout, float]) -> float:
        layout, step_s = item
        features = job_features(layout, job)
        if features not in spreads:
            found = spread_for(
                "training", accelerator=system.accelerator.id, family=system.accelerator.family,
                framework=framework, devices=system.num_devices, level=DEFAULT_LEVEL, layout=features,
            )  # fmt: skip
            spreads[features] = 0.0 if found is None else found.q_hi
        return step_s * math.exp(spreads[features])

    return min(ranked, key=upper_s)  # ties: the faster, as ranked


def chosen_note(model: Transformer, layout: Layout, safe: bool = False) -> str:
    """What the output says of a chosen layout: its degrees and, with uneven stages, how the layers split."""
    how = (
        "lowest upper end of its 80% interval among the fastest that fit at their memory interval's upper end"
        if safe
        else "fastest that fits"
    )
    note = f"layout chosen ({how}): {layout.describe()}"
    if not layout.uneven_stages:
        return note
    chunks = layout.pp * layout.vp
    fullest = -(-model.layers // chunks)
    last = (
        f", the last rank {layout.last_stage_layers} beside the output head, which makes the step shortest"
        if layout.last_stage_layers
        else ""
    )
    return (
        f"{note}; uneven pipeline stages: {model.layers} layers over pp*vp = {chunks} model chunks, at most "
        f"{fullest} layers each{last} (Megatron-Core --decoder-first-pipeline-num-layers / "
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
