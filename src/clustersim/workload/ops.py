"""The operations of one transformer layer (and of the output head) on one device: FLOPs and bytes.

For ``T`` tokens in a micro-batch on the device (``micro_batch x seq / cp``), tensor parallel ``t``,
widths ``h`` (model), ``q`` (query heads x head_dim), ``kv`` and ``f`` (MLP), forward pass:

=====================  ==========  =====================================================
operation              kind        forward work on one device
=====================  ==========  =====================================================
qkv                    gemm        ``2 T h (q + 2 kv) / t``
attention core         attention   ``4 T s q / t`` (scores and context), x 0.5 when a fused
                                   causal kernel skips the masked blocks
attention scores       memory      unfused kernels only: ``13`` bytes per score element,
                                   ``T s heads / t`` elements (written, softmaxed, dropped out, read)
output projection      gemm        ``2 T q h / t``
delta rule             attention   recurrent layers only (``clustersim.workload.linear_attention``): a
                                   Gated DeltaNet's convolution and delta rule, as an attention kernel over
                                   chunks of its ``chunk_tokens`` keys; the layer average of qkv, the core
                                   and the output projection counts their projections in place of the
                                   attention's and no keys
scan                   scan        Mamba-2's convolution and chunked scan, in its place, at the rate its SSD
                                   kernels reach: the slower of their measured shares of the 16-bit peak and
                                   of the FP32 rate (``clustersim.compute.scan_kernel``)
mlp / experts          gemm        ``2 T h f x matrices / t`` per active expert (x capacity factor); a
                                   latent MoE's routed experts at its latent width ``l`` in place of ``h``
router                 gemm        ``2 T h E`` (MoE only, replicated across TP)
latent projections     gemm        latent MoE only: ``2 T (2 h l)`` down to the latent and back, whole on
                                   every TP rank (``T / t`` tokens under sequence parallelism)
token permutation      memory      MoE only: ``4`` copies (read and write) of an ``h``-wide (``l``-wide) 16-bit row
                                   per routed token-expert pair, ``T k / t`` pairs under sequence
                                   parallelism (into expert order and back, around the all-to-all);
                                   ``2`` through the flex dispatcher (DeepEP, HybridEP)
norms and residuals    memory      ``11 T h`` 16-bit elements (two norms, two bias-dropout-adds; half
                                   in a layer with no MLP), split by ``t`` under sequence parallelism
bias and activation    memory      ``(2 (q + 2 kv) + (matrices + 1) f) T / t`` 16-bit elements per MLP a
                                   token passes (a fused expert MLP's routed experts apply theirs inside
                                   their GEMMs: ``fused_expert_mlp``)
eager element-wise     memory      PyTorch eager stacks only (no torch.compile): what running the
                                   norms, rotary embeddings, GQA key/value expansion, attention
                                   layout and SwiGLU as one kernel per op adds to the fused counts
float8 casts           memory      FP8 jobs under a recipe other than tensorwise: the recipe's cast
                                   and rescale bytes beyond tensorwise (``clustersim.workload.float8``)
float8 scaled GEMMs    gemm        the same recipes' GEMM time beyond tensorwise cuBLAS, as FLOPs at
                                   the FP8 rate (``clustersim.workload.float8``)
logits (head)          gemm        ``2 T h V / t`` on the last pipeline stage, once more per MTP module
loss (head)            memory      ``14 / 3`` bytes per FP32 logit forward (softmax cross-entropy)
mtp projection (head)  gemm        ``2 T (2h) h / t`` per multi-token-prediction module
eager loss (head)      memory      PyTorch eager stacks only: the unfused upcast, log-softmax and NLL
                                   kernels' bytes beyond the fused count, ``22 - 14 / 3`` per logit
                                   forward and ``26 - 28 / 3`` backward
=====================  ==========  =====================================================

Each operation carries the ratio of its backward work to its forward work: 2 for GEMMs (data and
weight gradients) and an unfused attention core, 2.5 for a fused one (its backward recomputes the
scores), 15/13 for unfused scores, 1.5 for element-wise kernels (input and incoming gradient read,
one gradient written, for the forward's read and write), 1 for the token permutation (its backward
moves the gradients through the inverse permutations), 2 for the loss. The attention core also
carries the keys one query meets in one kernel call (``keys_per_call``: all of them, or a ring
step's share under context parallelism), which sets the kernel's efficiency. Quantities are numpy
arrays so that many layouts evaluate at once.

Other architectures (see ``Transformer``): latent attention's QKV GEMM is its down and up
projections and its core ``2 T s (q + context) / t`` with the value width; a windowed layer's fused
causal core meets ``m (1 - m / 2s)`` keys per query (``m = min(s, window)``), an unfused one all
``s``. A MoE model's leading dense layers are averaged into the layer: ``mlp`` (dense), ``experts``
and ``router`` each carry their share of the layers, so the sum over all layers is exact while a
pipeline stage holding the dense layers is costed as an average one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from clustersim.choices import RecomputeModule
from clustersim.workload.architecture_ops import (
    CLAMPED_MLP,
    EXPERT_BIAS,
    architecture_operations,
    clamped_mlp_bytes,
)
from clustersim.workload.float8 import Float8Recipe, float8_extra_bytes, scaled_gemm_surcharge
from clustersim.workload.operation import Operation as Operation
from clustersim.workload.operation import OpKind as OpKind
from clustersim.workload.operation import make_operation as _op
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

ELEMENT_BYTES = 2.0  # 16-bit activations
CAUSAL_FRACTION = 0.5  # a fused causal kernel skips the masked half of the score blocks
SCORE_BYTES_FORWARD = 13.0  # QK^T writes 2; softmax reads 2, writes 2; dropout reads 2, writes 2 + mask 1; PV reads 2
SCORE_BYTES_BACKWARD = 15.0
OUTSIDE_ELEMENTS = 11.0  # two norms (read, write: 4), two bias-dropout-residual adds (read 2, write 1, mask: 7)
LOSS_BYTES_PER_LOGIT = 14.0  # softmax cross-entropy, forward and backward, over FP32 logits
# PyTorch eager cross-entropy over upcast logits (torchtitan's loss: cross_entropy(pred.flatten(0, 1).float(),
# labels), pytorch/torchtitan train.py @9dec370, components/loss.py @820504e), bytes per FP32 logit, from
# ATen's kernels (aten/src/ATen/native/cuda/SoftMax.cu: a wide row's log-softmax reads it for the max, for
# the sum of exponentials and once more to write; its backward reads the gradient for its sum, then the
# gradient and the output to write): forward, the upcast (read 2, write 4) and log-softmax (read 3 x 4,
# write 4); backward, NLL's dense gradient (write 4), the log-softmax backward (read 3 x 4, write 4) and the
# cast back (read 4, write 2). The eager op is what these add to the fused count above.
EAGER_LOSS_FORWARD_BYTES = 6.0 + 16.0
EAGER_LOSS_BACKWARD_BYTES = 4.0 + 16.0 + 6.0
ELEMENTWISE_BACKWARD_RATIO = 1.5
# Megatron-Core's all-to-all token dispatcher copies each routed token's hidden row four times a layer:
# permute into expert order before the dispatch, sort the received chunks by local expert, the inverse
# sort before the combine, and unpermute (a weighted sum over the token's k rows) after it
# (megatron/core/transformer/moe/token_dispatcher.py, MoEAlltoAllTokenDispatcher: dispatch_preprocess,
# dispatch_postprocess, combine_preprocess, combine_postprocess; moe_utils.permute, sort_chunks_by_idxs).
PERMUTE_ROW_COPIES = 4.0
# Its flex dispatcher (DeepEP, HybridEP) sends the tokens from their own order and combines them with their
# weights inside the communication kernels: two copies remain, the received rows permuted into expert order
# and back (the same file's MoEFlexTokenDispatcher; _DeepepManager.get_permuted_hidden_states_by_experts and
# get_restored_hidden_states_by_experts; NVIDIA's DeepSeek-V3 GB200 write-up, Megatron-LM
# docs/discussions/deepseek-v3-gb200-optimization, section 2.1.1: "fuses the global permute into the
# communication kernel ... but still requires a permute kernel" for the local experts).
FLEX_PERMUTE_ROW_COPIES = 2.0
# PyTorch eager Llama block, one kernel per op (pytorch/torchtitan torchtitan/models/llama/model.py and
# models/norms.py, end of 2024), extra bytes per element over the fused counts above:
# RMSNorm upcasts, squares, averages, scales, casts back and applies the weight (bf16 -> fp32 read 2 write 4,
# pow 4+4, mean 4, multiply 4+4, cast 4+2, weight 2+2: 36 bytes) where a fused norm reads 2 and writes 2;
EAGER_NORM_EXTRA_BYTES = 32.0
# rotary embedding on q and k through complex64: upcast 2+4, complex multiply 4+4, cast back 4+2 (20 bytes)
# where a fused kernel reads 2 and writes 2;
EAGER_ROPE_EXTRA_BYTES = 16.0
# repeat_kv materialises keys and values at the query width (read kv, write q, 2 bytes each, twice) and the
# attention output is made contiguous after its transpose (read 2, write 2 per query element);
EAGER_LAYOUT_BYTES = 2.0 * ELEMENT_BYTES
# SwiGLU as silu (2+2) then a product (4+2) where a fused kernel reads the two halves and writes one (6).
EAGER_SWIGLU_EXTRA_BYTES = 2.0
# A fused (flash) attention backward recomputes the scores: five matrix products to the forward's two,
# 2.5x its FLOPs (Dao, FlashAttention-2, arXiv 2307.08691, section 4.1: "backward ... 2.5x forward FLOPs")
FUSED_ATTENTION_BACKWARD_RATIO = 2.5
LATENT_PROJECTIONS = "latent projections"  # a latent MoE's projections around its routed experts
# The GEMMs torchao's float8 training converts (nn.Linear layers; a MoE model's grouped expert GEMMs and router
# are not converted by its Float8Linear recipes).
FLOAT8_LINEARS = frozenset({"qkv", "output projection", "mlp", LATENT_PROJECTIONS})


def layer_operations(
    model: Transformer,
    *,
    tokens: FloatArray,
    seq_len: int,
    tp: FloatArray,
    sp_split: FloatArray,
    ep: FloatArray,
    fused_attention: bool,
    cp: FloatArray | float = 1.0,
    eager_elementwise: bool = False,
    float8_recipe: Float8Recipe | None = None,
    fused_expert_mlp: bool = False,
    flex_dispatch: npt.ArrayLike = False,
    unfused_clamped_glu: bool = False,
    unfused_scaled_rope: bool = False,
) -> list[Operation]:
    """The forward operations of one layer on one device (see the module table); ``cp`` splits each
    query's keys over that many ring-attention kernel calls; ``eager_elementwise``: the element-wise ops
    run as PyTorch eager kernels, one per op; ``float8_recipe``: an FP8 job's scaling recipe (None or
    tensorwise: what the FP8 rate holds); ``flex_dispatch``: where the expert tokens go through the flex
    dispatcher (DeepEP, HybridEP), which moves each row twice, not four times; ``unfused_clamped_glu`` and
    ``unfused_scaled_rope``: the framework runs a clamped gated MLP's clamps and a YaRN-scaled RoPE outside its fused
    kernels (``clustersim.workload.architecture_ops``, as expert biases outside the grouped GEMMs)."""
    h, q, f = model.hidden, model.q_width, model.expert_ffn
    like = np.zeros(np.broadcast_shapes(np.shape(tokens), np.shape(tp), np.shape(sp_split), np.shape(ep), np.shape(cp)))
    matrices = model.ffn_type.num_matrices
    capacity = model.moe.capacity_factor if model.moe else 1.0
    keys = _keys_per_query(model, seq_len, fused_attention)
    expert_widths = sum(_expert_widths(model)) if model.moe else h
    # One expert's GEMM sees the EP group's tokens spread over its experts.
    per_expert = tokens * model.moe.top_k * capacity * ep / model.moe.experts if model.moe else tokens
    # the layer average: a recurrent layer projects in place of attention and meets no keys
    qkv = 2 * tokens * model.mixer_qkv_matmul_params() / tp
    output_params = model.mixer_output_matmul_params()
    core = 2 * tokens * (q + model.context_width) * keys / tp
    ops = [
        _op("qkv", OpKind.GEMM, like, flop=qkv, ratio=2.0),
        _op(
            "attention core",
            OpKind.ATTENTION,
            like,
            flop=core,
            ratio=FUSED_ATTENTION_BACKWARD_RATIO if fused_attention else 2.0,
            keys=keys / np.asarray(cp, dtype=float),
            # one exponential per score (query head x key) in the forward pass and again in the backward, which
            # recomputes the probabilities; an unfused core's softmax is the memory-bound "attention scores"
            exps=core * model.heads / (2 * (q + model.context_width)) if fused_attention else None,
        ),
    ]
    if (linear := model.linear_attention) is not None:
        mixing = tokens * model.linear_mixing_flops_per_token() / model.layers / tp
        backward = FUSED_ATTENTION_BACKWARD_RATIO
        if linear.mamba2:  # the SSD kernels at their measured rate (clustersim.compute.scan_kernel)
            ops.append(_op("scan", OpKind.SCAN, like, flop=mixing, ratio=backward))
        else:
            keys = float(linear.chunk_tokens)
            ops.append(_op("delta rule", OpKind.ATTENTION, like, flop=mixing, ratio=backward, keys=keys))
    if not fused_attention:
        score_bytes = SCORE_BYTES_FORWARD * tokens * seq_len * model.heads * model.mixer_mean(1.0, 0.0) / tp
        ops.append(
            _op(
                "attention scores",
                OpKind.MEMORY,
                like,
                nbytes=score_bytes,
                ratio=SCORE_BYTES_BACKWARD / SCORE_BYTES_FORWARD,
            )
        )
    share = model.moe_layers / model.layers  # of layers with the experts
    ops += [
        _op("output projection", OpKind.GEMM, like, flop=2 * tokens * output_params / tp, ratio=2.0),
        _op(
            "experts" if model.moe else "mlp",
            OpKind.GEMM,
            like,
            flop=2 * tokens * capacity * expert_widths * f * matrices / tp * share,
            each=2 * per_expert * model.expert_input * f / tp,
            ratio=2.0,
        ),
    ]
    if model.moe:
        pairs = tokens * model.moe.top_k * capacity * share / sp_split  # routed token-expert pairs this rank moves
        copies = np.where(flex_dispatch, FLEX_PERMUTE_ROW_COPIES, PERMUTE_ROW_COPIES)
        ops += [
            _op("router", OpKind.GEMM, like, flop=2 * tokens * h * model.moe.experts * share, ratio=2.0),
            _op(
                "token permutation",
                OpKind.MEMORY,
                like,
                nbytes=copies * 2 * ELEMENT_BYTES * pairs * model.expert_input,
                ratio=1.0,
            ),
        ]
        if (latent := model.moe.latent) is not None:
            each = 2 * tokens * h * latent / sp_split
            ops.append(_op(LATENT_PROJECTIONS, OpKind.GEMM, like, flop=2 * each * share, each=each, ratio=2.0))
    if model.dense_mlp_layers:
        dense_share, width = model.dense_mlp_layers / model.layers, model.ffn_hidden
        each = 2 * tokens * h * width / tp
        ops.append(_op("mlp", OpKind.GEMM, like, flop=each * matrices * dense_share, each=each, ratio=2.0))
    elements = activation_elements(model, fused_expert_mlp)
    inner = sum(elements.values()) / tp
    ops += [
        _op(
            "norms and residuals",
            OpKind.MEMORY,
            like,
            nbytes=ELEMENT_BYTES * tokens * OUTSIDE_ELEMENTS * h * (1 + model.mlp_share) / 2 / sp_split,
            ratio=ELEMENTWISE_BACKWARD_RATIO,
        ),
        _op(
            "bias and activation",
            OpKind.MEMORY,
            like,
            nbytes=ELEMENT_BYTES * tokens * inner,
            ratio=ELEMENTWISE_BACKWARD_RATIO,
        ),
    ]
    ops += architecture_operations(
        model,
        like,
        elements,
        tokens=tokens,
        tp=tp,
        sp_split=sp_split,
        fp32_probs=flex_dispatch,
        fused_expert_mlp=fused_expert_mlp,
        unfused_clamped_glu=unfused_clamped_glu,
        unfused_scaled_rope=unfused_scaled_rope and not eager_elementwise,
    )
    if eager_elementwise:
        ops.append(_eager_elementwise(model, like, tokens=tokens, tp=tp, sp_split=sp_split))
    if float8_recipe is not None and float8_recipe is not Float8Recipe.TENSORWISE:
        ops += _float8_operations(model, ops, like, recipe=float8_recipe, tokens=tokens, tp=tp, sp_split=sp_split)
    return ops


def _float8_operations(
    model: Transformer,
    ops: list[Operation],
    like: FloatArray,
    *,
    recipe: Float8Recipe,
    tokens: FloatArray,
    tp: FloatArray,
    sp_split: FloatArray,
) -> list[Operation]:
    """What ``recipe`` adds over tensorwise (``clustersim.workload.float8``): its extra cast and rescale
    bytes, split as the GEMMs they feed (one forward, two backward), and its GEMMs' extra time, as FLOPs at
    the FP8 rate of the layer's largest GEMM call."""
    gemms = [op for op in ops if op.name in FLOAT8_LINEARS]
    forward_share, backward_share = scaled_gemm_surcharge(recipe)
    linear = sum((op.flop for op in gemms), like)
    largest = np.max(np.stack([op.gemm_flop for op in gemms]), axis=0)
    cast_bytes = float8_extra_bytes(model, recipe, tokens=tokens, tp=tp, sp_split=sp_split)
    return [
        _op("float8 casts", OpKind.MEMORY, like, nbytes=cast_bytes / 3.0, ratio=2.0),
        _op(
            "float8 scaled GEMMs",
            OpKind.GEMM,
            like,
            flop=forward_share * linear,
            each=largest,
            ratio=backward_share / forward_share,
        ),
    ]


def _eager_elementwise(
    model: Transformer, like: FloatArray, *, tokens: FloatArray, tp: FloatArray, sp_split: FloatArray
) -> Operation:
    """The traffic one-kernel-per-op element-wise work adds to the fused counts (constants above)."""
    q, kv = model.q_width, model.kv_width
    expanded = (q + kv) * EAGER_LAYOUT_BYTES if kv < q else 0.0  # GQA: keys and values repeated
    attention = EAGER_ROPE_EXTRA_BYTES * (q + kv) + expanded + EAGER_LAYOUT_BYTES * q
    gated = EAGER_SWIGLU_EXTRA_BYTES * model.expert_ffn * model.active_mlps if model.ffn_type.num_matrices == 3 else 0.0
    per_token = 2 * EAGER_NORM_EXTRA_BYTES * model.hidden / sp_split + (attention + gated) / tp
    return _op("eager element-wise", OpKind.MEMORY, like, nbytes=tokens * per_token, ratio=ELEMENTWISE_BACKWARD_RATIO)


def _keys_per_query(model: Transformer, seq_len: int, fused: bool) -> float:
    """Keys one query meets in the attention core, averaged over the layers: a fused causal kernel
    skips the masked half of a full layer and the masked corner of a windowed one; a recurrent layer
    meets none."""
    windowed = model.window_layers or 0
    full = model.full_attention_layers
    if not fused:
        return float(seq_len) * full / model.layers
    band = min(seq_len, model.sliding_window) if windowed else seq_len
    window_keys = band * (1 - band / (2 * seq_len))
    return ((full - windowed) * seq_len * CAUSAL_FRACTION + windowed * window_keys) / model.layers


def alternate_matmul_recompute_share(model: Transformer, op: Operation) -> float:
    """The share of a layer operation's forward that a selective recompute of every second matmul runs again
    (torchtitan's per-op policy; ``clustersim.compute.memory`` keeps the other matmuls' outputs): of the Q, K, V
    matmuls K's, the projection, the MLP's second, fourth, ... matrix (a gated MLP's second up matrix, a plain one's
    down matrix), and every element-wise pass; not the attention core, whose output is kept, nor the router."""
    if op.kind is OpKind.MEMORY:
        return 1.0
    if op.name == "qkv":
        return model.kv_width / (model.q_width + model.kv_width + model.value_width)
    if op.name == "output projection":
        return 1.0
    if op.name in ("mlp", "experts"):
        matrices = model.ffn_type.num_matrices
        return (matrices // 2) / matrices
    return 0.0


NORM_ELEMENTS = 4.0  # of OUTSIDE_ELEMENTS: the two norms' reads and writes (what layernorm recompute repeats)
# The blocks of ``activation_elements`` whose passes a module's recompute repeats (those holding an activation).
MODULE_BLOCKS = {
    RecomputeModule.CORE_ATTN: (),
    RecomputeModule.MLA_UP_PROJ: (),
    RecomputeModule.LAYERNORM: (),
    RecomputeModule.MOE_ACT: ("routed",),
    RecomputeModule.MLP: ("dense",),
    RecomputeModule.MOE: ("routed", "shared"),
    RecomputeModule.SHARED_EXPERTS: ("shared",),
}


def activation_elements(model: Transformer, fused_expert_mlp: bool) -> dict[str, float]:
    """A token's element-wise activation work in an average layer (the ``bias and activation`` operation, before
    tensor parallelism) by block: the attention's Q/K/V passes, the routed experts', the shared experts' and the dense
    MLPs' (a MoE model's dense layers, or a dense model's MLP); a fused expert MLP applies the routed experts'
    activation inside its GEMMs, no pass of its own."""
    matrices, moe = model.ffn_type.num_matrices, model.moe
    capacity, f, share = (moe.capacity_factor if moe else 1.0), model.expert_ffn, model.moe_layers / model.layers
    pass_elements = (matrices + 1) * f * capacity * share  # one MLP's activation pass in the layers holding it
    routed = moe.top_k if moe and not fused_expert_mlp else 0
    dense = (matrices + 1) * model.ffn_hidden * model.dense_mlp_layers / model.layers
    return {
        "attention": _mixer_pass_elements(model),
        "routed": pass_elements * routed,
        "shared": pass_elements * moe.shared_experts if moe else 0.0,
        "dense": dense + (0.0 if moe else pass_elements),
    }


def _mixer_pass_elements(model: Transformer) -> float:
    """A token's element-wise work in the token mixer of an average layer: an attention layer's Q/K/V passes (and its
    output gate's, where it has one); a recurrent layer's convolution output and gated norm."""
    gate = 2.0 * model.q_width if model.attention_gate else 0.0
    linear = model.linear_attention
    delta_rule = 2.0 * (linear.conv_channels + linear.value_width) if linear else 0.0
    return model.mixer_mean(2.0 * (model.q_width + 2 * model.kv_width) + gate, delta_rule)


def module_recompute_share(
    model: Transformer, op: Operation, module: RecomputeModule, *, fused_expert_mlp: bool = False
) -> float:
    """The share of a layer operation's forward that recomputing Megatron-Core's ``module`` runs again: the
    attention core (core_attn); the latent attention's up projections, of the Q, K, V matmuls (mla_up_proj; RoPE's
    element-wise work not counted); the two norms (layernorm); the routed experts' activation (moe_act); the dense
    MLP's matmuls and activation (mlp); the routed and shared experts, the router and the token permutation
    (moe: its all-to-alls are not repeated, as a full recompute's are not); the shared experts (shared_experts)."""
    moe = model.moe
    if module is RecomputeModule.CORE_ATTN:
        return 1.0 if op.name in ("attention core", "attention scores") else 0.0
    if module is RecomputeModule.MLA_UP_PROJ:
        mla = model.mla
        if op.name != "qkv" or mla is None:
            return 0.0
        query_up = mla.q_lora_rank * model.q_width if mla.q_lora_rank else 0
        kv_up = mla.kv_lora_rank * model.heads * (model.head_dim - mla.rope_head_dim + mla.v_head_dim)
        return (query_up + kv_up) / model.qkv_matmul_params()
    if module is RecomputeModule.LAYERNORM:
        return NORM_ELEMENTS / OUTSIDE_ELEMENTS if op.name == "norms and residuals" else 0.0
    if op.name == "bias and activation":
        acts = activation_elements(model, fused_expert_mlp)
        return sum(acts[block] for block in MODULE_BLOCKS[module]) / sum(acts.values())
    if op.name == CLAMPED_MLP:  # the clamps run with the activation they feed
        clamps = clamped_mlp_bytes(model, activation_elements(model, fused_expert_mlp), unfused=True)
        return sum(clamps.get(block, 0.0) for block in MODULE_BLOCKS[module]) / sum(clamps.values())
    if op.name == EXPERT_BIAS:
        return 1.0 if module is RecomputeModule.MOE else 0.0
    if module is RecomputeModule.MLP:
        return 1.0 if op.name == "mlp" else 0.0
    if module is RecomputeModule.MOE:
        return 1.0 if moe and op.name in ("experts", "router", "token permutation", LATENT_PROJECTIONS) else 0.0
    if module is RecomputeModule.SHARED_EXPERTS and moe and op.name == "experts":
        routed, shared = _expert_widths(model)
        return shared / (routed + shared)
    return 0.0


def _expert_widths(model: Transformer) -> tuple[int, int]:
    """The input widths a token's routed and shared experts read, each summed over the experts: the routed ones at
    ``expert_input`` (a latent MoE's latent width), the shared ones at the hidden size (0, 0 without MoE)."""
    moe = model.moe
    return (moe.top_k * model.expert_input, moe.shared_experts * model.hidden) if moe else (0, 0)


def alternate_matmul_recompute_flops_per_token(model: Transformer, seq_len: int) -> float:
    """FLOPs per token that the every-second-matmul policy recomputes over the layers
    (``alternate_matmul_recompute_share`` of each layer operation)."""
    one = np.ones(1)
    ops = layer_operations(model, tokens=one, seq_len=seq_len, tp=one, sp_split=one, ep=one, fused_attention=True)
    return float(sum(op.flop[0] * alternate_matmul_recompute_share(model, op) for op in ops)) * model.layers


def module_recompute_flops_per_token(model: Transformer, seq_len: int, modules: Sequence[RecomputeModule]) -> float:
    """Matmul FLOPs per token that recomputing Megatron-Core's ``modules`` runs again over the layers, counted as
    the model FLOPs count them: the attention core over every key (``Transformer.attention_flops_per_token``), the
    other modules' GEMMs at their ``module_recompute_share``; the element-wise modules (layernorm, moe_act) add
    none."""
    core = model.attention_flops_per_token(seq_len) if RecomputeModule.CORE_ATTN in modules else 0.0
    one = np.ones(1)
    ops = layer_operations(model, tokens=one, seq_len=seq_len, tp=one, sp_split=one, ep=one, fused_attention=True)
    gemms = [op for op in ops if op.kind is OpKind.GEMM]
    return core + model.layers * float(
        sum(op.flop[0] * module_recompute_share(model, op, module) for op in gemms for module in modules)
    )


def head_operations(
    model: Transformer, *, tokens: FloatArray, tp: FloatArray, eager_elementwise: bool = False
) -> list[Operation]:
    """The output head on the last pipeline stage: logits and the loss (under ``eager_elementwise``, also
    what PyTorch's unfused cross-entropy kernels add), once for the model and once more for each
    multi-token-prediction module, which also projects its ``2h``-wide input (the hidden state and the
    next token's embedding, concatenated) to ``h`` (DeepSeek-AI 2024, arXiv 2412.19437 section 2.2; its
    block is priced as one more layer of the stage, ``clustersim.compute.stages.stage_layers``)."""
    logits = tokens * model.vocab / tp
    like = np.zeros(np.shape(logits))
    passes = 1 + model.mtp_layers
    one_pass = 2 * logits * model.hidden
    ops = [
        _op("logits", OpKind.GEMM, like, flop=passes * one_pass, each=one_pass, ratio=2.0),
        _op("loss", OpKind.MEMORY, like, nbytes=passes * LOSS_BYTES_PER_LOGIT / 3 * logits, ratio=2.0),
    ]
    if model.mtp_layers:
        projection = 2 * tokens * 2 * model.hidden * model.hidden / tp
        ops.append(
            _op("mtp projection", OpKind.GEMM, like, flop=model.mtp_layers * projection, each=projection, ratio=2.0)
        )
    if eager_elementwise:
        forward = EAGER_LOSS_FORWARD_BYTES - LOSS_BYTES_PER_LOGIT / 3
        backward = EAGER_LOSS_BACKWARD_BYTES - 2 * LOSS_BYTES_PER_LOGIT / 3
        ops.append(_op("eager loss", OpKind.MEMORY, like, nbytes=passes * forward * logits, ratio=backward / forward))
    return ops
