"""Number formats of serving: what a weight or KV-cache element costs in bytes, which tensor-core rate its
GEMMs run at, and where it runs.

* ``bf16``, ``fp16``: 2 bytes; GEMMs at the 16-bit peak.
* ``fp8``: 1 byte (E4M3, a per-tensor or per-block scale whose share is negligible); GEMMs at the FP8 peak
  (weights and activations in FP8).
* ``nvfp4``: 4-bit E2M1 values in blocks of 16 sharing one FP8 (E4M3) scale, plus one FP32 scale per
  tensor: ``(16 x 4 + 8) / 16 = 4.5`` bits, 0.5625 bytes per element (NVIDIA, "Introducing NVFP4 for
  Efficient and Accurate Low-Precision Inference", developer.nvidia.com technical blog, 2025-06-24).
  Weights and activations in NVFP4 (ModelOpt's ``NVFP4`` recipe, W4A4): GEMMs at the FP4 peak, which
  only Blackwell's fifth-generation tensor cores have.
* ``mxfp4``: OCP microscaling FP4: E2M1 values in blocks of 32 sharing one E8M0 (power-of-two) scale:
  ``(32 x 4 + 8) / 32 = 4.25`` bits, 0.53125 bytes (OCP Microscaling Formats (MX) Specification v1.0,
  2023-09, section 5: MXFP4 = k 32, scale E8M0, element FP4 E2M1). Priced as W4A4 at the accelerator's
  FP4 peak, as the MX block format defines both operands.

Attention computes in its KV cache's format, at most FP8: its kernels take the keys and values as stored
(TensorRT-LLM's FP8 context FMHA and XQA kernels need an FP8 cache, and an NVFP4 cache is computed in FP8),
so FP8 weights beside a 16-bit cache (vLLM's and SGLang's ``--kv-cache-dtype auto`` for an FP8 checkpoint)
leave attention at the 16-bit peak. A 4-bit format keeps the embeddings, logits and norms in bf16 (ModelOpt
leaves them unquantized).

KV cache: ``bf16``, ``fp16``, ``fp8`` and ``nvfp4`` (TensorRT-LLM's "NVFP4 KV Cache" recipe, a ModelOpt
checkpoint option, on Blackwell: nvidia.github.io/TensorRT-LLM/features/quantization.html); no engine
profile here stores an MXFP4 cache. Without a stated KV format a 4-bit checkpoint's cache is fp8: NVIDIA's
FP4 checkpoints quantize it so (MLPerf Inference v5.0, NVIDIA's Blackwell llama2-70b config:
``precision = 'fp4'``, ``kv_cache_dtype: 'fp8'``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated

from pydantic import AfterValidator, BeforeValidator

from clustersim.catalog.schema import Accelerator, Dtype
from clustersim.compute.precision import bits_per_element, refuse_bare_fp4
from clustersim.errors import ClusterSimError


class BlockFp4(StrEnum):
    """4-bit float formats with block scales (the 16- and 8-bit serving formats are the catalog's ``Dtype``)."""

    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"


# A serving number format: bf16, fp16, fp8 (``Dtype``) or a block-scaled FP4.
ServingPrecision = Dtype | BlockFp4

SERVING_DTYPES: tuple[ServingPrecision, ...] = (Dtype.BF16, Dtype.FP16, Dtype.FP8, BlockFp4.NVFP4, BlockFp4.MXFP4)
KV_FORMATS: tuple[ServingPrecision, ...] = (Dtype.BF16, Dtype.FP16, Dtype.FP8, BlockFp4.NVFP4)


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """What one element of a format costs and which tensor-core rate computes with it."""

    bytes_per_element: float  # block scales included
    gemm_dtype: Dtype  # the peak its GEMMs run at
    attention_dtype: Dtype  # the peak attention runs at over a KV cache in this format
    families: tuple[str, ...] | None = None  # accelerator families it is served on (None: any with its peak)
    kv_frameworks: tuple[str, ...] | None = None  # engine frameworks that store a KV cache in it (None: all)


# Where 4-bit float checkpoints are served: Blackwell's fifth-generation tensor cores run NVFP4 and MXFP4
# GEMMs at the FP4 rate. Trainium3 has an MXFP4 rate (the catalog's), but no Neuron serving engine here is
# documented to load MXFP4 checkpoints, so it is not priced there.
_FP4_FAMILIES = ("blackwell",)

_SPECS: dict[ServingPrecision, FormatSpec] = {
    Dtype.BF16: FormatSpec(2.0, Dtype.BF16, Dtype.BF16),
    Dtype.FP16: FormatSpec(2.0, Dtype.FP16, Dtype.FP16),
    Dtype.FP8: FormatSpec(1.0, Dtype.FP8, Dtype.FP8),
    BlockFp4.NVFP4: FormatSpec(bits_per_element("nvfp4") / 8, Dtype.FP4, Dtype.FP8, _FP4_FAMILIES, ("tensorrt-llm",)),
    BlockFp4.MXFP4: FormatSpec(bits_per_element("mxfp4") / 8, Dtype.FP4, Dtype.FP8, _FP4_FAMILIES),
}


def _names(formats: Iterable[ServingPrecision]) -> str:
    return ", ".join(f.value for f in formats)


def format_spec(precision: ServingPrecision) -> FormatSpec:
    """The spec of a serving format; ``ClusterSimError`` for a format serving does not price (fp32, int8)."""
    try:
        return _SPECS[precision]
    except KeyError:
        raise ClusterSimError(
            f"precision: {precision.value} is not a serving format (valid: {_names(SERVING_DTYPES)})"
        ) from None


def bytes_per_element(precision: ServingPrecision) -> float:
    """Bytes one weight, activation or KV-cache element takes in a serving format, block scales included."""
    return format_spec(precision).bytes_per_element


def gemm_dtype(precision: ServingPrecision) -> Dtype:
    """The catalog format whose dense peak a GEMM of ``precision`` weights and activations runs at."""
    return format_spec(precision).gemm_dtype


def attention_dtype(kv_precision: ServingPrecision) -> Dtype:
    """The catalog format whose dense peak attention runs at over a ``kv_precision`` cache (fp8 for 4-bit)."""
    return format_spec(kv_precision).attention_dtype


def is_fp4(precision: ServingPrecision) -> bool:
    """Whether ``precision`` is a block-scaled 4-bit float format."""
    return isinstance(precision, BlockFp4)


def default_kv(precision: ServingPrecision) -> ServingPrecision:
    """The KV-cache format when none is given: the weights' format, fp8 for 4-bit weights."""
    return Dtype.FP8 if is_fp4(precision) else precision


def kv_default_note(precision: ServingPrecision, kv_precision: ServingPrecision | None) -> str | None:
    """What an estimate says when 4-bit weights took an fp8 KV cache by default (None otherwise)."""
    if kv_precision is not None or not is_fp4(precision):
        return None
    return (
        f"kv cache: fp8 beside {precision.value} weights, as NVIDIA's FP4 checkpoints store it "
        "(--kv-cache bf16 or nvfp4 to price another)"
    )


def parse_precision(value: str | ServingPrecision, field_name: str = "precision") -> ServingPrecision:
    """A serving number format (bf16, fp16, fp8, nvfp4 or mxfp4) from the user's text; ``ClusterSimError``
    naming the field and the valid values (a bare ``fp4`` is refused as ambiguous)."""
    text = str(value).strip().lower()
    for fmt in SERVING_DTYPES:
        if fmt.value == text:
            return fmt
    refuse_bare_fp4(str(value), field_name, _names(SERVING_DTYPES))
    raise ClusterSimError(
        f"{field_name}: unknown value {value!r} (valid: {_names(SERVING_DTYPES)})", field=field_name, value=str(value)
    )


def _runs_on(precision: ServingPrecision, accelerator: Accelerator) -> bool:
    spec = format_spec(precision)
    if spec.families is not None and accelerator.family not in spec.families:
        return False
    return accelerator.dense_flop_per_s.get(spec.gemm_dtype) is not None


def formats_on(accelerator: Accelerator) -> tuple[ServingPrecision, ...]:
    """The serving formats whose GEMMs ``accelerator`` has tensor cores for."""
    return tuple(f for f in SERVING_DTYPES if _runs_on(f, accelerator))


def check_formats(weights: ServingPrecision, kv: ServingPrecision, accelerator: Accelerator, framework: str) -> None:
    """Refuse a weight or KV format the accelerator or the engine cannot run, naming the format, the
    accelerator (or engine) and what is valid; 4-bit GEMMs need FP4 tensor cores (NVFP4: NVIDIA's)."""
    if is_fp4(weights) and not _runs_on(weights, accelerator):
        raise ClusterSimError(
            f"precision: {weights.value} is served on Blackwell's FP4 tensor cores, which {accelerator.id} has not "
            f"(valid on {accelerator.id}: {_names(formats_on(accelerator))})",
            field="precision",
            value=weights.value,
        )
    if kv not in KV_FORMATS:
        raise ClusterSimError(
            f"kv precision: no engine stores a KV cache in {kv.value} (valid: {_names(KV_FORMATS)})",
            field="kv_precision",
            value=kv.value,
        )
    spec = format_spec(kv)
    if spec.kv_frameworks is not None and framework not in spec.kv_frameworks:
        raise ClusterSimError(
            f"kv precision: a {kv.value} KV cache is a {', '.join(spec.kv_frameworks)} feature, not {framework}'s "
            f"(valid: bf16, fp16, fp8)",
            field="kv_precision",
            value=kv.value,
        )
    if is_fp4(kv) and not _runs_on(kv, accelerator):
        raise ClusterSimError(
            f"kv precision: a {kv.value} KV cache is served on Blackwell's FP4 tensor cores, which "
            f"{accelerator.id} has not (valid: bf16, fp16, fp8)",
            field="kv_precision",
            value=kv.value,
        )
    if is_fp4(weights) and framework not in _FP4_FRAMEWORKS:
        raise ClusterSimError(
            f"precision: {weights.value} weights are served by {', '.join(_FP4_FRAMEWORKS)} on Blackwell, not by "
            f"{framework} (valid with {framework}: bf16, fp16, fp8)",
            field="precision",
            value=weights.value,
        )


# GPU engines that load NVFP4 / MXFP4 checkpoints on Blackwell (TensorRT-LLM: ModelOpt NVFP4 and MXFP4
# recipes, features/quantization.html; vLLM and SGLang: ModelOpt FP4 and MXFP4 (gpt-oss) checkpoints).
_FP4_FRAMEWORKS = ("tensorrt-llm", "vllm", "sglang")


def _as_pairs(value: object) -> object:
    """A TOML table ``{"blackwell.fp4" = 0.43}`` as sorted (key, fraction) pairs (hashable)."""
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


def _checked_pairs(value: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    valid = {d.value for d in Dtype}
    for key, fraction in value:
        family, _, fmt = key.partition(".")
        if not family or fmt not in valid:
            formats = ", ".join(d.value for d in Dtype)
            raise ValueError(f"family_flop_efficiency: key {key!r} is not 'family.format' (formats: {formats})")
        if not 0 < fraction <= 1:
            raise ValueError(f"family_flop_efficiency.{key}: {fraction} is not a fraction in (0, 1]")
    return value


# Achieved fractions per accelerator family and GEMM format, ('blackwell.fp4', 0.425): a calibration field.
FamilyFractions = Annotated[tuple[tuple[str, float], ...], BeforeValidator(_as_pairs), AfterValidator(_checked_pairs)]


def _checked_family_values(value: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
    for family, fraction in value:
        if not family or family != family.strip().lower() or "." in family:
            raise ValueError(f"{family!r} is not an accelerator family in lower case (e.g. 'blackwell')")
        if not 0 < fraction <= 1:
            raise ValueError(f"{family}: {fraction} is not a fraction in (0, 1]")
    return value


# Achieved fractions per accelerator family, ('blackwell', 0.56): a calibration field.
FamilyValues = Annotated[
    tuple[tuple[str, float], ...], BeforeValidator(_as_pairs), AfterValidator(_checked_family_values)
]
