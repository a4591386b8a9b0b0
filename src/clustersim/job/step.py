"""One training step, term by term, for many layouts at once (numpy arrays, one element per layout).

Per micro-batch and layer, on one device (``T = micro_batch x seq / cp`` tokens, ``t`` = tp):

* GEMMs: QKV ``2Th(q+2kv)/t``, projection ``2Tqh/t``, MLP ``2Thf x matrices / t`` per active expert
  (x capacity factor); the logits ``2ThV/t`` on the last stage. Backward is twice the forward.
* attention core ``4Tsq/t`` FLOPs, half of it executed (causal kernels skip masked blocks).
* element-wise HBM traffic (norms, residuals, dropout, biases, the activation function; the loss).
* recompute repeats the forward pass (full) or the attention core (selective).

Communication goes through ``clustersim.comm`` on the links each group uses (see ``System``): TP
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
from clustersim.comm.collectives import Op
from clustersim.comm.model import collective_time_s
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.memory import params_per_device
from clustersim.execution import LayoutArrays
from clustersim.job.system import System
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

ACT_BYTES = 2.0  # activations and TP/PP messages in 16 bits (FP8 runs too)
# Gradients reduced across data-parallel ranks: FP32 main gradients with FP16 loss scaling (Megatron-LM
# reduces its FP32 buffers), 16-bit with BF16/FP8 (Megatron-Core's default, grad_reduce_in_fp32 off).
GRAD_COMM_BYTES = {Dtype.FP16: 4.0, Dtype.BF16: 2.0, Dtype.FP8: 2.0}
OPTIMIZER_BYTES_PER_PARAM = 30.0  # Adam: read grad, master, m, v (16); write master, m, v (12), weight (2)
LOSS_BYTES_PER_LOGIT = 14.0  # softmax cross-entropy forward and backward over FP32 logits
# Element-wise elements moved per token and hidden unit in a layer's forward pass: two norms (read,
# write: 4), two fused bias-dropout-residual adds (read 2, write 1, mask: 7).
OUTSIDE_ELEMS = 11.0
CAUSAL_FRACTION = 0.5  # a fused causal kernel skips the masked half of the score blocks
# Unfused attention materializes the ``a s x s`` scores: bytes per score element moved in the forward
# pass (QK^T writes 2; softmax reads 2, writes 2; dropout reads 2, writes 2 and a 1-byte mask; the
# context GEMM reads 2) and in the backward pass (two more reads of the saved tensors).
SCORE_BYTES_FORWARD = 13.0
SCORE_BYTES_BACKWARD = 15.0
# Backward element-wise traffic / forward: a norm or activation reads its input and the incoming
# gradient and writes one gradient (3 passes for the forward's 2).
ELEMENTWISE_BACKWARD_RATIO = 1.5


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
    size_bytes, num_ranks, stride, wanted = np.broadcast_arrays(
        np.asarray(size_bytes, float), np.asarray(num_ranks, np.int64), np.asarray(stride, np.int64), where
    )
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
    h, q, kv, f = model.hidden, model.q_width, model.kv_width, model.expert_ffn
    matrices = model.ffn_type.num_matrices
    capacity = model.moe.capacity_factor if model.moe else 1.0

    bf16_peak = system.peak_flop_per_s(Dtype.BF16 if precision is not Dtype.FP16 else Dtype.FP16)
    gemm_peak = bf16_peak
    if precision is Dtype.FP8:
        gemm_peak = system.peak_flop_per_s(Dtype.FP8) * eff.fp8_efficiency_ratio

    def gemm_s(flop_each: FloatArray, count: float = 1.0) -> FloatArray:
        return count * flop_each / (gemm_peak * eff.gemm_fraction(flop_each))

    # One layer's forward on one device.
    expert_tokens = tokens * model.active_mlps * capacity
    if model.moe:  # tokens per expert GEMM: the EP group's tokens spread over its experts
        per_expert_tokens = tokens * model.moe.top_k * capacity * lay.ep / model.moe.experts
        mlp_fwd = gemm_s(2 * per_expert_tokens * h * f / tp, matrices * expert_tokens / per_expert_tokens)
    else:
        mlp_fwd = gemm_s(2 * tokens * h * f / tp, float(matrices))
    linear_fwd = gemm_s(2 * tokens * h * (q + 2 * kv) / tp) + gemm_s(2 * tokens * q * h / tp) + mlp_fwd
    hbm = system.memory_bandwidth_bytes_per_s * eff.memory_efficiency
    attention_flop = 4 * tokens * seq_len * q / tp * (CAUSAL_FRACTION if eff.fused_attention else 1.0)
    attention_gemm = attention_flop / (bf16_peak * eff.gemm_max * eff.attention)
    score_elems = 0.0 if eff.fused_attention else tokens * seq_len * model.heads / tp
    attention_fwd = attention_gemm + score_elems * SCORE_BYTES_FORWARD / hbm
    attention_bwd = 2 * attention_gemm + score_elems * SCORE_BYTES_BACKWARD / hbm
    sp_split = np.where(lay.sequence_parallel, tp, 1.0)
    inner_elems = (2 * (q + 2 * kv) + (matrices + 1) * f * model.active_mlps * capacity) / tp
    elem_bytes = ACT_BYTES * tokens * (OUTSIDE_ELEMS * h / sp_split + inner_elems)
    elementwise_fwd = elem_bytes / hbm
    layer_fwd = linear_fwd + attention_fwd + elementwise_fwd
    layer_bwd = 2 * linear_fwd + attention_bwd + ELEMENTWISE_BACKWARD_RATIO * elementwise_fwd
    layer_recompute = np.where(lay.recompute_full, layer_fwd, np.where(lay.recompute_selective, attention_fwd, 0.0))

    # The last stage adds the logits and the loss.
    logits_flop = 2 * tokens * h * model.vocab / tp
    logits_fwd = gemm_s(logits_flop) + LOSS_BYTES_PER_LOGIT / 3 * tokens * model.vocab / tp / hbm
    stage_layers = model.layers / pp
    fwd_mb = stage_layers * layer_fwd + logits_fwd
    bwd_mb = stage_layers * layer_bwd + 2 * logits_fwd
    rec_mb = stage_layers * layer_recompute

    # Communication per micro-batch.
    act_bytes = ACT_BYTES * tokens * h
    tp_per_layer = collective_s(system, Op.ALL_REDUCE, act_bytes, lay.tp, np.ones_like(lay.tp))
    # Two all-reduces forward, two backward, two more in a fully recomputed forward; sequence
    # parallelism swaps each for an all-gather + reduce-scatter (same bytes) and all-gathers the two
    # GEMM inputs again in the backward pass (one all-reduce's worth).
    tp_count = 4 + 2 * lay.recompute_full + lay.sequence_parallel
    tp_link = stage_layers * tp_count * tp_per_layer
    gemm_time = stage_layers * (linear_fwd * (3 + lay.recompute_full))
    tp_overlap = np.where(np.isnan(lay.tp_overlap), float(eff.tp_overlap), lay.tp_overlap) > 0
    tp_exposed = np.where(tp_overlap, np.maximum(tp_link - gemm_time, 0.0), tp_link)

    kv_bytes = ACT_BYTES * tokens * 2 * kv / tp * cp
    cp_link = stage_layers * 3 * collective_s(system, Op.ALL_GATHER, kv_bytes, lay.cp, lay.tp)
    cp_exposed = np.maximum(cp_link - stage_layers * 3 * attention_fwd, 0.0)

    ep_link = np.zeros_like(tp_link)
    if model.moe:
        dispatch = ACT_BYTES * tokens * model.moe.top_k * h
        ep_link = stage_layers * 4 * collective_s(system, Op.ALLTOALL, dispatch, lay.ep, lay.tp * lay.cp)

    pp_bytes = act_bytes / tp  # Megatron splits a stage's output over its TP ranks for the send
    pp_hop = collective_s(system, Op.SENDRECV, pp_bytes, np.minimum(lay.pp, 2), lay.tp * lay.cp * lay.dp)
    pp_link = np.where(lay.pp > 1, 2 * vp * pp_hop, 0.0)

    micro_batches = np.maximum(global_batch // (lay.dp * lay.micro_batch), 1).astype(float)
    per_mb = fwd_mb + bwd_mb + rec_mb
    bubble_share = (pp - 1) / vp
    bubble = bubble_share * (per_mb + tp_exposed + pp_link)

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
    optimizer = params / shard * OPTIMIZER_BYTES_PER_PARAM / hbm

    return StepTerms(
        forward_s=micro_batches * fwd_mb,
        backward_s=micro_batches * bwd_mb,
        recompute_s=micro_batches * rec_mb,
        bubble_s=bubble,
        tp_link_s=(micro_batches + bubble_share) * tp_link,
        tp_exposed_s=micro_batches * tp_exposed,
        cp_link_s=micro_batches * cp_link,
        cp_exposed_s=micro_batches * cp_exposed,
        ep_link_s=micro_batches * ep_link,
        pp_link_s=micro_batches * pp_link,
        dp_link_s=dp_link,
        dp_exposed_s=dp_exposed,
        optimizer_s=optimizer,
        micro_batches=micro_batches,
    )
