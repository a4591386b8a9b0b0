"""What one step's pieces cost on the hardware, per layout: the roofline time of each operation and
the time of a collective on the group's fabric (through the ``CollectiveCost`` interface)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.precision import is_low_precision
from clustersim.network.collectives import Op
from clustersim.network.cost import CollectiveCost
from clustersim.system import System
from clustersim.workload.ops import Operation, OpKind

FloatArray = npt.NDArray[np.float64]

EXPERT_GEMMS = "experts"  # the grouped GEMMs of the routed and shared experts


@dataclass(frozen=True)
class OperationTimes:
    """Seconds of one operation per layer (or per head) and micro-batch, forward and backward."""

    name: str
    forward_s: FloatArray
    backward_s: FloatArray
    in_head: bool  # the output head (last pipeline stage) rather than every layer


def operation_times(
    ops: list[Operation],
    system: System,
    eff: FamilyEfficiency,
    precision: Dtype,
    *,
    in_head: bool = False,
    kernel_efficiency: float = 1.0,
    attention_kernel_efficiency: float = 1.0,
) -> list[OperationTimes]:
    """Roofline time of each operation: GEMMs at the size-dependent fraction of the precision's peak
        (8- and 4-bit GEMMs: their own peak plus the casts of an FP8 GEMM, ``fp8_efficiency_ratio``), the attention core
        at its own fraction of the 16-bit peak (both times the software's ``kernel_efficiency``), memory
        traffic at the achieved HBM bandwidth. A device capped below its TDP computes at the clock its board
    power allows (``System.compute_clock_ratio``). The attention core's fraction grows with the keys each query
    meets in one kernel call (``FamilyEfficiency.attention_fraction``) and is scaled by the software's
    ``attention_kernel_efficiency`` (its kernel against the family's fused one)."""
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
    hbm = system.memory_bandwidth_bytes_per_s * eff.memory_efficiency
    out = []
    for op in ops:
        if op.kind is OpKind.GEMM:
            forward = op.flop * per_flop / (eff.gemm_fraction(np.maximum(op.gemm_flop, 1.0)) * kernel_efficiency)
            if op.name == EXPERT_GEMMS and quantized:  # one slice per local expert and matrix
                forward = forward + op.flop / np.maximum(op.gemm_flop, 1.0) * eff.expert_gemm_s
        elif op.kind is OpKind.ATTENTION:
            keys = np.inf if op.keys_per_call is None else op.keys_per_call
            fraction = eff.attention_fraction(keys) * kernel_efficiency * attention_kernel_efficiency
            forward = op.flop / (half * fraction)
        else:
            forward = op.bytes / hbm
        out.append(OperationTimes(op.name, forward, op.backward_ratio * forward, in_head))
    return out


def collective_s(
    system: System,
    cost: CollectiveCost,
    op: Op,
    size_bytes: npt.ArrayLike,
    num_ranks: npt.ArrayLike,
    stride: npt.ArrayLike,
    where: npt.ArrayLike = True,
) -> FloatArray:
    """Time of one collective per layout where ``where`` holds (0 elsewhere and for a group of one rank).

    Layouts whose groups have the same shape share one vectorized call (the groups found by one sort, not a
    mask per group); one layout (every argument of one element, as a single estimate has) takes one call.
    """
    sizes = np.asarray(size_bytes, dtype=float)
    ranks = np.asarray(num_ranks, np.int64)
    wanted = np.asarray(where, dtype=bool) & (ranks > 1)
    if not wanted.any():  # no layout has this collective (e.g. no ZeRO-3): nothing to price
        return np.zeros(sizes.shape)
    strides = np.asarray(stride, np.int64)
    if sizes.size == 1 and ranks.size == 1 and strides.size == 1:
        fabric = system.group_fabric(int(ranks.flat[0]), int(strides.flat[0]))
        assert fabric is not None
        return np.asarray(cost.time_s(op, sizes.reshape(1), fabric), dtype=np.float64).reshape(sizes.shape)
    out = np.zeros(sizes.shape)
    flat_sizes = sizes.reshape(-1)
    ranks = np.broadcast_to(ranks, sizes.shape).reshape(-1)
    strides = np.broadcast_to(strides, sizes.shape).reshape(-1)
    chosen = np.flatnonzero(np.broadcast_to(wanted, sizes.shape))  # the layouts that have this collective
    shape = ranks[chosen] * (int(strides[chosen].max()) + 1) + strides[chosen]  # one integer per (ranks, stride)
    order = np.argsort(shape, kind="stable")  # each group's layouts together, in layout order
    bounds = np.flatnonzero(np.diff(shape[order])) + 1
    flat_out = out.reshape(-1)
    for group in np.split(chosen[order], bounds):
        first = int(group[0])
        fabric = system.group_fabric(int(ranks[first]), int(strides[first]))
        assert fabric is not None
        flat_out[group] = cost.time_s(op, flat_sizes[group], fabric)
    return out
