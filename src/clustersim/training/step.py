"""One training step, term by term, for many layouts at once (numpy arrays, one element per layout).

Compute per micro-batch and layer on one device is the sum of the operations of
``clustersim.workload.ops`` (GEMMs, the attention core, memory traffic), each on a roofline with
the family's fitted efficiencies; the output head runs on the last stage. Recompute repeats the
forward pass (full) or the attention core (selective).

Communication goes through ``clustersim.network`` on the links each group uses (see ``System``): TP
all-reduces (or all-gather + reduce-scatter with SP, same bytes) of ``T h`` activations, two forward
and two backward per layer (and two more with full recompute); CP exchanges keys and values, hidden
behind the attention core; EP all-to-all dispatch and combine; PP send/recv of activations; DP
gradient all-reduce (ZeRO 0) or reduce-scatter + parameter all-gather (ZeRO >= 1), overlapped with the
last micro-batch's backward and the first's forward when enabled.

The step is ``(m + (pp - 1) / vp) x`` the slowest stage's micro-batch time, plus exposed DP time and
the optimizer (a memory-bound pass over the local shard of parameters).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.memory import params_per_device, stage_layers
from clustersim.execution import LayoutArrays
from clustersim.network.analytic import collective_time_s
from clustersim.network.collectives import Op
from clustersim.system import System
from clustersim.workload.ops import Operation, OpKind, head_operations, layer_operations
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

ACT_BYTES = 2.0  # activations and TP/PP messages in 16 bits (FP8 runs too)
# Gradients reduced across data-parallel ranks: FP32 main gradients with FP16 loss scaling (Megatron-LM
# reduces its FP32 buffers), 16-bit with BF16/FP8 (Megatron-Core's default, grad_reduce_in_fp32 off).
GRAD_COMM_BYTES = {Dtype.FP16: 4.0, Dtype.BF16: 2.0, Dtype.FP8: 2.0}
OPTIMIZER_BYTES_PER_PARAM = 30.0  # Adam: read grad, master, m, v (16); write master, m, v (12), weight (2)


@dataclass(frozen=True)
class OperationTimes:
    """Seconds of one operation per layer (or per head) and micro-batch, forward and backward."""

    name: str
    forward_s: FloatArray
    backward_s: FloatArray
    in_head: bool  # the output head (last pipeline stage) rather than every layer


def operation_times(
    ops: list[Operation], system: System, eff: FamilyEfficiency, precision: Dtype, *, in_head: bool = False
) -> list[OperationTimes]:
    """Roofline time of each operation: GEMMs at the size-dependent fraction of the precision's peak,
    the attention core at its own fraction of the 16-bit peak, memory traffic at the achieved HBM bandwidth."""
    half = system.peak_flop_per_s(Dtype.FP16 if precision is Dtype.FP16 else Dtype.BF16)
    gemm_peak = half
    if precision is Dtype.FP8:
        gemm_peak = system.peak_flop_per_s(Dtype.FP8) * eff.fp8_efficiency_ratio
    hbm = system.memory_bandwidth_bytes_per_s * eff.memory_efficiency
    out = []
    for op in ops:
        if op.kind is OpKind.GEMM:
            forward = op.flop / (gemm_peak * eff.gemm_fraction(np.maximum(op.gemm_flop, 1.0)))
        elif op.kind is OpKind.ATTENTION:
            forward = op.flop / (half * eff.gemm_max * eff.attention)
        else:
            forward = op.bytes / hbm
        out.append(OperationTimes(op.name, forward, op.backward_ratio * forward, in_head))
    return out


@dataclass(frozen=True)
class StepTerms:
    """Seconds per step of each term, one element per layout; ``*_link_s`` before overlap."""

    forward_s: FloatArray
    backward_s: FloatArray
    recompute_s: FloatArray
    bubble_s: FloatArray
    tp_link_s: FloatArray
    tp_exposed_s: FloatArray
    cp_link_s: FloatArray
    cp_exposed_s: FloatArray
    ep_link_s: FloatArray
    pp_link_s: FloatArray
    dp_link_s: FloatArray
    dp_exposed_s: FloatArray
    optimizer_s: FloatArray
    micro_batches: FloatArray
    operations: list[OperationTimes]  # per layer (or head) and micro-batch

    @property
    def step_s(self) -> FloatArray:
        """Step time: everything on the critical path."""
        return (
            self.forward_s
            + self.backward_s
            + self.recompute_s
            + self.bubble_s
            + self.tp_exposed_s
            + self.cp_exposed_s
            + self.ep_link_s
            + self.pp_link_s
            + self.dp_exposed_s
            + self.optimizer_s
        )


def collective_s(
    system: System,
    op: Op,
    size_bytes: npt.ArrayLike,
    num_ranks: npt.ArrayLike,
    stride: npt.ArrayLike,
    where: npt.ArrayLike = True,
) -> FloatArray:
    """Time of one collective per layout where ``where`` holds (0 elsewhere and for a group of one rank).

    Layouts whose groups have the same shape share one vectorized call.
    """
    sizes = np.asarray(size_bytes, dtype=float)
    zeros = np.zeros(sizes.shape, dtype=np.int64)
    num_ranks, stride = zeros + np.asarray(num_ranks, np.int64), zeros + np.asarray(stride, np.int64)
    wanted = (zeros == 0) & np.asarray(where, dtype=bool)
    size_bytes = sizes
    out = np.zeros(size_bytes.shape)
    for ranks, step in {(int(r), int(s)) for r, s, w in zip(num_ranks, stride, wanted, strict=True) if w and r > 1}:
        fabric = system.group_fabric(ranks, step)
        assert fabric is not None
        mask = (num_ranks == ranks) & (stride == step) & wanted
        out[mask] = collective_time_s(op, size_bytes[mask], fabric)
    return out


def step_terms(
    model: Transformer,
    system: System,
    eff: FamilyEfficiency,
    lay: LayoutArrays,
    *,
    seq_len: int,
    global_batch: int,
    precision: Dtype,
) -> StepTerms:
    """Every term of the step for each layout (see the module docstring)."""
    tp, cp, pp, vp = (x.astype(float) for x in (lay.tp, lay.cp, lay.pp, lay.vp))
    tokens = lay.micro_batch * seq_len / cp
    h, kv = model.hidden, model.kv_width
    sp_split = np.where(lay.sequence_parallel, tp, 1.0)
    ep = lay.ep.astype(float)
    layer_ops = layer_operations(
        model, tokens=tokens, seq_len=seq_len, tp=tp, sp_split=sp_split, ep=ep, fused_attention=eff.fused_attention
    )
    layer = operation_times(layer_ops, system, eff, precision)
    head = operation_times(head_operations(model, tokens=tokens, tp=tp), system, eff, precision, in_head=True)
    kinds = {op.name: op.kind for op in layer_ops}
    attention_names = {"attention core", "attention scores"}
    layer_fwd = sum((t.forward_s for t in layer), np.zeros_like(tokens))
    layer_bwd = sum((t.backward_s for t in layer), np.zeros_like(tokens))
    linear_fwd = sum((t.forward_s for t in layer if kinds[t.name] is OpKind.GEMM), np.zeros_like(tokens))
    attention_fwd = sum((t.forward_s for t in layer if t.name in attention_names), np.zeros_like(tokens))
    layer_recompute = np.where(lay.recompute_full, layer_fwd, np.where(lay.recompute_selective, attention_fwd, 0.0))

    # A stage's micro-batch: its layers, and the head on the last stage (the slowest stage).
    layers_here = stage_layers(model, lay)
    fwd_mb = layers_here * layer_fwd + sum(t.forward_s for t in head)
    bwd_mb = layers_here * layer_bwd + sum(t.backward_s for t in head)
    rec_mb = layers_here * layer_recompute

    # Communication per micro-batch.
    act_bytes = ACT_BYTES * tokens * h
    tp_per_layer = collective_s(system, Op.ALL_REDUCE, act_bytes, lay.tp, np.ones_like(lay.tp))
    # Two all-reduces forward, two backward, two more in a fully recomputed forward; sequence
    # parallelism swaps each for an all-gather + reduce-scatter (same bytes) and all-gathers the two
    # GEMM inputs again in the backward pass (one all-reduce's worth).
    tp_count = 4 + 2 * lay.recompute_full + lay.sequence_parallel
    tp_link = layers_here * tp_count * tp_per_layer
    gemm_time = layers_here * (linear_fwd * (3 + lay.recompute_full))
    tp_overlap = np.where(np.isnan(lay.tp_overlap), float(eff.tp_overlap), lay.tp_overlap) > 0
    tp_exposed = np.where(tp_overlap, np.maximum(tp_link - gemm_time, 0.0), tp_link)

    kv_bytes = ACT_BYTES * tokens * 2 * kv / tp * cp
    cp_link = layers_here * 3 * collective_s(system, Op.ALL_GATHER, kv_bytes, lay.cp, lay.tp)
    cp_exposed = np.maximum(cp_link - layers_here * 3 * attention_fwd, 0.0)

    ep_link = np.zeros_like(tp_link)
    if model.moe:
        dispatch = ACT_BYTES * tokens * model.moe.top_k * h
        ep_link = layers_here * 4 * collective_s(system, Op.ALLTOALL, dispatch, lay.ep, lay.tp * lay.cp)

    pp_bytes = act_bytes / tp  # Megatron splits a stage's output over its TP ranks for the send
    pp_hop = collective_s(system, Op.SENDRECV, pp_bytes, np.minimum(lay.pp, 2), lay.tp * lay.cp * lay.dp)
    pp_link = np.where(lay.pp > 1, 2 * vp * pp_hop, 0.0)

    micro_batches = np.maximum(global_batch // (lay.dp * lay.micro_batch), 1).astype(float)
    # The bubble idles for (pp - 1) / vp micro-batch times, communication on the critical path included.
    bubble_share = (pp - 1) / vp
    bubble = bubble_share * (fwd_mb + bwd_mb + rec_mb + tp_exposed + cp_exposed + ep_link + pp_link)

    # Data parallel: gradients (and parameters with ZeRO) across dp * cp ranks.
    params = params_per_device(model, lay)
    dp_ranks = lay.dp * lay.cp
    stride = lay.tp
    grad_bytes = params * GRAD_COMM_BYTES[precision]
    sharded = lay.zero >= 1
    allreduce = collective_s(system, Op.ALL_REDUCE, grad_bytes, dp_ranks, stride, where=~sharded)
    scatter = collective_s(system, Op.REDUCE_SCATTER, grad_bytes, dp_ranks, stride, where=sharded)
    gather = collective_s(system, Op.ALL_GATHER, params * ACT_BYTES, dp_ranks, stride, where=sharded)
    zero3_gathers = np.where(lay.zero >= 3, 2 * micro_batches * gather, 0.0)
    grad_reduce = np.where(lay.zero >= 1, scatter, allreduce)
    param_gather = np.where(lay.zero >= 1, gather, 0.0)
    dp_link = grad_reduce + param_gather + zero3_gathers
    dp_exposed = np.where(
        lay.dp_overlap,
        np.maximum(grad_reduce - bwd_mb, 0.0)
        + np.maximum(param_gather - fwd_mb, 0.0)
        + np.maximum(zero3_gathers - micro_batches * (fwd_mb + bwd_mb), 0.0),
        dp_link,
    )
    shard = np.where(lay.zero >= 1, dp_ranks, 1).astype(float)
    hbm = system.memory_bandwidth_bytes_per_s * eff.memory_efficiency
    optimizer = params / shard * OPTIMIZER_BYTES_PER_PARAM / hbm

    return StepTerms(
        forward_s=micro_batches * fwd_mb,
        backward_s=micro_batches * bwd_mb,
        recompute_s=micro_batches * rec_mb,
        bubble_s=bubble,
        tp_link_s=micro_batches * tp_link,
        tp_exposed_s=micro_batches * tp_exposed,
        cp_link_s=micro_batches * cp_link,
        cp_exposed_s=micro_batches * cp_exposed,
        ep_link_s=micro_batches * ep_link,
        pp_link_s=micro_batches * pp_link,
        dp_link_s=dp_link,
        dp_exposed_s=dp_exposed,
        optimizer_s=optimizer,
        micro_batches=micro_batches,
        operations=layer + head,
    )
