"""The serving model's calibration: the achieved fractions of the dense peak and of the HBM bandwidth and the
overheads the step model (``clustersim.serving.engine``) runs at, as the reference engine (TensorRT-LLM) reaches
them. The values live in ``calibration.toml`` beside this module, each with its source; a user's file
(``CLUSTERSIM_SERVING_CALIBRATION``, paths separated by ``os.pathsep``, or ``extra=``) replaces the fields it gives.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pydantic import ConfigDict, Field
from pydantic.dataclasses import dataclass as pydantic_dataclass

from clustersim.catalog.overlay import CalibrationFile
from clustersim.catalog.schema import Dtype
from clustersim.catalog.tomlfiles import CalibrationEntry
from clustersim.serving.formats import FamilyFractions, FamilyValues

ENV_VAR = "CLUSTERSIM_SERVING_CALIBRATION"
CALIBRATION_FILE = "calibration.toml"


@pydantic_dataclass(frozen=True, slots=True, kw_only=True, config=ConfigDict(extra="forbid"))
class InferenceCalibration:
    """Achieved efficiencies and engine limits; fitted once on ../shared/validation/inference.jsonl.

    The values live in ``calibration.toml`` beside this module, each with its source
    (:func:`calibration_entries`); :func:`serving_calibration` reads them with the user's files over them.
    """

    flop_efficiency: float = Field(gt=0, le=1, description="Achieved fraction of the dense peak on large GEMMs.")
    family_flop_efficiency: FamilyFractions = Field(
        description="flop_efficiency where GEMMs of one format on one accelerator family reach another fraction "
        "('family.format', value), e.g. ('blackwell.fp4', 0.43)."
    )
    gemm_half_tokens: float = Field(
        ge=0, description="Tokens per step (GEMM rows) at which GEMMs reach half of flop_efficiency."
    )
    moe_token_layer_s: float = Field(
        0.0,
        ge=0,
        le=1e-6,
        description="Time per token per MoE layer beyond its routed experts' FLOPs (routing, permutation, the "
        "grouped GEMMs' shortfall, the weighted combine), seconds; each TP rank pays it for every token.",
    )
    hbm_efficiency: float = Field(gt=0, le=1, description="Achieved fraction of HBM bandwidth on weight and KV reads.")
    decode_attention_hbm_efficiency: FamilyValues = Field(
        (),
        description="hbm_efficiency of decode attention's KV-cache reads on the accelerator families (family, "
        "fraction) whose decode kernels reach another share of the HBM bandwidth, e.g. ('blackwell', 0.56).",
    )
    attention_flop_efficiency: float = Field(
        gt=0,
        le=1,
        description="Achieved fraction of the dense peak on a fused prefill attention kernel's products (its "
        "exponentials priced apart: clustersim.compute.attention_kernel).",
    )
    family_attention_flop_efficiency: FamilyValues = Field(
        (),
        description="attention_flop_efficiency on the accelerator families (family, fraction) whose prefill attention "
        "is priced otherwise, e.g. ('trainium', 0.5): a family with no exponential rate prices its core whole.",
    )
    latent_decode_flop_efficiency: float = Field(
        gt=0, le=1, description="Achieved fraction of the 16-bit dense peak on latent attention's (MLA) decode."
    )
    activation_passes: float = Field(ge=0, description="Hidden-vector reads and writes per token per layer.")
    step_overhead_s: float = Field(ge=0, description="Fixed cost per engine step, seconds.")
    layer_overhead_s: float = Field(
        0.0,
        ge=0,
        le=1e-3,
        description="Fixed cost per layer per engine step (its kernels' launch gaps, ramps and tails, which do "
        "not shrink with the batch), seconds.",
    )
    sync_overhead_s: float = Field(ge=0, description="Cost each TP all-reduce adds beyond the collective, seconds.")
    sequence_overhead_s: float = Field(ge=0, description="Host-side cost per sequence per step, seconds.")
    workspace_bytes: float = Field(ge=0, description="Activations, graphs, buffers and context per device, bytes.")
    power_clock_exponent: float = Field(
        ge=0, le=1, description="Sustained clock on compute-bound work goes as (board power / TDP) to this power."
    )

    def flop_efficiency_on(self, family: str, dtype: Dtype) -> float:
        """The achieved fraction of the ``dtype`` peak that GEMMs reach on an accelerator ``family``: the
        file's ``family.format`` value where it gives one, else ``flop_efficiency`` (fitted on the
        reference's Hopper runs)."""
        return dict(self.family_flop_efficiency).get(f"{family}.{dtype.value}", self.flop_efficiency)

    def attention_flop_efficiency_on(self, family: str) -> float:
        """The achieved fraction of its format's peak that a prefill attention core reaches on an accelerator
        ``family``: the file's value for the family where it gives one, else ``attention_flop_efficiency``."""
        return dict(self.family_attention_flop_efficiency).get(family, self.attention_flop_efficiency)

    def kv_read_efficiency_on(self, family: str) -> float:
        """The achieved fraction of the HBM bandwidth that decode attention's KV-cache reads reach on an
        accelerator ``family``: the file's value for the family where it gives one, else ``hbm_efficiency``."""
        return dict(self.decode_attention_hbm_efficiency).get(family, self.hbm_efficiency)


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
CALIBRATION = CalibrationFile(InferenceCalibration, "clustersim.serving", CALIBRATION_FILE, ENV_VAR)
# The packaged values (no user files): what the model was validated with.
DEFAULT_CALIBRATION = CALIBRATION.packaged


def serving_calibration(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> InferenceCalibration:
    """The packaged calibration with the user's files (``CLUSTERSIM_SERVING_CALIBRATION``, then
    ``extra``) over it, field by field; the same inputs return the same (cached) object."""
    return CALIBRATION.calibration(extra, use_env=use_env)


def calibration_entries(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, CalibrationEntry]:
    """Each calibrated constant with its source, fitted note and file (see ``serving_calibration``)."""
    return CALIBRATION.entries(extra, use_env=use_env)


def default_calibration() -> InferenceCalibration:
    """What the model uses when no calibration is given: the packaged values, with the files in
    ``CLUSTERSIM_SERVING_CALIBRATION`` over them when it is set."""
    return CALIBRATION.default()
