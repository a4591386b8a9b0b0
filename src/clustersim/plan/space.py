"""The space of training layouts a planner searches, generated as arrays and filtered by masks.

Every combination of the degrees below is one element of a set of parallel numpy arrays; the layout
rules (``clustersim.execution.LAYOUT_RULES``) are evaluated as boolean masks over all of them at
once, so no per-candidate object is built until a winner is picked. When no candidate keeps the
rules, :func:`why_no_layout` names the first rule that every remaining candidate breaks.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import cached_property
from types import SimpleNamespace
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.choices import EpDispatcher, RecomputeModule
from clustersim.errors import ClusterSimError
from clustersim.execution import LAYOUT_RULES, LayoutArrays, RuleInputs, expert_tp
from clustersim.intervals.conformal import check_level
from clustersim.intervals.layout import LONG_SEQUENCE_TOKENS  # from here on, context parallelism joins the candidates
from clustersim.recompute_layout import lacking_message, module_bits
from clustersim.system import System
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)
RECOMPUTE = ("none", "selective", "full")
# On the etp axis: the expert tensor-parallel degree derived as a layout without one derives it (execution.expert_tp).
ETP_DERIVED = 0
# The expert TP degrees a MoE search tries besides the derived one: each expert whole on a GPU, as NVIDIA's DGX Cloud
# Grok-1 recipe on H100 (TP4 ETP1, github.com/NVIDIA/dgxc-benchmarking grok1/README.md) and Megatron-MoE-ModelZoo's
# Qwen3-235B rows (TP2/TP4 with ETP1, github.com/yanring/Megatron-MoE-ModelZoo) run them.
MOE_ETP = (ETP_DERIVED, 1)
# The share of device memory a chosen layout leaves free beyond what the memory model counts (which already
# holds 2.5 GiB of framework buffers and 5% fragmentation of the activations): a stated prior for what it
# cannot see (allocator peaks, ranks that hold more than the modelled heaviest stage), as serving engines keep
# one by default (vLLM gpu_memory_utilization 0.9, vllm/config CacheConfig; docs.vllm.ai, read 2026-12).
DEFAULT_HEADROOM = 0.10


def pipeline_degrees(model: Transformer, num_devices: int) -> tuple[int, ...]:
    """Every pipeline degree worth trying: the divisors of the devices up to the layer count, powers of two or
    not (MT-NLG's 105 layers ran at pp 35 on 2,240 GPUs, Narayanan et al. SC'21 Table 1); the layer rule then
    keeps those that divide the layers unless uneven stages are allowed."""
    return tuple(d for d in range(1, min(model.layers, num_devices) + 1) if num_devices % d == 0)


@dataclass(frozen=True)
class SearchSpace:
    """The values each layout dimension may take; ``None`` lets the space pick its defaults.

    ``sp`` (sequence parallelism) defaults to on wherever tp > 1; ``(False,)`` keeps it off, ``(True,)``
    on (which needs tp > 1). ``pp`` defaults to :func:`pipeline_degrees`. ``uneven_stages`` lets layers not
    divide by ``pp * vp`` (None: where the framework supports it, see ``plan.search``). ``headroom`` is the
    share of device memory a chosen layout must leave free (0 to 0.9). ``ep_overlap`` holds the expert
    all-to-all overlap on or off in every layout (None: the framework's default), ``ep_dispatcher`` the token
    dispatcher (None: the framework's). ``recompute_modules``: what every selective layout's recompute runs again
    (None: the framework's own; needs "selective" among ``recompute`` and modules the model has). ``module_sets``:
    more selective layouts, one per set of modules, beside those of ``recompute_modules`` (None: the framework's
    MoE recipes' sets the model has, ``offered_module_sets``; with ``recompute_modules`` stated, none). ``etp`` the
    expert tensor-parallel degrees, ``ETP_DERIVED`` (0) for the degree a layout without one derives (None: ``MOE_ETP``
    for a mixture-of-experts model, the derived one only for a dense one); a stated degree equal to the derived
    one is left out where the derived one is searched too (``distinct_etp``). ``memory_level``: a layout fits only
    where the upper end of its memory's interval at that level (``clustersim.intervals``: the left-out residuals of
    published peak memory) leaves the headroom free, as ``--safe`` asks (None: where the prediction does).
    """

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    vp: tuple[int, ...] = (1, 2, 4)
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] = (1, 2, 4)
    recompute: tuple[str, ...] = RECOMPUTE
    recompute_modules: tuple[RecomputeModule, ...] | None = None
    module_sets: tuple[tuple[RecomputeModule, ...], ...] | None = None
    zero: tuple[int, ...] = (0, 1, 2, 3)
    sp: tuple[bool, ...] | None = None
    uneven_stages: bool | None = None
    headroom: float = DEFAULT_HEADROOM
    ep_overlap: bool | None = None
    etp: tuple[int, ...] | None = None
    ep_dispatcher: EpDispatcher | None = None
    memory_level: float | None = None

    def __post_init__(self) -> None:
        if self.memory_level is not None:
            check_level(self.memory_level, "search space: memory_level")
        if not 0 <= self.headroom <= 0.9:
            raise ClusterSimError(
                f"search space: headroom {self.headroom} must be a share of device memory from 0 to 0.9",
                field="headroom",
                value=self.headroom,
            )
        for name in ("tp", "pp", "vp", "cp", "ep", "micro_batch", "zero", "recompute", "sp", "etp"):
            values = getattr(self, name)
            if values is not None and not values:
                raise ClusterSimError(f"search space: {name} needs at least one value", field=name)
        if self.etp is not None and min(self.etp) < 0:
            raise ClusterSimError(
                f"search space: etp {min(self.etp)} is not a degree (valid: {ETP_DERIVED} for the derived one, or 1 "
                "and up)",
                field="etp",
                value=min(self.etp),
            )
        unknown = [r for r in self.recompute if r not in RECOMPUTE]
        if unknown:
            raise ClusterSimError(f"search space: unknown recompute {unknown[0]!r} (valid: {', '.join(RECOMPUTE)})")

    def resolved(self, model: Transformer, system: System, job: TrainingJob) -> SearchSpace:
        """Defaults filled in: TP inside the scale-up domain, pipeline degrees that divide the devices, CP for
        long sequences, EP and expert TP 1 for MoE models."""
        devices = system.num_devices
        tp = self.tp or tuple(t for t in POWERS_OF_TWO if t <= system.scaleup_devices and devices % t == 0)
        pp = self.pp or pipeline_degrees(model, devices)
        cp = self.cp or ((1, 2, 4, 8, 16) if job.seq_len >= LONG_SEQUENCE_TOKENS else (1,))
        moe = model.moe
        ep = self.ep or (tuple(e for e in POWERS_OF_TWO if moe and moe.experts % e == 0) or (1,))
        etp = self.etp or (MOE_ETP if moe else (ETP_DERIVED,))
        self._check_modules(model)
        return dataclasses.replace(self, tp=tp, pp=pp, cp=cp, ep=ep, etp=etp)

    def _check_modules(self, model: Transformer) -> None:
        """Refuse stated recompute modules no searched layout could run: without selective recompute among the
        choices, or a module the model lacks."""
        stated = [("recompute_modules", self.recompute_modules)] if self.recompute_modules is not None else []
        stated += [("module_sets", modules) for modules in self.module_sets or ()]
        for name, modules in stated:
            names = ",".join(m.value for m in modules)
            if not modules:
                raise ClusterSimError(f"search space: {name} holds a set of no module", field=name, value=names)
            if "selective" not in self.recompute:
                raise ClusterSimError(
                    f"search space: recompute modules {names} need selective recompute among the choices, not "
                    f"{', '.join(self.recompute)}",
                    field=name,
                    value=names,
                )
            lacking = lacking_message(model, modules)
            if lacking:
                raise ClusterSimError(f"search space: {lacking}", field=name, value=names)

    def selective_bits(self) -> tuple[int, ...]:
        """Each selective variant's stated modules as ``module_bits``: the first ``recompute_modules``' (0: the
        framework's own), then one per set of ``module_sets`` not already among them."""
        found = [module_bits(self.recompute_modules)]
        for modules in self.module_sets or ():
            bits = module_bits(modules)
            found += [] if bits in found else [bits]
        return tuple(found)


def offered_module_sets(
    model: Transformer, sets: tuple[tuple[RecomputeModule, ...], ...]
) -> tuple[tuple[RecomputeModule, ...], ...]:
    """The framework's MoE recipes' recompute module ``sets`` a search of ``model`` offers: for a mixture-of-experts
    model, those whose every module it has (``lacking_message``); none for a dense one."""
    if model.moe is None:
        return ()
    return tuple(modules for modules in sets if lacking_message(model, modules) is None)


def _open_grid(
    model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None
) -> tuple[SimpleNamespace, tuple[int, ...]]:
    """The space's values as an open grid: each layout field an array that broadcasts over one axis per
    dimension (``np.ix_``), data parallelism filling the devices (at least one rank, so that a degree that
    does not divide the devices is caught by the rules, not here). Nothing of the full product is built."""
    dims = (space or SearchSpace()).resolved(model, system, job)
    # the recompute axis: none 0, selective 1 (recompute_modules' or the framework's), full 2, then one code per
    # further selective set (module_sets), each code's stated modules in ``modules_by_code``
    selective_bits = dims.selective_bits() if "selective" in dims.recompute else (0,)
    recompute_codes = tuple(RECOMPUTE.index(r) for r in dims.recompute)
    recompute_codes += tuple(range(len(RECOMPUTE), len(RECOMPUTE) + len(selective_bits) - 1))
    modules_by_code = np.array([0, selective_bits[0], 0, *selective_bits[1:]], dtype=np.int64)
    sp_codes = (-1,) if dims.sp is None else tuple(int(s) for s in dims.sp)  # -1: on wherever tp > 1
    etp = dims.etp or (ETP_DERIVED,)
    axes = (dims.tp, dims.pp, dims.vp, dims.cp, dims.ep, dims.micro_batch, recompute_codes, dims.zero, sp_codes, etp)
    open_axes = np.ix_(*(np.asarray(a, dtype=np.int64) for a in axes))
    tp, pp, vp, cp, ep, mb, recompute, zero, sp, etp_stated = open_axes
    fields = SimpleNamespace(
        tp=tp,
        pp=pp,
        dp=np.maximum(system.num_devices // (tp * pp * cp), 1),
        cp=cp,
        ep=ep,
        vp=vp,
        micro_batch=mb,
        zero=zero,
        sequence_parallel=np.where(sp < 0, tp > 1, sp == 1),
        recompute_full=recompute == 2,
        recompute_selective=(recompute == 1) | (recompute > 2),
        recompute_modules=modules_by_code[recompute],
        tp_overlap=np.array(np.nan),
        dp_overlap=np.array(True),
        ep_overlap=np.array(np.nan if dims.ep_overlap is None else float(dims.ep_overlap)),
        ep_per_node=np.array(
            np.nan if dims.ep_dispatcher is None else float(dims.ep_dispatcher is EpDispatcher.DEEPEP)
        ),
        uneven_stages=np.array(bool(dims.uneven_stages)),
        etp_stated=etp_stated,
        last_stage_layers=np.array(0),  # an even split: the search states no layout of its own
        offload_layers=np.array(0),  # nothing offloaded: the search does not offload
    )
    return fields, tuple(a.size for a in open_axes)


def _layout_fields(fields: SimpleNamespace) -> dict[str, npt.NDArray[Any]]:
    """The grid's arrays that are fields of ``LayoutArrays`` (the rules may read more)."""
    return {f.name: getattr(fields, f.name) for f in dataclasses.fields(LayoutArrays) if hasattr(fields, f.name)}


def _picked(fields: SimpleNamespace, count: int, which: tuple[npt.NDArray[np.int64] | None, ...]) -> LayoutArrays:
    """The ``count`` layouts at grid positions ``which`` (one index array per axis, None for an axis of one
    value), each field read through only the axes it varies over."""

    def pick(value: npt.NDArray[Any]) -> npt.NDArray[Any]:
        if value.size == 1:  # the same in every layout (a 0-d flag, or a dimension of one value)
            return np.full(count, value.flat[0], dtype=value.dtype)
        varies = [axis for axis, n in enumerate(value.shape) if n > 1 and which[axis] is not None]
        if len(varies) == 1:  # one axis (most fields): its values at the layouts' indices on it
            return np.asarray(value.reshape(-1)[which[varies[0]]])
        flat = np.zeros(count, dtype=np.int64)  # the position in ``value`` itself, through the axes it varies over
        for axis in varies:
            flat += which[axis] * math.prod(value.shape[axis + 1 :])  # type: ignore[operator]  # not None: varies
        return np.asarray(np.take(value, flat))

    return LayoutArrays(**{name: pick(value) for name, value in _layout_fields(fields).items()})


def _grid(model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None) -> LayoutArrays:
    """Every combination of the space's values as layouts, in C order of the axes (tp slowest)."""
    fields, shape = _open_grid(model, system, job, space)
    return _picked(fields, math.prod(shape), tuple(i.ravel() for i in np.indices(shape)))


@dataclass(frozen=True)
class CandidateGrid:
    """A space's candidates where its open grid holds them: the layout fields (each over only the axes it varies
    over, ``_open_grid``), the grid's shape, and which grid positions are candidates (a mask over only the axes
    its tests read). Figures of every grid position (memory, ``arrays``) cost a fraction of the candidates'
    own: most read a few axes, and only their last sums span the grid; a candidate's figure is read at its
    position (``at``)."""

    fields: SimpleNamespace
    shape: tuple[int, ...]
    mask: npt.NDArray[np.bool_]

    @classmethod
    def of(cls, layouts: LayoutArrays) -> CandidateGrid:
        """``layouts`` as a grid of one axis, one position each (the figures of a grid the rules prune hard cost
        less over its candidates than over all its positions)."""
        fields = SimpleNamespace(**{f.name: getattr(layouts, f.name) for f in dataclasses.fields(layouts)})
        return cls(fields, (len(layouts),), np.ones(len(layouts), dtype=bool))

    @cached_property
    def count(self) -> int:
        """How many candidates."""
        unread = math.prod(n for n, m in zip(self.shape, self.mask.shape, strict=True) if m == 1)
        return int(np.count_nonzero(self.mask)) * unread

    def narrowed(self, keeps: npt.ArrayLike) -> CandidateGrid:
        """The candidates that also keep ``keeps`` (a mask that broadcasts over the grid)."""
        return CandidateGrid(self.fields, self.shape, self.mask & np.asarray(keeps, dtype=bool))

    def positions(self, keeps: npt.ArrayLike | None = None) -> npt.NDArray[np.int64]:
        """Grid positions (C order, ascending: the candidates' order) of the candidates where ``keeps`` holds
        (None: every candidate, found without spanning the axes the mask does not read)."""
        if keeps is not None:
            return np.flatnonzero(np.broadcast_to(self.mask & np.asarray(keeps), self.shape))
        stride = [math.prod(self.shape[i + 1 :]) for i in range(len(self.shape))]
        kept = np.zeros(1, dtype=np.int64)
        for axis, index in enumerate(np.nonzero(self.mask)):
            kept = kept + index * stride[axis]
        # those of the mask, times every value of the axes it does not read
        offsets = np.zeros(1, dtype=np.int64)
        for axis, (n, m) in enumerate(zip(self.shape, self.mask.shape, strict=True)):
            if m == 1 and n > 1:
                offsets = (offsets[:, None] + np.arange(n, dtype=np.int64)[None, :] * stride[axis]).ravel()
        if len(offsets) == 1:
            return np.asarray(kept + offsets[0], dtype=np.int64)
        return np.sort((kept[:, None] + offsets[None, :]).ravel())

    def layouts(self, positions: npt.NDArray[np.int64]) -> LayoutArrays:
        """The layouts at grid ``positions``."""
        if len(self.shape) == 1:  # a grid of the candidates themselves
            return LayoutArrays(**{name: value[positions] for name, value in _layout_fields(self.fields).items()})
        indices = np.unravel_index(positions, self.shape)
        which = tuple(index if n > 1 else None for index, n in zip(indices, self.shape, strict=True))
        return _picked(self.fields, len(positions), which)

    def arrays(self) -> LayoutArrays:
        """The grid's fields as layout arrays that broadcast over it, each led by one more axis of one element
        (so that one layout's ``len`` is 1 and what a function of layouts makes of it broadcasts too)."""
        return LayoutArrays(**{name: np.asarray(value)[None] for name, value in _layout_fields(self.fields).items()})

    def at(self, value: npt.ArrayLike, positions: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
        """A figure of ``arrays`` (led by its axis of one element) at grid ``positions``."""
        full, found = (1, *self.shape), np.asarray(value)
        if found.shape != full:
            found = np.broadcast_to(found, full)
        if len(self.shape) == 1:
            return np.asarray(found[0, positions])
        return np.asarray(found[np.unravel_index(positions, full)])


def candidate_grid(
    model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None = None
) -> CandidateGrid:
    """The layouts of ``space`` (the default space when None) that keep the layout rules on ``system``, data
    parallelism filling the devices and sequence parallelism on wherever tp > 1 (unless the space says
    otherwise), on the space's open grid: each rule evaluated over only the axes it reads."""
    fields, shape = _open_grid(model, system, job, space)
    inputs = RuleInputs(model, system.num_devices, job.global_batch, job.seq_len)
    held = [np.asarray(rule.holds(fields, inputs), dtype=bool) for rule in LAYOUT_RULES]
    # the mask over only the axes some rule reads (the others, e.g. recompute and ZeRO, hold for every value)
    read = tuple(max((h.shape[i] if h.ndim else 1) for h in held) for i in range(len(shape)))
    keeps = np.ones(read, dtype=bool)
    for holds in held:
        keeps &= holds
    return CandidateGrid(fields, shape, keeps & np.asarray(distinct_etp(fields), dtype=bool))


def distinct_etp(fields: Any) -> npt.NDArray[np.bool_]:
    """Which layouts (``LayoutArrays`` or an open grid's fields) the search keeps: all but a stated expert TP
    degree equal to the derived one (``expert_tp``) where the derived one is on the axis too, the same degree
    (and the same layout, but at tp 1 with cp > 1, where a stated etp 1 would fold the expert groups cp times
    closer: a layout the search tries only where the degree is held, ``--etp``)."""
    stated = np.asarray(fields.etp_stated)
    if not (stated == ETP_DERIVED).any():  # only stated degrees searched: each is its own layout
        return np.ones_like(stated, dtype=bool)
    derived = expert_tp(fields.tp, fields.cp, fields.dp, fields.ep)
    return np.asarray((stated == ETP_DERIVED) | (stated != derived))


def candidate_layouts(
    model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None = None
) -> LayoutArrays:
    """Every layout of ``space`` that keeps the layout rules (``candidate_grid``'s), in the order of
    :func:`_grid`; only the layouts that keep them all are built."""
    grid = candidate_grid(model, system, job, space)
    return grid.layouts(grid.positions())


def why_no_layout(model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None = None) -> str:
    """Why ``space`` holds no layout that keeps the rules: the first rule (in ``LAYOUT_RULES`` order) that
    every candidate left by the earlier rules breaks, with its message for one of them."""
    arrays = _grid(model, system, job, space)
    inputs = RuleInputs(model, system.num_devices, job.global_batch, job.seq_len)
    alive = np.ones(len(arrays), dtype=bool)
    for rule in LAYOUT_RULES:
        keeps = alive & np.asarray(rule.holds(arrays, inputs), dtype=bool)
        if not keeps.any():
            layout = arrays.layout(int(np.flatnonzero(alive)[0]))
            if rule.name == "devices":
                t, p, c = layout.tp, layout.pp, layout.cp
                message = f"tp*pp*cp = {t}*{p}*{c} = {t * p * c} does not divide the {system.num_devices} devices"
            else:
                message = rule.message(layout, inputs)
            others = int(alive.sum()) - 1
            return message + (f" (and each of the {others} other candidates breaks this rule too)" if others else "")
        alive = keeps
    return "every candidate keeps the rules"  # pragma: no cover - called only when none does
