"""Training number formats: the rate a format's matrix multiplies run at, and the chips that run it.

A training run's precision names the format of its GEMMs (everything else, the attention core
included, stays in 16 bits, as Transformer Engine's recipes have it):

* ``bf16``, ``fp16``: the 16-bit peak.
* ``fp8``: FP8 (E4M3/E5M2) with one scale per tensor, delayed or current scaling; the FP8 peak.
* ``mxfp8``: OCP microscaling FP8, one E8M0 scale per block of 32 elements (OCP MX spec v1.0,
  section 5). Blackwell's tensor cores apply the block scales inside the MMA at the FP8 rate
  (torchtitan docs/mxfp8.md: MXFP8 GEMMs need SM100; Transformer Engine's MXFP8 recipe is Blackwell's);
  Trainium3 has its own MXFP8 figure. Hopper has no block-scaled tensor cores, so it is refused there.
* ``nvfp4``: NVIDIA's FP4 (E2M1), one FP8 E4M3 scale per block of 16 plus one per tensor; Blackwell's
  FP4 peak, on Blackwell only.
* ``mxfp4``: OCP microscaling FP4, one E8M0 scale per 32; the FP4 peak where a chip quotes one
  (Blackwell; Trainium3, whose MXFP4 rate equals its MXFP8 rate).

The job carries the catalog format whose peak its GEMMs run at (``job_dtype``: FP8 for fp8 and mxfp8,
FP4 for nvfp4 and mxfp4). Block-scaled FP8 costs what per-tensor FP8 does in the compute model: its
extra casts (the transposed operand is quantized again along the other axis) are part of the fitted
``fp8_efficiency_ratio``. Megatron-Bridge's same-layout pairs put MXFP8 5-7% behind FP8 current
scaling on GB200 (Llama 3 8B at 25.11: 29,789 against 31,508 tokens/s/GPU), within one source's noise,
so no separate constant is fitted. A 4-bit GEMM reaches the same fraction of the FP4 peak as an FP8
GEMM of the FP8 peak (a prior: no 4-bit run informs it).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from clustersim.catalog.schema import Accelerator, Dtype
from clustersim.errors import ClusterSimError


class TrainingFormat(StrEnum):
    """The number format of a training run's GEMMs."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    MXFP8 = "mxfp8"
    NVFP4 = "nvfp4"
    MXFP4 = "mxfp4"


@dataclass(frozen=True, slots=True)
class FormatSpec:
    """Which peak a format's GEMMs run at and where it runs."""

    job_dtype: Dtype  # the catalog format whose dense peak its GEMMs run at
    figures: tuple[Dtype, ...]  # the catalog figures of which a chip must quote one
    families: tuple[str, ...] | None = None  # families that also run it without quoting its own figure
    only_families: tuple[str, ...] | None = None  # the only families it runs on (None: any with the figure)


_SPECS: dict[TrainingFormat, FormatSpec] = {
    TrainingFormat.BF16: FormatSpec(Dtype.BF16, (Dtype.BF16,)),
    TrainingFormat.FP16: FormatSpec(Dtype.FP16, (Dtype.FP16,)),
    TrainingFormat.FP8: FormatSpec(Dtype.FP8, (Dtype.FP8,)),
    TrainingFormat.MXFP8: FormatSpec(Dtype.FP8, (Dtype.MXFP8,), families=("blackwell",)),
    TrainingFormat.NVFP4: FormatSpec(Dtype.FP4, (Dtype.FP4,), only_families=("blackwell",)),
    TrainingFormat.MXFP4: FormatSpec(Dtype.FP4, (Dtype.MXFP4,), families=("blackwell",)),
}
TRAINING_FORMATS: tuple[TrainingFormat, ...] = tuple(TrainingFormat)
QUANTIZED_FORMATS: frozenset[str] = frozenset(
    f.value for f in TRAINING_FORMATS if _SPECS[f].job_dtype in (Dtype.FP8, Dtype.FP4)
)
"""The formats whose GEMMs are quantized on the fly (``fp8_efficiency_ratio`` and ``expert_gemm_s`` apply)."""
JOB_DTYPES: tuple[Dtype, ...] = (Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.FP4)
"""The catalog formats a training job's GEMMs run at (``job_dtype`` of every training format)."""


# Block-scaled formats: elements per block and bits of the block's scale, beside the element's own bits
# (OCP Microscaling Formats (MX) Specification v1.0, section 5: k 32, E8M0 scales; NVFP4: blocks of 16
# sharing an FP8 E4M3 scale, NVIDIA's "Introducing NVFP4" technical blog, 2025-06-24).
BLOCK_SCALING: dict[str, tuple[int, int, int]] = {  # format: (element bits, block elements, scale bits)
    "mxfp8": (8, 32, 8),
    "nvfp4": (4, 16, 8),
    "mxfp4": (4, 32, 8),
}


def bits_per_element(fmt: str) -> float:
    """Bits one element of a block-scaled format takes, its share of the block's scale included."""
    element, block, scale = BLOCK_SCALING[fmt]
    return element + scale / block


def _names(formats: tuple[TrainingFormat, ...]) -> str:
    return ", ".join(f.value for f in formats)


def refuse_bare_fp4(text: str, field_name: str, valid: str) -> None:
    """Refuse ``fp4`` as ambiguous (NVFP4 and MXFP4 scale their blocks differently), naming what is valid."""
    if text.strip().lower() == "fp4":
        raise ClusterSimError(
            f"{field_name}: 'fp4' is ambiguous: say nvfp4 (blocks of 16, FP8 scales) or mxfp4 (blocks of 32, "
            f"E8M0 scales) (valid: {valid})",
            field=field_name,
            value=text,
        )


def parse_training_format(value: str, field_name: str = "precision") -> TrainingFormat:
    """A training format from the user's text (any case); ``ClusterSimError`` naming the field and the
    valid values (a bare ``fp4`` is refused as ambiguous)."""
    text = str(value).strip().lower()
    refuse_bare_fp4(str(value), field_name, _names(TRAINING_FORMATS))
    try:
        return TrainingFormat(text)
    except ValueError:
        raise ClusterSimError(
            f"{field_name}: unknown precision {value!r} (valid: {_names(TRAINING_FORMATS)})",
            field=field_name,
            value=str(value),
        ) from None


def runs_on(fmt: TrainingFormat, accelerator: Accelerator) -> bool:
    """Whether ``accelerator`` has tensor cores for ``fmt``'s GEMMs (and quotes the peak they run at)."""
    spec = _SPECS[fmt]
    if spec.only_families is not None and accelerator.family not in spec.only_families:
        return False
    if accelerator.dense_flop_per_s.get(spec.job_dtype) is None:
        return False
    quoted = any(accelerator.dense_flop_per_s.get(d) is not None for d in spec.figures)
    return quoted or (spec.families is not None and accelerator.family in spec.families)


def formats_on(accelerator: Accelerator) -> tuple[TrainingFormat, ...]:
    """The training formats ``accelerator`` runs."""
    return tuple(f for f in TRAINING_FORMATS if runs_on(f, accelerator))


def check_training_format(fmt: TrainingFormat, accelerator: Accelerator, field_name: str = "precision") -> None:
    """Refuse a format the accelerator has no tensor cores for, naming the format, the accelerator and
    what is valid on it."""
    if not runs_on(fmt, accelerator):
        raise ClusterSimError(
            f"{field_name}: {fmt.value} GEMMs need tensor cores that {accelerator.id} ({accelerator.family}) does not "
            f"have (valid on {accelerator.id}: {_names(formats_on(accelerator))})",
            field=field_name,
            value=fmt.value,
        )


def job_dtype(fmt: TrainingFormat) -> Dtype:
    """The catalog format whose dense peak ``fmt``'s GEMMs run at (what a ``TrainingJob`` carries)."""
    return _SPECS[fmt].job_dtype


def training_dtype(value: str, accelerator: Accelerator, field_name: str = "precision") -> Dtype:
    """``value`` parsed, checked against ``accelerator`` and mapped to the job's catalog format."""
    fmt = parse_training_format(value, field_name)
    check_training_format(fmt, accelerator, field_name)
    return job_dtype(fmt)


def is_low_precision(dtype: Dtype) -> bool:
    """Whether GEMMs in ``dtype`` are quantized on the fly (8 or 4 bits: ``fp8_efficiency_ratio`` applies)."""
    return dtype in (Dtype.FP8, Dtype.FP4)


def head_precision(dtype: Dtype, *, quantized: bool) -> Dtype:
    """The format of a training job's output head (its logits GEMM): the job's own where ``quantized`` (the
    software quantizes the output layer too) or the job computes in 16 bits, else BF16, the format an 8- or
    4-bit job keeps outside its quantized layers (``SoftwareProfile.quantized_head``)."""
    return dtype if quantized or not is_low_precision(dtype) else Dtype.BF16
