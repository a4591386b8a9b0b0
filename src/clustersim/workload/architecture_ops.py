"""Element-wise work that three architecture features add outside a framework's fused kernels (gpt-oss has all three).

Bytes of 16-bit (or stated) elements read and written, forward and backward, counted from the code that runs them:

* **A clamped gated MLP** (``Transformer.clamped_glu``: the gate clamped from above, the up half from both sides and
  offset by one). Where the framework clamps outside its fused activation (``SoftwareProfile.unfused_clamped_glu``),
  each MLP pass adds ``16 f`` bytes forward: the two clamps read and write ``f`` elements each (``4 f`` apiece) and
  their concatenation reads and writes ``2 f`` (``8 f``); the fused weighted activation after them is the one every
  gated MLP pays. Backward ``30 f``: the two-sided clamp's masks and select (``14 f``), the one-sided one's (``8 f``)
  and the chunk's gradients concatenated (``8 f``). NVIDIA/Megatron-LM @2edffadb (core_r0.17.0, the Megatron-Core of
  Megatron-Bridge 26.04.01) megatron/core/fusions/fused_bias_geglu.py ``weighted_bias_quick_geglu_impl`` (the clamp
  and ``torch.cat`` before ``WeightedQuickGeGLUFunction``); it has no fused clamped path in 16 bits. A fused expert
  MLP (Transformer Engine's grouped MLP) clamps in its kernel: its routed passes add none.
* **Expert biases** (a MoE model with ``linear_bias``). The grouped GEMM adds the up projection's bias in its
  epilogue but returns the down projection's, which each routed pair scales by its probability and adds, one local
  expert at a time, before the slices are concatenated again (Megatron-Core experts.py ``_apply_bias``: ``t + b * p``
  over ``torch.split``, then ``torch.cat``): ``12 h`` bytes a pair forward with 16-bit probabilities (the product
  written ``2 h``, the sum reading ``4 h`` and writing ``2 h``, the concatenation ``4 h``), ``28 h`` with FP32 ones
  (the flex dispatcher's: the product and sum in FP32, a cast back); backward ``16 h`` with 16-bit probabilities, taken
  as the same 4/3 of the forward with FP32 ones (37 h where 40 h are counted). NeMo Automodel adds it the same way
  (components/moe/experts.py ``_apply_bias``, FP32 probabilities). A fused expert MLP's down GEMM adds it: none.
* **YaRN's factor on the rotary tables** (``Transformer.rope_concentration`` other than 1). Transformer Engine's fused
  RoPE takes no such factor, so Megatron-Core applies RoPE unfused (``SoftwareProfile.unfused_scaled_rope``;
  megatron/core/models/common/embeddings/rope_utils.py ``apply_rotary_pos_emb``: "mscale ... is not supported by TE's
  fused RoPE"): the product with cos, the rotated half negated and concatenated, the product with sin, the sum and
  the pass-through part concatenated move ``24`` bytes per query and key element forward and ``28`` backward, where
  the fused kernel moves ``4`` each way: ``20`` and ``24`` more. A PyTorch eager stack already pays its own unfused
  RoPE (``clustersim.workload.ops`` eager element-wise): none more.

Counted by reading the code and checked against a CPU trace of the same functions (2026-12-05). Not priced: the
clamped MLP's input that autograd keeps for the clamps (``4 f`` bytes a pass of activation memory) and one blocking
host copy a layer (``torch.tensor(linear_offset, device=...)`` in the same function).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.workload.operation import Operation, OpKind, make_operation
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

CLAMP_FORWARD_BYTES = 16.0  # per MLP pass, in units of the MLP width f
CLAMP_BACKWARD_BYTES = 30.0
EXPERT_BIAS_FORWARD_BYTES = 12.0  # per routed pair, in units of the hidden width h, 16-bit probabilities
EXPERT_BIAS_FORWARD_BYTES_FP32_PROBS = 28.0
EXPERT_BIAS_BACKWARD_RATIO = 16.0 / 12.0
ROPE_FORWARD_BYTES = 20.0  # per query and key element, beyond the fused kernel's
ROPE_BACKWARD_BYTES = 24.0


CLAMPED_MLP, EXPERT_BIAS, SCALED_ROPE = "clamped MLP", "expert bias", "scaled rope"  # the operations' names
MLP_BLOCKS = ("routed", "shared", "dense")  # of ``clustersim.workload.ops.activation_elements``


def clamped_mlp_bytes(model: Transformer, elements: dict[str, float], *, unfused: bool) -> dict[str, float]:
    """Forward bytes per token the clamps add, by MLP block of ``elements`` (a token's activation elements,
    ``activation_elements``, which count each gated pass as ``matrices + 1`` of its width): ``16`` bytes per width of
    each pass; empty unless the model clamps its gated MLP and the framework clamps outside its fused activation."""
    if not (model.clamped_glu and unfused):
        return {}
    per_width = CLAMP_FORWARD_BYTES / (model.ffn_type.num_matrices + 1)
    return {block: per_width * elements[block] for block in MLP_BLOCKS if elements[block]}


def expert_bias_bytes(
    model: Transformer, pairs: FloatArray, *, fp32_probs: npt.ArrayLike, fused_expert_mlp: bool
) -> FloatArray | float:
    """Forward bytes of the down projection's bias added per routed pair outside the grouped GEMM, for ``pairs``
    routed token-expert pairs: none without expert biases or in a fused expert MLP."""
    if model.moe is None or not model.linear_bias or fused_expert_mlp:
        return 0.0
    per_pair = np.where(fp32_probs, EXPERT_BIAS_FORWARD_BYTES_FP32_PROBS, EXPERT_BIAS_FORWARD_BYTES)
    return per_pair * model.hidden * pairs


def scaled_rope_bytes(model: Transformer, tokens: FloatArray, tp: FloatArray, *, unfused: bool) -> FloatArray | float:
    """Forward bytes an unfused RoPE adds for ``tokens`` tokens over ``tp`` ranks: none unless YaRN's factor is on the
    tables and the framework's fused RoPE cannot take it. Latent attention rotates only its rotary dims (each query
    head's and the one shared key's)."""
    if model.rope_concentration == 1.0 or not unfused:
        return 0.0
    mla = model.mla
    rotated = (model.heads + 1) * mla.rope_head_dim if mla else model.q_width + model.kv_width
    return ROPE_FORWARD_BYTES * rotated * tokens / tp


def architecture_operations(
    model: Transformer,
    like: FloatArray,
    elements: dict[str, float],
    *,
    tokens: FloatArray,
    tp: FloatArray,
    sp_split: FloatArray,
    fp32_probs: npt.ArrayLike,
    fused_expert_mlp: bool,
    unfused_clamped_glu: bool,
    unfused_scaled_rope: bool,
) -> list[Operation]:
    """What a clamped gated MLP, expert biases and a YaRN-scaled RoPE add outside fused kernels, where they do
    (``clustersim.workload.architecture_ops``)."""
    ops = []
    clamps = clamped_mlp_bytes(model, elements, unfused=unfused_clamped_glu)
    if clamps:
        nbytes, ratio = tokens * sum(clamps.values()) / tp, CLAMP_BACKWARD_BYTES / CLAMP_FORWARD_BYTES
        ops.append(make_operation(CLAMPED_MLP, OpKind.MEMORY, like, nbytes=nbytes, ratio=ratio))
    if model.moe:
        pairs = tokens * model.moe.top_k * model.moe.capacity_factor * model.moe_layers / model.layers / sp_split
        bias = expert_bias_bytes(model, pairs, fp32_probs=fp32_probs, fused_expert_mlp=fused_expert_mlp)
        if np.any(bias):
            ops.append(make_operation(EXPERT_BIAS, OpKind.MEMORY, like, nbytes=bias, ratio=EXPERT_BIAS_BACKWARD_RATIO))
    rope = scaled_rope_bytes(model, tokens, tp, unfused=unfused_scaled_rope)
    if np.any(rope):
        ratio = ROPE_BACKWARD_BYTES / ROPE_FORWARD_BYTES
        ops.append(make_operation(SCALED_ROPE, OpKind.MEMORY, like, nbytes=rope, ratio=ratio))
    return ops
