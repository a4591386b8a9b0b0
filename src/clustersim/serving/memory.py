"""What serving holds in device memory and reads from it: number formats, weights and the KV cache.

* **Weights**: the layers' matmul weights at the serving precision (``clustersim.serving.formats``: an
  NVFP4 weight is 4.5 bits with its block scale, an MXFP4 one 4.25), or for a quantized checkpoint
  (GPTQ, AWQ, compressed-tensors, FP8: ``Transformer.quantization``) at the width it stores them,
  group scales and zero points included, whatever the GEMMs run at; the rest (embeddings, logits,
  norms) in bf16, split over ``tp x pp`` devices. A MoE model's leading dense layers hold a dense MLP,
  the others the shared and routed experts and a router.
* **KV cache**: each token adds ``Transformer.kv_cache_elements`` per layer: key and value of every kv
  head, or with multi-head latent attention (DeepSeek-V2/V3) the compressed latent and the rotary key
  (``kv_lora_rank + rope_head_dim``, 576 elements for DeepSeek-V3 against 2 x 128 x 192 = 49,152 if it
  cached every head). Tensor parallelism splits the cache by ``Transformer.kv_cache_heads``: kv heads
  (replicated once there are fewer than ranks), and a latent (one head) is whole on every rank, as
  vLLM, SGLang and TensorRT-LLM hold it.
* **Sliding windows** (Mistral 7B v0.1, Gemma 2/3, Phi-3): a windowed layer keeps and reads at most
  ``sliding_window`` tokens of a sequence (vLLM frees the blocks that slide out of the window,
  TensorRT-LLM keeps a cyclic buffer of the window), so its cache stops growing with the context.
* **Gated DeltaNet and Mamba-2 layers** (Qwen3-Next, Qwen3.5, Nemotron 3: ``clustersim.workload.linear_attention``)
  hold no cache that grows: each sequence keeps a fixed state per layer (every value head's ``key_head_dim x
  value_head_dim`` and the convolution's last inputs) at the engine's width, split over tensor parallelism by value
  heads, in a pool the engine shares with the KV cache or splits from it (``clustersim.serving.state_pool``); a decode
  step reads and writes it whole. The KV cache per token counts the attention layers only.
"""

from __future__ import annotations

import math
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.formats import SERVING_DTYPES as SERVING_DTYPES
from clustersim.serving.formats import BlockFp4, ServingPrecision, is_fp4
from clustersim.serving.formats import bytes_per_element as bytes_per_element
from clustersim.serving.formats import parse_precision as parse_precision
from clustersim.serving.state_pool import StatePool
from clustersim.workload.quantization import Quantization, QuantMethod
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
ACTIVATION_BYTES = 2  # activations and all-reduce payloads stay bf16, also with fp8 or fp4 GEMMs

T = TypeVar("T", float, npt.NDArray[np.float64])  # a length, or an array of them


# ---- weights -------------------------------------------------------------------------------------


def matmul_params(model: Transformer) -> tuple[float, float]:
    """(matmul weights every token goes through, summed over the layers; weights of one routed expert,
    summed over the MoE layers). Every token: attention, the dense MLPs of a dense model or of a MoE
    model's leading dense layers, shared experts, routers and a latent MoE's projections; the expert part is 0
    without MoE."""
    attention = model.layers * model.mixer_matmul_params()
    if model.moe is None:
        return float(attention + model.layers * model.mlp_matmul_params()), 0.0
    per_moe_layer = model.moe.shared_experts * model.mlp_matmul_params(model.hidden) + model.router_params()
    per_moe_layer += model.latent_projection_params(biases=False)
    dense = attention + model.moe_layers * per_moe_layer + model.dense_mlp_layers * model.dense_mlp_matmul_params()
    return float(dense), float(model.moe_layers * model.mlp_matmul_params())


def layer_weight_bytes(model: Transformer, precision: ServingPrecision) -> float:
    """Bytes one layer matmul weight that is not a routed expert's takes: the checkpoint's stored width where it
    is quantized (16 bits where it quantizes the routed experts only: it keeps the rest so), else ``precision``'s
    (a 4-bit float format with its block scales)."""
    q = _checked_quantization(model, precision)
    if q is None:
        return float(bytes_per_element(precision))
    return float(ACTIVATION_BYTES) if q.experts_only else q.bytes_per_weight


def expert_weight_bytes(model: Transformer, precision: ServingPrecision) -> float:
    """Bytes one routed expert's weight takes: the checkpoint's stored width where it is quantized, else
    ``precision``'s."""
    q = _checked_quantization(model, precision)
    return float(bytes_per_element(precision)) if q is None else q.bytes_per_weight


def _checked_quantization(model: Transformer, precision: ServingPrecision) -> Quantization | None:
    """The model's quantization; a 4-bit float precision on a quantized checkpoint is refused (its weights are in
    another format), but for an MXFP4 checkpoint at mxfp4."""
    q = model.quantization
    if q is not None and is_fp4(precision) and not (q.method is QuantMethod.MXFP4 and precision is BlockFp4.MXFP4):
        valid = "bf16, fp16, fp8 GEMMs" + (", mxfp4" if q.method is QuantMethod.MXFP4 else "")
        raise ClusterSimError(
            f"precision: {precision.value} prices weights stored as {precision.value}, but {model.name} is a "
            f"{q.describe()} checkpoint (valid for it: {valid})",
            field="precision",
            value=precision.value,
        )
    return q


def weight_bytes_per_device(
    model: Transformer, precision: ServingPrecision, tp: int = 1, pp: int = 1, attention_dp: int = 1
) -> float:
    """Weights held by one device: layer matmuls at ``layer_weight_bytes`` (the routed experts at
    ``expert_weight_bytes``), the rest (embeddings, logits, norms) in bf16; with ``attention_dp`` groups of ``tp``
    ranks (attention data parallel) every group holds the dense weights and the routed experts are split over all
    ``tp x attention_dp`` ranks (expert parallel)."""
    bytes_per_element(precision)  # an unknown serving format is refused, quantized or not
    dense, expert = matmul_params(model)
    routed = (model.moe.experts if model.moe else 0) * expert
    rest = model.num_params() - dense - routed
    held = dense * layer_weight_bytes(model, precision) + routed / attention_dp * expert_weight_bytes(model, precision)
    return (held * stage_share(model, pp) + rest * ACTIVATION_BYTES / pp) / tp


def weights_note(model: Transformer, precision: ServingPrecision) -> str | None:
    """What a quantized checkpoint's weights are priced at (None for a 16-bit one)."""
    q = model.quantization
    if q is None:
        return None
    held = f"held and read at {q.bytes_per_weight:.3g} bytes each (scales included)"
    if q.experts_only:
        return (
            f"weights: {model.name} is a {q.describe()} checkpoint: its routed experts are {held}, its other weights "
            f"in 16 bits; GEMMs at {precision.value}"
        )
    return (
        f"weights: {model.name} is a {q.describe()} checkpoint: its layer weights are {held}, not at "
        f"{precision.value}; GEMMs at {precision.value}"
    )


# ---- KV cache ------------------------------------------------------------------------------------


def kv_heads_per_device(model: Transformer, tp: int) -> int:
    """KV-cache heads each TP rank holds: kv_cache_heads / tp, or one replicated head when there are
    fewer heads than ranks (a latent-attention cache, one head, is whole on every rank)."""
    return max(model.kv_cache_heads // tp, 1)


def kv_bytes_per_token_layer(model: Transformer, kv_precision: ServingPrecision, tp: int = 1) -> float:
    """KV-cache bytes one token adds to one layer on one device."""
    per_head = model.kv_cache_elements // model.kv_cache_heads
    return float(kv_heads_per_device(model, tp) * per_head * bytes_per_element(kv_precision))


def stage_share(model: Transformer, pp: int) -> float:
    """The share of the layers the largest of ``pp`` pipeline stages holds: ``ceil(layers / pp) / layers``
    (``1 / pp`` where they divide). Serving engines split layers that do not divide unevenly, some stages a layer
    more (vLLM's default partition, TensorRT-LLM's ``pp_layers``); the largest stage sets the pipeline's step
    and holds the most weights and cache."""
    return math.ceil(model.layers / pp) / model.layers


def holding_notes(model: Transformer, pp: int) -> tuple[str, ...]:
    """What an estimate says of how the model's layers are held: a pipeline's uneven stages, a hybrid's recurrent
    state (nothing for a model whose layers divide over ``pp`` and that has no such layers)."""
    notes: tuple[str, ...] = ()
    if model.layers % pp:
        more, low = model.layers % pp, model.layers // pp
        notes += (
            f"pipeline: {model.layers} layers over pp {pp}: {more} stage(s) of {low + 1} layers and {pp - more} of "
            f"{low}; the largest sets the step and holds the most weights and cache",
        )
    if (linear := model.linear_attention) is not None:
        held = f"{state_bytes_per_sequence(model) / 1e6:.1f} MB a sequence"
        if linear.state_bytes:
            width = f"{held}, its states in {8 * linear.state_bytes:g} bits as its checkpoint asks"
        else:
            wide = state_bytes_per_sequence(model, ssm_bytes=4.0) / 1e6
            width = f"{held} in 16 bits ({wide:.1f} MB where the engine keeps it in 32, as SGLang does)"
        notes += (
            f"state: {model.name}'s {model.linear_attention_layers} {linear.kind.label} layers hold {width}, split "
            "over tp by value heads, read and written by every decode step; the batch counts it beside the KV cache "
            f"of its {model.full_attention_layers} attention layers",
        )
    return notes


def kv_bytes_per_token(model: Transformer, kv_precision: ServingPrecision, tp: int = 1, pp: int = 1) -> float:
    """KV-cache bytes one token adds on one device over its attention layers (every one holding it: no window)."""
    return model.full_attention_layers * stage_share(model, pp) * kv_bytes_per_token_layer(model, kv_precision, tp)


def state_bytes_per_sequence(model: Transformer, tp: int = 1, pp: int = 1, ssm_bytes: float = 2.0) -> float:
    """Bytes of recurrent (Gated DeltaNet or Mamba-2) state one sequence holds on one device (0 without those layers):
    every layer's recurrent state at the width the checkpoint asks for (``LinearAttention.state_bytes``: vLLM's and
    SGLang's Nemotron-H models keep ``mamba_ssm_cache_dtype``), else at ``ssm_bytes`` an element (the engine's
    ``StatePool.ssm_bytes``), and its convolution state in 16 bits, a device's share of the value heads (at least one
    head's)."""
    linear = model.linear_attention
    if linear is None:
        return 0.0
    share = max(linear.value_heads // tp, 1) / linear.value_heads
    per_layer = linear.ssm_state_elements() * (linear.state_bytes or ssm_bytes)
    per_layer += linear.conv_state_elements() * ACTIVATION_BYTES
    return model.linear_attention_layers * stage_share(model, pp) * per_layer * share


def state_room(
    model: Transformer, kv_precision: ServingPrecision, kv_tokens: float, pool: StatePool, tp: int = 1
) -> tuple[float, float, float]:
    """How a device's KV room of ``kv_tokens`` (``MemoryPlan.kv_capacity_tokens``) holds a hybrid's states beside its
    cache: (the tokens left to the cache, the running sequences a pool of their own admits (its slots over
    ``StatePool.slots_per_request``; inf where there is none), the cache tokens each sequence's state takes where it
    shares the cache's pool). A model without Gated DeltaNet layers: ``(kv_tokens, inf, 0)``. A pipeline stage holds
    the same share of both, so its degree cancels."""
    state = state_bytes_per_sequence(model, tp, ssm_bytes=pool.ssm_bytes)
    if not state:
        return kv_tokens, math.inf, 0.0
    per_token = kv_bytes_per_token(model, kv_precision, tp)
    if pool.memory_ratio is None:
        return kv_tokens, math.inf, state / per_token
    ratio = pool.memory_ratio
    slots = kv_tokens * per_token * ratio / (1 + ratio) / state
    return kv_tokens / (1 + ratio), slots / pool.slots_per_request, 0.0


def sequences_held(
    model: Transformer,
    kv_precision: ServingPrecision,
    kv_tokens: float,
    per_sequence_tokens: float,
    pool: StatePool,
    tp: int = 1,
) -> int:
    """Sequences of ``per_sequence_tokens`` (``reserved_tokens``) a device's KV room of ``kv_tokens`` holds, each with
    its state (``state_room``)."""
    tokens, states, shared = state_room(model, kv_precision, kv_tokens, pool, tp)
    return math.floor(min(tokens / (per_sequence_tokens + shared), states))


def cached_token_layers(model: Transformer, tokens: npt.ArrayLike, pp: int = 1) -> FloatArray:
    """Token-layers of KV cache a sequence of ``tokens`` holds (and a decode step reads) on one of ``pp``
    stages: every token on a full-attention layer, at most ``sliding_window`` on a windowed one, none on a
    recurrent layer (its state is ``state_bytes_per_sequence``)."""
    t = np.asarray(tokens, dtype=np.float64)
    windowed = model.window_layers or 0
    held = (model.full_attention_layers - windowed) * t + windowed * np.minimum(t, model.sliding_window)
    return np.asarray(held * stage_share(model, pp))


def causal_pairs(model: Transformer, prompt_tokens: T) -> T:
    """(query, key) pairs of one prompt's causal attention summed over the layers: ``n^2 / 2`` on a full
    layer; on a windowed one each query meets at most ``w`` keys, ``n w - w^2 / 2`` once ``n > w``; none on a
    recurrent layer. Per element of an array of lengths."""
    n = prompt_tokens
    windowed = model.window_layers or 0
    w = float(model.sliding_window)
    full = n * n / 2.0
    met = np.minimum(n, w)  # keys a query meets on a windowed layer, at most: n m - m^2 / 2 is n^2 / 2 below w
    attending = model.full_attention_layers - windowed
    return attending * full + windowed * (n * met - met * met / 2.0)  # type: ignore[no-any-return]


def decode_attention_flops_per_key(model: Transformer) -> float:
    """FLOPs one decoding token spends on one cached key of one layer: scores and context over every
    query head, ``2 (q_width + context_width)``; with latent attention the kernels work in the latent
    (weights absorbed, as FlashMLA and the engines' MLA kernels do): scores over ``kv_lora_rank +
    rope_head_dim`` and context over ``kv_lora_rank`` per head."""
    if model.mla is None:
        return float(2 * (model.q_width + model.context_width))
    m = model.mla
    return float(2 * model.heads * (2 * m.kv_lora_rank + m.rope_head_dim))


def reserved_tokens(
    input_tokens: float,
    output_tokens: float,
    engine: str | EngineProfile | None = None,
    model: Transformer | None = None,
) -> float:
    """KV tokens a sequence reserves, per attention layer on average (no eviction): its full length in whole blocks
    of the engine's paged cache on a full-attention layer, at most the window in whole blocks on a windowed
    layer of ``model`` (a recurrent layer's state is ``state_room``'s)."""
    block = engine_profile(engine).kv_block_tokens
    full = float(math.ceil((input_tokens + output_tokens) / block) * block)
    windowed = (model.window_layers or 0) if model is not None else 0
    if model is None or not windowed:
        return full
    window = min(full, float(math.ceil(model.sliding_window / block) * block))
    return ((model.full_attention_layers - windowed) * full + windowed * window) / model.full_attention_layers
