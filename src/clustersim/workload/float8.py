"""What a float8 training recipe adds to one layer's work beyond per-tensor (tensorwise) scaling.

torchao's float8 training (``torchao.float8.Float8LinearConfig.from_recipe_name``, used by torchtitan's
``--float8.recipe_name``) runs each ``nn.Linear``'s three GEMMs, output ``Y = X W^T``, input gradient
``dX = G W`` and weight gradient ``dW = G^T X``, on float8 operands, each cast along the GEMM's reduction
axis:

- ``tensorwise`` (the default): one scale per tensor, so each of ``X``, ``W`` and ``G`` is cast once and
  serves both orientations; under tensor parallelism torchtitan's float8 TP styles cast the sequence
  shard before the all-gather. Its casts are what the family's fitted FP8 rate
  (``fp8_efficiency_ratio``) already holds, so it adds nothing here.
- ``rowwise``: one scale per row of each operand along that GEMM's reduction axis, so each tensor is cast
  twice (along rows for one GEMM, along columns for another), on the gathered tensor (bf16 all-gathers);
  the forward GEMM runs PyTorch's CUTLASS rowwise kernel (fast accumulation) and the two backward GEMMs,
  which accumulate in full precision, run the tensorwise cuBLAS kernel with unit scales and multiply
  the output by the scales afterwards, one more pass over each gradient.
- ``rowwise_with_gw_hp``: as ``rowwise`` for the output and input-gradient GEMMs (the weight cast
  tensorwise for the latter), with the weight-gradient GEMM kept in BF16 (no column casts of ``X`` or
  ``G``).

The difference to tensorwise is two operations: ``float8 casts`` (memory: the recipe's cast and rescale
bytes minus tensorwise's, never below zero since a saving cannot be taken out of a fitted rate, at
``CAST_ROOFLINE_FRACTION`` of the bandwidth) and
``float8 scaled GEMMs`` (GEMM time the recipe's kernels take beyond tensorwise cuBLAS, written as FLOPs
at the job's FP8 rate: ``1 / ROWWISE_GEMM_RATE - 1`` of the forward GEMMs, and under
``rowwise_with_gw_hp`` ``BF16_OVER_FP8_GEMM_TIME - 1`` of the weight-gradient GEMMs in the backward pass).
The cast work is split as the GEMMs it feeds: one forward GEMM to two backward ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]


class Float8Recipe(StrEnum):
    """torchao's float8 training recipes (``Float8LinearRecipeName``), by scaling granularity."""

    TENSORWISE = "tensorwise"
    ROWWISE = "rowwise"
    ROWWISE_WITH_GW_HP = "rowwise_with_gw_hp"


# Bytes each operand's casts read and write per element in forward and backward together, as torchao's own
# roofline model counts them (pytorch/ao torchao/testing/training/roofline_utils.py @104f01a8,
# get_tensor_memory_traffic_ovhd_s): tensorwise, an amax pass (read 2) and one cast writing both layouts
# (read 2, write 1 + 1), a weight cast once per orientation (2 + 3 + 3); rowwise, one kernel casting along
# rows and writing the 16-bit transpose (read 2, write 1 + 2), then the transpose cast (read 2, write 1), a
# weight transposed by its own kernel (3 + 4 + 3); rowwise_with_gw_hp, inputs and output gradients along rows
# only (read 2, write 1), the weight along rows and tensorwise (3 + 3).
CAST_BYTES: dict[str, tuple[float, float]] = {  # recipe: (an activation or gradient element, a weight element)
    "tensorwise": (6.0, 8.0),
    "rowwise": (8.0, 10.0),
    "rowwise_with_gw_hp": (3.0, 6.0),
}
# A 16-bit GEMM output read and written once more to apply the row scales (pytorch/ao
# torchao/float8/float8_ops.py addmm_float8_unwrapped: rowwise scales without fast accumulation run the
# tensorwise cuBLAS kernel with unit scales and multiply the output afterwards; Float8LinearConfig keeps
# fast accumulation for the output GEMM only, so both gradient GEMMs pay it).
RESCALE_BYTES = 4.0
# Prior, identified from one source that no case here comes from: the share of the roofline bandwidth the
# row-scaled recipes' extra casts and rescales reach. torchao's published 8 x H100 Llama 3 8B FSDP2 run
# (torch.compile, per-op SAC, batch 1, sequence 8192: pytorch/ao docs/source/workflows/training.md, "e2e training
# benchmarks", NVIDIA H100) measured rowwise at 6768 tokens/s against tensorwise's 7689.5 (0.880); this model
# gives that ratio on that job with 0.41 (tests/validation/test_float8_recipe_effect.py checks it), 0.96 at the
# roofline. Identified again on 2026-12-04 (0.28 before) once torchtitan's per-op selective recompute runs the
# element-wise passes again, these casts among them (clustersim.compute.memory, SelectiveRecompute). What slows
# them is not separated in the sources: column-wise amax reductions, the unfused rescale
# kernels (pytorch/ao issue 2184) and the Inductor setting emulate_precision_casts that torchtitan turns on for
# rowwise (pytorch/torchtitan torchtitan/components/quantization/float8.py @820504e, pytorch/pytorch issue 150859).
CAST_ROOFLINE_FRACTION = 0.41
# Prior, one source: PyTorch's CUTLASS rowwise _scaled_mm with fast accumulation reaches "90-100% of
# tensor-wise efficiency" for most shapes on H100, with a long tail to 50% on small ones (pytorch/pytorch
# issue 147971, 2025-02-26); the middle of the stated band for the large GEMMs of training.
ROWWISE_GEMM_RATE = 0.95
# Prior: a BF16 GEMM takes twice an FP8 one's tensor-core time, the dense peak ratio on every FP8 GPU
# (H100 SXM 989 / 1979 TFLOPS, B200 2.25 / 4.5 PFLOPS: NVIDIA datasheets); the casts of the FP8 rate are
# not taken out, so this slightly overstates the BF16 weight-gradient GEMM of rowwise_with_gw_hp.
BF16_OVER_FP8_GEMM_TIME = 2.0


@dataclass(frozen=True)
class _Widths:
    """Elements per token (and per layer for weights) of one layer's float8 operands on one device."""

    gathered_inputs: FloatArray  # X of the column-parallel GEMMs (QKV, the MLP's first matrices): all-gathered
    local_inputs: FloatArray  # X of the row-parallel GEMMs (output projection, the MLP's last matrix)
    gathered_grads: FloatArray  # G of the row-parallel GEMMs: all-gathered in the backward pass
    local_grads: FloatArray  # G of the column-parallel GEMMs
    weights: FloatArray  # weight elements per layer on the device


def _widths(model: Transformer, like: FloatArray, tp: FloatArray) -> _Widths:
    """One layer's float8 operands: attention (QKV, output projection) and the MLP (dense widths; a MoE
    model's routed experts are left to their own grouped GEMMs, as torchao leaves them)."""
    h, q, kv, f = model.hidden, model.q_width, model.kv_width, model.ffn_hidden
    first = model.ffn_type.num_matrices - 1  # the MLP's up (and gate) matrices
    return _Widths(
        gathered_inputs=like + 2.0 * h,
        local_inputs=like + (model.context_width + f) / tp,
        gathered_grads=like + 2.0 * h,
        local_grads=like + (q + 2 * kv + first * f) / tp,
        weights=like + (h * (q + 2 * kv) + model.context_width * h + (first + 1) * h * f) / tp,
    )


def _cast_bytes(recipe: Float8Recipe, w: _Widths, tokens: FloatArray, shard: FloatArray) -> FloatArray:
    """Bytes one layer's casts and rescales read and write on one device under ``recipe``: tensorwise casts
    the gathered tensors per shard, before the all-gather (torchtitan's float8 TP styles, tensorwise only:
    pytorch/torchtitan torchtitan/models/llama3/parallelize_llama.py @820504e), the row-scaled recipes the
    gathered tensors on every rank; their gradient GEMMs' outputs are rescaled (dX, and dW under rowwise)."""
    activation, weight = CAST_BYTES[recipe.value]
    if recipe is Float8Recipe.TENSORWISE:
        gathered = (w.gathered_inputs + w.gathered_grads) / shard
        return tokens * activation * (gathered + w.local_inputs + w.local_grads) + weight * w.weights
    inputs, grads = w.gathered_inputs + w.local_inputs, w.gathered_grads + w.local_grads
    rescaled_weights = RESCALE_BYTES * w.weights if recipe is Float8Recipe.ROWWISE else 0.0
    return tokens * (activation * (inputs + grads) + RESCALE_BYTES * inputs) + weight * w.weights + rescaled_weights


def float8_extra_bytes(
    model: Transformer, recipe: Float8Recipe, *, tokens: FloatArray, tp: FloatArray, sp_split: FloatArray
) -> FloatArray:
    """Cast and rescale bytes one layer's float8 recipe moves beyond tensorwise on one device, per
    micro-batch (forward and backward together), never below zero."""
    like = np.zeros(np.broadcast_shapes(np.shape(tokens), np.shape(tp), np.shape(sp_split)))
    widths = _widths(model, like, np.asarray(tp, dtype=float))
    shard = like + np.asarray(sp_split, dtype=float)
    extra = _cast_bytes(recipe, widths, like + tokens, shard) - _cast_bytes(
        Float8Recipe.TENSORWISE, widths, like + tokens, shard
    )
    return np.asarray(np.maximum(extra, 0.0) / CAST_ROOFLINE_FRACTION, dtype=np.float64)


def scaled_gemm_surcharge(recipe: Float8Recipe) -> tuple[float, float]:
    """``(forward, backward)``: the extra GEMM time of ``recipe`` over tensorwise, as a share of the
    layer's forward GEMM time at the FP8 rate (the weight-gradient GEMM equals the forward one in FLOPs)."""
    if recipe is Float8Recipe.TENSORWISE:
        return 0.0, 0.0
    forward = 1.0 / ROWWISE_GEMM_RATE - 1.0
    backward = BF16_OVER_FP8_GEMM_TIME - 1.0 if recipe is Float8Recipe.ROWWISE_WITH_GW_HP else 0.0
    return forward, backward
