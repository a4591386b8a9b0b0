"""What one step's pieces cost on the hardware, per layout: the roofline time of each operation and
the time of a collective on the group's fabric (through the ``CollectiveCost`` interface). The layouts run on
one ``System``, or each on its own member of ``Systems`` (a planner's node counts and instance types priced in
one vectorized call)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Accelerator, Dtype
from clustersim.compute.attention_kernel import fused_attention_s
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.precision import is_low_precision
from clustersim.compute.scan_kernel import scan_seconds
from clustersim.errors import ClusterSimError
from clustersim.network.analytic_many import collective_times_s
from clustersim.network.collectives import Op
from clustersim.network.cost import AnalyticCost, CollectiveCost
from clustersim.system import System
from clustersim.workload.ops import Operation, OpKind

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

ALONE_FROM = 256  # layouts of one group that are priced in a call of their own (padding costs them more)
EXPERT_GEMMS = "experts"  # the grouped GEMMs of the routed and shared experts


@dataclass(frozen=True)
class OperationTimes:
    """Seconds of one operation per layer (or per head) and micro-batch, forward and backward."""

    name: str
    forward_s: FloatArray
    backward_s: FloatArray
    in_head: bool  # the output head (last pipeline stage) rather than every layer
    kind: OpKind  # what bounds it: GEMM, attention core or memory traffic


@dataclass(frozen=True)
class Systems:
    """Several systems of one accelerator family, one per layout: layout ``i`` runs on ``members[index[i]]``.

    It reads as a ``System`` where the step reads one (the per-device figures and the scale-up domain), each
    figure one element per layout, so that a step prices the layouts of many systems in one call and gives
    each the figures it would get alone."""

    members: tuple[System, ...]
    index: IntArray

    def __post_init__(self) -> None:
        families = sorted({s.accelerator.family for s in self.members})
        if len(families) != 1:
            raise ClusterSimError(
                f"systems priced together must share one accelerator family, got {', '.join(families) or 'none'}",
                field="systems",
                value=families,
            )

    def _each(self, figure: Callable[[System], float]) -> FloatArray:
        return np.array([figure(s) for s in self.members], dtype=np.float64)[self.index]

    @property
    def accelerator(self) -> Accelerator:
        """The first member's accelerator (every member's family is the same)."""
        return self.members[0].accelerator

    @property
    def scaleup_devices(self) -> IntArray:
        """Devices one scale-up fabric joins, per layout."""
        return np.array([s.scaleup_devices for s in self.members], dtype=np.int64)[self.index]

    @property
    def memory_bandwidth_bytes_per_s(self) -> FloatArray:
        """Device memory bandwidth of one device, per layout."""
        return self._each(lambda s: s.memory_bandwidth_bytes_per_s)

    @property
    def compute_clock_ratio(self) -> FloatArray:
        """Sustained clock against the TDP's, per layout."""
        return self._each(lambda s: s.compute_clock_ratio)

    @property
    def fp32_flop_per_s(self) -> FloatArray:
        """Dense FP32 rate of one device (NaN where not recorded), per layout."""
        return self._each(lambda s: s.fp32_flop_per_s)

    @property
    def exp_per_s(self) -> FloatArray:
        """Exponentials per second of one device (infinite where not recorded), per layout."""
        return self._each(lambda s: s.exp_per_s)

    def peak_flop_per_s(self, dtype: Dtype) -> FloatArray:
        """Dense peak of one device for ``dtype``, per layout."""
        return self._each(lambda s: s.peak_flop_per_s(dtype))

    @property
    def host_copy_bytes_per_s(self) -> FloatArray:
        """A copy between a device and host memory, one direction, per layout (NaN where no link is recorded)."""
        return self._each(lambda s: np.nan if s.host_copy_bytes_per_s is None else s.host_copy_bytes_per_s)


def operation_times(
    ops: list[Operation],
    system: System | Systems,
    eff: FamilyEfficiency,
    precision: Dtype,
    *,
    in_head: bool = False,
    kernel_efficiency: float = 1.0,
    attention_kernel_efficiency: float = 1.0,
    fp8_attention: bool = False,
    fused_expert_mlp: bool = False,
) -> list[OperationTimes]:
    """Roofline time of each operation: GEMMs at the size-dependent fraction of the precision's peak
        (8- and 4-bit GEMMs: their own peak plus the casts of an FP8 GEMM, ``fp8_efficiency_ratio``), the attention core
        at its own fraction of the 16-bit peak (both times the software's ``kernel_efficiency``), memory
        traffic at the achieved HBM bandwidth. A device capped below its TDP computes at the clock its board
    power allows (``System.compute_clock_ratio``). The attention core's fraction grows with the keys each query
    meets in one kernel call (``FamilyEfficiency.attention_fraction``) and is scaled by the software's
    ``attention_kernel_efficiency`` (its kernel against the family's fused one); to its products it adds the
    exponentials of its scores (one per score and pass) at the device's ``exp_per_s``, the share
    ``softmax_exposed`` of them that the family's kernels do not hide under the products. ``fp8_attention``: a quantized
    job's attention core at the FP8 peak instead; ``fused_expert_mlp``: the expert slices' quantization is in the
    grouped GEMMs (no ``expert_gemm_s``)."""
    clock = system.compute_clock_ratio  # a power-capped device's sustained clock
    half = system.peak_flop_per_s(Dtype.FP16 if precision is Dtype.FP16 else Dtype.BF16) * clock
    quantized = is_low_precision(precision)
    # s per FLOP at the ceiling: the format's tensor-core rate, plus for a quantized GEMM the casts and
    # scaling an FP8 GEMM pays beyond its rate (1 / fp8_efficiency_ratio - 1 of its time), which do not
    # shrink when a 4-bit format doubles the rate (for FP8 the sum is 1 / (FP8 peak x ratio) exactly)
    per_flop = 1.0 / half
    if quantized:
        fp8 = system.peak_flop_per_s(Dtype.FP8) * clock
        per_flop = 1.0 / (system.peak_flop_per_s(precision) * clock) + (1.0 / eff.fp8_efficiency_ratio - 1.0) / fp8
    attention_peak = system.peak_flop_per_s(Dtype.FP8) * clock if quantized and fp8_attention else half
    exp_rate = system.exp_per_s * clock
    slice_s = 0.0 if fused_expert_mlp else eff.expert_gemm_s
    hbm = system.memory_bandwidth_bytes_per_s * eff.memory_efficiency
    out = []
    for op in ops:
        if op.kind is OpKind.GEMM:
            forward = op.flop * per_flop / (eff.gemm_fraction(np.maximum(op.gemm_flop, 1.0)) * kernel_efficiency)
            if op.name == EXPERT_GEMMS and quantized:  # one slice per local expert and matrix
                forward = forward + op.flop / np.maximum(op.gemm_flop, 1.0) * slice_s
        elif op.kind is OpKind.SCAN:
            forward = scan_seconds(op.flop, half, system.fp32_flop_per_s * clock, system.accelerator.family)
        elif op.kind is OpKind.ATTENTION:
            keys = np.inf if op.keys_per_call is None else op.keys_per_call
            fraction = eff.attention_fraction(keys) * kernel_efficiency * attention_kernel_efficiency
            # the tensor cores' products, then the special function units' exponentials the kernel leaves exposed;
            # the backward pass recomputes the scores, so it takes their exponentials again
            rates = {"peak_flop_per_s": attention_peak, "exp_per_s": exp_rate, "fraction": fraction}
            forward = fused_attention_s(op.flop, op.exps, softmax_exposed=eff.softmax_exposed, **rates)
            backward = fused_attention_s(
                op.backward_ratio * op.flop, op.exps, softmax_exposed=eff.softmax_exposed, **rates
            )
            out.append(OperationTimes(op.name, forward, backward, in_head, op.kind))
            continue
        else:
            forward = op.bytes / hbm
        out.append(OperationTimes(op.name, forward, op.backward_ratio * forward, in_head, op.kind))
    return out


def collective_s(
    system: System | Systems,
    cost: CollectiveCost,
    op: Op,
    size_bytes: npt.ArrayLike,
    num_ranks: npt.ArrayLike,
    stride: npt.ArrayLike,
    where: npt.ArrayLike = True,
) -> FloatArray:
    """Time of one collective per layout where ``where`` holds (0 elsewhere and for a group of one rank).

    Each distinct (system, group shape, size) is priced once, however many layouts share it (a search's layouts
    differ in few of the figures one collective reads): the distinct ones found by two sorts, those of the small
    groups priced in one vectorized call; one layout on one system (every argument of one element, as a single
    estimate has) takes one call.
    """
    sizes = np.asarray(size_bytes, dtype=float)
    ranks = np.asarray(num_ranks, np.int64)
    wanted = np.asarray(where, dtype=bool) & (ranks > 1)
    if not wanted.any():  # no layout has this collective (e.g. no ZeRO-3): nothing to price
        return np.zeros(sizes.shape)
    strides = np.asarray(stride, np.int64)
    if isinstance(system, System) and sizes.size == 1 and ranks.size == 1 and strides.size == 1:
        fabric = system.group_fabric(int(ranks.flat[0]), int(strides.flat[0]))
        assert fabric is not None
        return np.asarray(cost.time_s(op, sizes.reshape(1), fabric), dtype=np.float64).reshape(sizes.shape)
    out = np.zeros(sizes.shape)
    ranks = np.broadcast_to(ranks, sizes.shape).reshape(-1)
    strides = np.broadcast_to(strides, sizes.shape).reshape(-1)
    chosen = np.flatnonzero(np.broadcast_to(wanted, sizes.shape))  # the layouts that have this collective
    chosen_ranks, chosen_strides = ranks[chosen], strides[chosen]
    shape = chosen_ranks * (int(chosen_strides.max()) + 1) + chosen_strides  # one integer per (ranks, stride)
    owner = np.zeros(0, np.int64)
    if isinstance(system, Systems):  # and per system
        owner = np.broadcast_to(system.index, sizes.shape).reshape(-1)[chosen]
        shape = owner * (int(shape.max()) + 1) + shape
    chosen_sizes = sizes.reshape(-1)[chosen]
    size_rank, _, distinct_sizes = _distinct(chosen_sizes)
    if int(shape.max()) >= np.iinfo(np.int64).max // distinct_sizes:  # no room for both in one integer
        shape = _distinct(shape)[0]
    pair, firsts, _ = _distinct(shape * distinct_sizes + size_rank)  # each distinct (system, group, size)
    # the distinct pairs in order of (system, group, size): each group's sizes together
    pair_shape = shape[firsts]
    bounds = np.flatnonzero(np.diff(pair_shape)) + 1
    starts = np.concatenate(([0], bounds)).astype(np.int64)
    ends = np.append(starts[1:], len(firsts))
    group = np.zeros(len(firsts), np.int64)
    group[bounds] = 1
    group = np.cumsum(group)  # the group of each distinct pair
    heads = firsts[starts]  # one layout (of ``chosen``) of each group
    owners = [system] * len(heads) if isinstance(system, System) else [system.members[k] for k in owner[heads].tolist()]
    fabrics = []
    for on, group_ranks, group_stride in zip(
        owners, chosen_ranks[heads].tolist(), chosen_strides[heads].tolist(), strict=True
    ):
        fabric = on.group_fabric(group_ranks, group_stride)
        assert fabric is not None
        fabrics.append(fabric)
    pair_sizes = chosen_sizes[firsts]
    priced = np.zeros(len(firsts))
    # the analytic model prices the small groups on switched fabrics in one expression (a call per group would cost
    # more than its arithmetic); a large group, a torus's, another model's or a lone group are priced one by one
    small = (ends - starts) < ALONE_FROM
    together = np.array([isinstance(cost, AnalyticCost) and fabric.torus is None for fabric in fabrics]) & small
    if together.sum() > 1:
        assert isinstance(cost, AnalyticCost)
        mine = together[group]
        priced[mine] = collective_times_s(
            op, pair_sizes[mine], [f for f, joins in zip(fabrics, together, strict=True) if joins],
            (np.cumsum(together) - 1)[group[mine]], cost.calibration,
        )  # fmt: skip
    else:
        together[:] = False
    for k in np.flatnonzero(~together).tolist():
        priced[starts[k] : ends[k]] = cost.time_s(op, pair_sizes[starts[k] : ends[k]], fabrics[k])
    out.reshape(-1)[chosen] = priced[pair]
    return out


def _distinct(values: npt.NDArray[Any]) -> tuple[IntArray, IntArray, int]:
    """Each element's rank among the distinct values (ascending), the position of one element of each distinct
    value (in that order), and how many there are: ``np.unique`` with its inverse, by one unstable sort (which of
    equal elements comes first does not matter here)."""
    order = np.argsort(values)
    ordered = values[order]
    new = np.empty(len(values), dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    rank = np.cumsum(new) - 1
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = rank
    return inverse, order[new], int(rank[-1]) + 1
