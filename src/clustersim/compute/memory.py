"""Memory per device of a training layout: weights, gradients, optimizer state, activations.

Model state uses mixed-precision Adam as Megatron-LM keeps it unless the framework keeps it otherwise
(``SoftwareProfile.state_bytes``: FSDP holds fp32 parameters and gradients and no separate master, 4 + 4 +
8): 16-bit weights (2 bytes; FP8 training keeps them too), FP32 gradients (4) and FP32 master weights,
momentum and variance (12), so 18 bytes per parameter; ZeRO stage 1 shards the 12, stage 2 also the
gradients, stage 3 also the weights over the ranks that hold the same parameters: ``dp * cp`` for the
dense ones, and for a routed expert's the expert data-parallel group, ``tp * cp * dp / (ep * etp)``
(Megatron-Core's distributed optimizer shards expert parameters over its expert data-parallel group,
``expert_data_parallel_size``). The heaviest pipeline stage is counted: its share of the layers plus
the embedding (first stage) or the output matrix (last stage).

Activations follow Korthikanti et al. 2022 (arXiv 2205.05198, section 4), generalized to GQA and
gated MLPs: per layer and micro-batch, with ``S = s b`` tokens (``s`` divided by ``cp``), bytes

* outside the tensor-parallel region (split by ``t`` only with sequence parallelism): two norm
  inputs ``4Sh``, QKV and MLP inputs ``4Sh``, two dropout masks ``2Sh``: ``10Sh``; a framework whose tensor
  parallelism keeps the QKV and MLP inputs as it gathered them for the weight gradients (torchtitan's
  ``ColwiseParallel``, not Megatron's gather again in the backward) keeps those ``4Sh`` whole;
* inside (split by ``t``): Q, K, V ``2S(q + 2kv)``, the projection input ``2Sq``, the MLP's inner
  activations ``2S f (matrices - 1) + 2S f`` per active expert;
* the attention scores ``5 a s S`` (split by ``t``) unless the kernel is fused (flash attention) or
  the attention core is recomputed (selective);
* with full recompute only the layer input ``2Sh`` (split by ``t`` with SP) stays, plus one layer's
  activations while it is recomputed;
* in an FP8 (or 4-bit) job under a framework that keeps its GEMM inputs quantized for the weight
  gradients (Transformer Engine: ``SoftwareProfile.float8_saved_inputs``), those inputs take 1 byte, not 2:
  the QKV and MLP inputs ``2Sh``, the projection input ``S q`` and the second MLP GEMM's input ``S f``
  fewer bytes;
* offloaded layers (``Layout.offload_layers``, pp 1 and no recompute) keep nothing on the device beyond one
  layer's activations in flight to or from host memory;
* selective recompute under a framework that recomputes every second matmul instead of the attention core
  (``SelectiveRecompute.ALTERNATE_MATMULS``, torchtitan's per-op policy: it saves the outputs of ``aten.mm`` but
  every second one per block, of attention and of the reduce-scatters, and recomputes the rest) keeps the block's
  input, the first, third, ... matmul outputs in the block's order (Q, K, V, the projection, then the MLP's), the
  attention output and, with TP, the two reduce-scatters' outputs; a row-parallel matmul's output is a full-width
  partial sum on every rank.

The first pipeline stage holds ``min(pp, micro-batches)`` micro-batches in flight (x ``1 + (pp-1) /
(pp vp)`` interleaved); the last holds one (interleaved: ``(vp - 1) pp + 1`` of its layer chunks) and the loss's
logits, ``loss_bytes_per_logit`` each (the framework's: 4, Megatron's FP32 softmax), ``S V / t`` of them; the
heavier of the two is counted. ZeRO 3 also holds the 16-bit copies it gathers, where the framework's are counted
(``SoftwareProfile.zero3_gathered_units``): at the loss, two gather units (FSDP's a block: the last, kept gathered
after the forward, and the one prefetched for the backward; DeepSpeed's a submodule, half a GPT block) and the
output matrix. Where the framework pipelines FSDP so (``SoftwareProfile.pipeline_unsharded_state``, torchtitan), a
pipelined layout under ZeRO 2-3 holds its stage whole through the step: the weights' shards and their gathered
16-bit copy (FSDP2's ``reshard_after_forward`` off while pipelining, and torch.distributed.pipelining's
``set_reshard_after_backward(False)``), and the gradients unsharded in their FP32 reduce type until the last
micro-batch's backward (pipelining's ``set_requires_gradient_sync(False)``; FSDP2 accumulates them in its
``reduce_dtype``).

Other architectures (see ``Transformer``): Q, K, V and the projection input are ``q + kv + value +
context`` wide (latent attention's latents are not counted); a MoE model's leading dense layers sit
on the first stage, and the heavier of that stage and a MoE-only one is counted, while their
activations use the layers' average MLP.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.choices import RecomputeModule, SelectiveRecompute
from clustersim.compute.stages import stage_layers
from clustersim.execution import IntArray, LayoutArrays
from clustersim.recompute_layout import stated_flags
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

WEIGHT_BYTES = 2.0  # 16-bit weights
# An 8-bit job's parameters all-gathered in its own format (Megatron's fp8_param_gather, torchao's FSDP float8
# all-gather): a byte an element and MXFP8's E8M0 scale per 32 (a tensorwise FP8 tensor's single scale is within 3% of
# it). Every gathered parameter is counted so, the embedding, output and norm weights that stay 16-bit too (a few
# percent of a large model's parameters).
FP8_GATHERED_WEIGHT_BYTES = 1.0 + 1.0 / 32
GRADIENT_BYTES = 4.0  # FP32 main gradients
OPTIMIZER_BYTES = 12.0  # FP32 master weights, Adam momentum and variance
ACTIVATION_BYTES = 2.0  # 16-bit activations
LOSS_BYTES_PER_LOGIT = 4.0  # the FP32 softmax Megatron's vocab-parallel cross entropy keeps for its backward
# Assumed, not fitted (the ground truth excludes them): memory the framework holds beyond the model
# (CUDA context, cuBLAS/NCCL workspaces and buffers) and the caching allocator's fragmentation.
RESERVED_BYTES = 2.5 * 2**30
FRAGMENTATION = 0.05


@dataclass(frozen=True)
class MemoryArrays:
    """Bytes per device of the heaviest pipeline stage, one element per layout."""

    weights: FloatArray
    gradients: FloatArray
    optimizer: FloatArray
    activations: FloatArray
    params_per_device: FloatArray  # parameters held (before ZeRO sharding)

    @property
    def model_state(self) -> FloatArray:
        """Weights, gradients and optimizer state."""
        return self.weights + self.gradients + self.optimizer

    @property
    def total(self) -> FloatArray:
        """Model state and activations (what the Korthikanti et al. figures count)."""
        return self.model_state + self.activations

    @property
    def fragmentation(self) -> FloatArray:
        """The caching allocator's fragmentation (assumed; see FRAGMENTATION)."""
        return FRAGMENTATION * self.activations

    @property
    def overhead(self) -> FloatArray:
        """Framework buffers and allocator fragmentation (assumed; see RESERVED_BYTES)."""
        return RESERVED_BYTES + self.fragmentation

    @property
    def required(self) -> FloatArray:
        """What a run needs: total plus overhead."""
        return self.total + self.overhead


def params_per_device(model: Transformer, lay: LayoutArrays) -> FloatArray:
    """Parameters on a device of the heaviest stage (before ZeRO sharding)."""
    # Routed experts: ``experts / ep`` of them, each split over the expert tensor-parallel ranks.
    routed = (model.moe.experts * model.mlp_params() / lay.ep / lay.etp) if model.moe else 0.0
    return _stage_params(model, lay, routed)


SyncGroup = tuple[FloatArray, IntArray, IntArray]  # parameters per device, ranks of the group, their stride


def data_parallel_groups(model: Transformer, lay: LayoutArrays) -> tuple[SyncGroup, ...]:
    """The parameters of a device of the heaviest stage that each data-parallel group reduces (and ZeRO
    shards), with the group's ranks and how many ranks apart they are: the routed experts' over the expert
    data-parallel ranks, the rest over the ``dp * cp`` ranks ``tp`` apart."""
    params = params_per_device(model, lay)
    if model.moe is None:
        return ((params, lay.dp * lay.cp, lay.tp),)
    dense = _stage_params(model, lay, 0.0)
    return (dense, lay.dp * lay.cp, lay.tp), (params - dense, lay.expert_dp, lay.expert_dp_stride)


def local_params(groups: tuple[SyncGroup, ...], lay: LayoutArrays, stage: int) -> FloatArray:
    """Parameters a device keeps of state that ZeRO ``stage`` and above shard over each group's ranks."""
    shares = (held / np.where(lay.zero >= stage, ranks, 1) for held, ranks, _ in groups)  # shapes broadcast
    return np.asarray(sum(shares), dtype=float)


def _layer_params(model: Transformer, lay: LayoutArrays, routed: FloatArray | float) -> FloatArray:
    """Parameters of one layer on a device with ``routed`` routed-expert parameters per MoE layer (an average layer
    where some have no MLP: ``mlp_share`` of its MLP, and one norm fewer in the rest)."""
    shared = (model.moe.shared_experts * model.mlp_params(model.hidden)) if model.moe else model.mlp_params()
    tp, share = lay.tp.astype(float), model.mlp_share
    # a latent MoE's projections are whole on every tensor-parallel rank (Megatron-Core's parallel_mode "duplicated")
    mlps = (model.router_params() + shared) / tp + model.latent_projection_params() + routed
    norms = model.layer_norm_params() - (1 - share) * model.norm_params()
    return np.asarray(model.mixer_params() / tp + share * mlps, dtype=float) + float(norms)


def _end_params(model: Transformer, lay: LayoutArrays) -> FloatArray:
    """The embedding's parameters on a device (with pp 1 an untied output matrix too)."""
    embedding = model.vocab * model.hidden / lay.tp.astype(float)
    positions = model.embedding_params() - model.vocab * model.hidden * (1 if model.tied_embeddings else 2)
    one_stage_output = 0.0 if model.tied_embeddings else embedding  # pp == 1: untied output matrix too
    return np.asarray(np.where(lay.pp == 1, embedding + positions + one_stage_output, embedding + positions))


def gathered_params(model: Transformer, lay: LayoutArrays, layers: float = 2.0) -> FloatArray:
    """Parameters ZeRO 3 holds gathered at the loss beside its shards: ``layers`` layers' worth of its gather units
    (FSDP's two blocks: the one it computes and the one it prefetches) and the output matrix (0 below ZeRO 3 or
    without gathered units)."""
    routed = (model.moe.experts * model.mlp_params() / lay.ep / lay.etp) if model.moe else 0.0
    output = model.vocab * model.hidden / lay.tp.astype(float)
    held = layers * _layer_params(model, lay, routed) + (output if layers > 0 else 0.0)
    return np.asarray(np.where(lay.zero >= 3, held, 0.0), dtype=float)


def _stage_params(model: Transformer, lay: LayoutArrays, routed: FloatArray | float) -> FloatArray:
    """Parameters on a device of the heaviest stage with ``routed`` routed-expert parameters per MoE layer."""
    tp = lay.tp.astype(float)
    layer = _layer_params(model, lay, routed)
    ends = _end_params(model, lay)
    held = stage_layers(model, lay) * layer
    dense = (model.mixer_params() + model.dense_mlp_params()) / tp + model.layer_norm_params()
    if model.moe_layer_step > 1:  # dense blocks between MoE ones: n blocks hold at most ceil(n / step) MoE ones
        n = stage_layers(model, lay)
        held = held + (n - np.ceil(n / model.moe_layer_step)) * (dense - layer)
    if model.dense_layers:  # on the first stage, in place of MoE layers
        first = held + np.minimum(model.dense_layers, stage_layers(model, lay)) * (dense - layer)
        held = np.where(lay.pp == 1, first, np.maximum(first, held))
    mtp = model.mtp_layers * model.mtp_module_params() / tp  # beyond its block, which stage_layers counts
    return held + ends + model.norm_params() + mtp


def memory_per_device(
    model: Transformer,
    lay: LayoutArrays,
    *,
    seq_len: int,
    global_batch: int,
    fused_attention: bool,
    state_bytes: tuple[float, float, float] = (WEIGHT_BYTES, GRADIENT_BYTES, OPTIMIZER_BYTES),
    float8_inputs: bool = False,
    selective: SelectiveRecompute = SelectiveRecompute.ATTENTION_CORE,
    loss_bytes_per_logit: float = LOSS_BYTES_PER_LOGIT,
    zero3_gathered_layers: float = 0.0,
    gathered_inputs: bool = False,
    pipeline_unsharded: bool = False,
) -> MemoryArrays:
    """Memory of each layout (see the module docstring for the accounting); ``state_bytes``: bytes per
    parameter of the weights, gradients and optimizer state (the framework's: ``SoftwareProfile.state_bytes``);
    ``selective`` and ``loss_bytes_per_logit``: what the framework's selective recompute and loss keep;
    ``zero3_gathered_layers``: the layers' worth of 16-bit weights ZeRO 3 holds gathered (``gathered_params``);
    ``gathered_inputs``: tensor parallelism keeps the QKV and MLP inputs it gathered (``layer_activation_bytes``);
    ``pipeline_unsharded``: with pp > 1 under ZeRO 2-3 the stage's weights stay gathered in 16 bits beside their
    shards and its gradients accumulate whole (``SoftwareProfile.pipeline_unsharded_state``)."""
    weight_bytes, gradient_bytes, optimizer_bytes = state_bytes
    groups = data_parallel_groups(model, lay)

    def sharded(nbytes: float, stage: int) -> FloatArray:
        """Bytes per device of state that ZeRO ``stage`` and above shard over each group's ranks."""
        return nbytes * local_params(groups, lay, stage)

    whole = np.asarray(sum(held for held, _, _ in groups), dtype=float)  # the stage's parameters, on this device
    weights = sharded(weight_bytes, 3) + ACTIVATION_BYTES * gathered_params(model, lay, zero3_gathered_layers)
    gradients = sharded(gradient_bytes, 2)
    if pipeline_unsharded:
        held = (lay.pp > 1) & (lay.zero >= 2)
        weights = np.where(held, sharded(weight_bytes, 2) + ACTIVATION_BYTES * whole, weights)
        gradients = np.where(held, gradient_bytes * whole, gradients)
    optimizer = sharded(optimizer_bytes, 1)
    return MemoryArrays(
        weights=weights,
        gradients=gradients,
        optimizer=optimizer,
        activations=activation_bytes(
            model,
            lay,
            seq_len=seq_len,
            global_batch=global_batch,
            fused=fused_attention,
            float8_inputs=float8_inputs,
            selective=selective,
            loss_bytes_per_logit=loss_bytes_per_logit,
            gathered_inputs=gathered_inputs,
        ),
        params_per_device=whole,
    )


def _mlp_width(model: Transformer) -> float:
    """The inner width a token's MLPs produce in an average layer (a MoE layer's active experts at their capacity)."""
    capacity = model.moe.capacity_factor if model.moe else 1.0
    moe = model.expert_ffn * model.active_mlps * capacity * model.moe_layers
    return float(moe + model.ffn_hidden * model.dense_mlp_layers) / model.layers  # MLP-free layers make none


def _mixer_kept_width(model: Transformer) -> float:
    """Elements per token the token mixer of an average layer keeps for its backward (before tensor parallelism): an
    attention layer's queries, keys, values and output (and its output gate's input, where it has one); a recurrent
    layer's input projection (queries, keys, values, gate, decay and step; Mamba-2's z, x, B, C and step), the
    convolution's output, the delta rule's or scan's output and its gated norm's (the output projection's input)."""
    gate = model.q_width if model.attention_gate else 0
    attention = float(model.q_width + model.kv_width + model.value_width + model.context_width + gate)
    linear = model.linear_attention
    delta_rule = linear.input_matmul_params(1) + linear.conv_channels + 2 * linear.value_width if linear else 0.0
    return model.mixer_mean(attention, delta_rule)


def alternate_matmul_bytes(model: Transformer, lay: LayoutArrays, *, seq_len: int) -> FloatArray:
    """Bytes one layer keeps for one micro-batch under a per-op policy that recomputes every second matmul (see the
    module docstring): the block's input, matmuls 1, 3, 5, ... of Q, K, V, the projection and the MLP's (Q, V, the
    MLP's first, third, ... up matrix, split over TP, and its down matrix where it falls on an odd place, a
    row-parallel output kept whole: a partial sum on every rank), attention's output and, with TP, the two
    reduce-scatters' outputs."""
    tokens = seq_len / lay.cp * lay.micro_batch
    tp = lay.tp
    h, ffn = float(model.hidden), _mlp_width(model)
    ups = model.ffn_type.num_matrices - 1  # the MLP's column-parallel matrices, at places 5, 6, ... of the block
    down = h if ups % 2 == 0 else 0.0  # the down matrix, at place 5 + ups
    split = model.q_width + model.value_width + math.ceil(ups / 2) * ffn + model.context_width
    kept = split / tp + down + h / np.where(lay.sequence_parallel, tp, 1) + np.where(tp > 1, 2.0 * h / tp, 0.0)
    return ACTIVATION_BYTES * tokens * kept


def layer_activation_bytes(
    model: Transformer,
    lay: LayoutArrays,
    *,
    seq_len: int,
    fused: bool,
    float8_inputs: bool = False,
    selective: SelectiveRecompute = SelectiveRecompute.ATTENTION_CORE,
    gathered_inputs: bool = False,
) -> FloatArray:
    """Bytes one layer keeps for one micro-batch without full recompute (``float8_inputs``: its GEMM inputs kept
    in 8 bits; ``selective``: what the framework's selective recompute gives back; ``gathered_inputs``: the QKV and
    MLP inputs kept as tensor parallelism gathered them, whole, not split over the sequence)."""
    s = seq_len / lay.cp
    tokens = s * lay.micro_batch
    tp = lay.tp.astype(float)
    sp_split = np.where(lay.sequence_parallel, tp, 1.0)
    h, b = model.hidden, ACTIVATION_BYTES
    gemm_inputs = 2 * b * tokens * h  # the QKV and MLP inputs
    outside = 3 * b * tokens * h / sp_split + (gemm_inputs if gathered_inputs else gemm_inputs / sp_split)
    ffn = _mlp_width(model)  # inner width a token's MLPs produce
    inside = b * tokens * (_mixer_kept_width(model) + ffn * model.ffn_type.num_matrices)
    if float8_inputs:  # a byte less per element of the QKV, projection and both MLP GEMM inputs
        outside = outside - tokens * 2 * h / sp_split
        inside = inside - tokens * (model.context_width + ffn)
    all_scores = 0.0 if fused else 5 * model.heads * seq_len * tokens
    scores = np.where(lay.recompute_selective, 0.0, all_scores)
    kept = outside + (inside + scores) / tp
    if selective is SelectiveRecompute.ALTERNATE_MATMULS:
        kept = np.where(lay.recompute_selective, alternate_matmul_bytes(model, lay, seq_len=seq_len), kept)
    stated = lay.recompute_modules
    if stated is not None and np.any(stated):
        norm_outputs = (gemm_inputs if gathered_inputs else gemm_inputs / sp_split) / (2 if float8_inputs else 1)
        widths = module_widths(model, scores_per_token=0.0 if fused else 5.0 * model.heads * seq_len)
        given_back = sum(
            (on * (norm_outputs if m is RecomputeModule.LAYERNORM else b * tokens * widths[m] / tp)
             for m, on in stated_flags(stated)),
            np.zeros_like(tp),
        )  # fmt: skip
        kept = np.where(stated > 0, outside + (inside + all_scores) / tp - given_back, kept)
    return np.asarray(kept, dtype=float)


def module_widths(model: Transformer, *, scores_per_token: float) -> dict[RecomputeModule, float]:
    """Elements per token (before tensor parallelism) a layer no longer keeps when Megatron-Core recomputes each
    module: the unfused attention's scores (core_attn), the latent attention's up-projected queries, keys and values
    (mla_up_proj), the routed experts' activation outputs (moe_act), the matmul activations of the dense MLPs (mlp),
    of all experts (moe) or of the shared ones (shared_experts); the norms' outputs (layernorm) are counted apart,
    as the QKV and MLP inputs are kept, split by sequence parallelism."""
    matrices, moe = model.ffn_type.num_matrices, model.moe
    capacity, f = (moe.capacity_factor if moe else 1.0), model.expert_ffn
    share = model.moe_layers / model.layers
    routed = f * moe.top_k * capacity * share if moe else 0.0
    shared = f * moe.shared_experts * capacity * share if moe else 0.0
    dense = model.ffn_hidden * model.dense_mlp_layers / model.layers + (0.0 if moe else f * share)
    return {
        RecomputeModule.CORE_ATTN: scores_per_token,
        RecomputeModule.MLA_UP_PROJ: float(model.q_width + model.kv_width + model.value_width) if model.mla else 0.0,
        RecomputeModule.LAYERNORM: 0.0,
        RecomputeModule.MOE_ACT: routed,
        RecomputeModule.MLP: dense * matrices,
        RecomputeModule.MOE: (routed + shared) * matrices,
        RecomputeModule.SHARED_EXPERTS: shared * matrices,
    }


def activation_bytes(
    model: Transformer,
    lay: LayoutArrays,
    *,
    seq_len: int,
    global_batch: int,
    fused: bool,
    float8_inputs: bool = False,
    selective: SelectiveRecompute = SelectiveRecompute.ATTENTION_CORE,
    loss_bytes_per_logit: float = LOSS_BYTES_PER_LOGIT,
    gathered_inputs: bool = False,
) -> FloatArray:
    """Activation bytes on the heavier of the first pipeline stage (the most micro-batches in flight) and the last
    (fewer, and the loss's logits at ``loss_bytes_per_logit``)."""
    per_layer = layer_activation_bytes(
        model,
        lay,
        seq_len=seq_len,
        fused=fused,
        float8_inputs=float8_inputs,
        selective=selective,
        gathered_inputs=gathered_inputs,
    )
    tokens = seq_len / lay.cp * lay.micro_batch
    tp = lay.tp.astype(float)
    checkpoint = ACTIVATION_BYTES * tokens * model.hidden / np.where(lay.sequence_parallel, tp, 1.0)
    stored = np.where(lay.recompute_full, checkpoint, per_layer)
    micro_batches = np.maximum(global_batch // (lay.dp * lay.micro_batch), 1)
    in_flight = np.minimum(lay.pp, micro_batches).astype(float)
    interleave = np.where(lay.vp > 1, 1 + (lay.pp - 1) / (lay.pp * lay.vp), 1.0)
    assert lay.offload_layers is not None  # LayoutArrays fills it
    offloaded = lay.offload_layers.astype(float)  # pp 1 only (a layout rule): one micro-batch in flight
    resident = stage_layers(model, lay) - offloaded + np.minimum(offloaded, 1.0)  # one layer on its way
    working = np.where(lay.recompute_full, per_layer, 0.0)  # one layer rebuilt at a time
    first = resident * in_flight * interleave * stored + working
    # the last rank's warm-up: one micro-batch, or (vp - 1) pp + 1 of its vp layer chunks interleaved
    last_in_flight = np.minimum(micro_batches * lay.vp, (lay.vp - 1) * lay.pp + 1) / lay.vp
    logits = loss_bytes_per_logit * tokens * model.vocab / tp
    last = resident * last_in_flight * stored + working + logits
    return np.asarray(np.maximum(first, last), dtype=float)


def layers_to_offload(required: FloatArray, per_layer: FloatArray, usable_bytes: float, layers: int) -> FloatArray:
    """The fewest layers whose activations must go to host memory for a layout needing ``required`` bytes (nothing
    offloaded, pp 1, no recompute) to need at most ``usable_bytes``: each offloaded layer but the one in flight frees
    ``per_layer`` and its fragmentation share. 0 where it fits already, -1 where no count below ``layers`` does."""
    freed = per_layer * (1 + FRAGMENTATION)
    with np.errstate(divide="ignore", invalid="ignore"):
        count = 1 + np.ceil((required - usable_bytes) / freed)
    count = np.where(required <= usable_bytes, 0.0, count)
    return np.asarray(np.where(count < layers, count, -1.0), dtype=float)


def offloaded_required(required: FloatArray, per_layer: FloatArray, offloaded: FloatArray) -> FloatArray:
    """``required`` (nothing offloaded) with ``offloaded`` layers' activations in host memory (``activation_bytes``:
    the device keeps one of them in flight)."""
    freed = per_layer * (1 + FRAGMENTATION) * np.maximum(offloaded - 1, 0)
    return np.asarray(required - freed, dtype=float)


def gathered_weight_bytes(precision: Dtype, fp8_param_gather: bool) -> float:
    """Bytes per parameter a ZeRO all-gather moves: the job's 8-bit format where the framework gathers in it
    (``FP8_GATHERED_WEIGHT_BYTES``), else 16 bits."""
    return FP8_GATHERED_WEIGHT_BYTES if precision is Dtype.FP8 and fp8_param_gather else WEIGHT_BYTES
