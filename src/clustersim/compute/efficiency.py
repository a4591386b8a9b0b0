"""Achieved fractions of an accelerator's peaks, per architecture family, fitted once.

A matrix multiply of ``F`` FLOPs runs at ``peak x gemm_max x F / (F + gemm_half_flop)``: large
GEMMs approach a ceiling (``gemm_max``), small ones lose to launch, tail and wave quantization
(half the ceiling at ``gemm_half_flop``). The attention core (scores, softmax, context) has its own
fraction of the ceiling (``attention``), reached as each query meets many keys in one kernel call:
``K / (K + attention_half_keys)`` of it for ``K`` keys (a fused kernel's per-tile prologue, epilogue
and causal diagonal are paid once per query tile; a context-parallel ring splits ``K`` over its
steps), and after its products it pays the share ``softmax_exposed`` of its scores' exponentials at
the special function units' rate (the catalog's ``exp_per_s``), so that a narrow head costs more per
FLOP than a wide one; element-wise work (norms, activations, residuals, dropout, the loss and the
optimizer) streams through HBM at ``memory_efficiency`` of the datasheet bandwidth. FP8 GEMMs run
at the FP8 peak times ``fp8_efficiency_ratio`` of the BF16 fraction (casts, scaling, smaller tiles);
4-bit GEMMs (NVFP4, MXFP4) at the FP4 peak plus the casts an FP8 GEMM pays, which do not shrink
with the rate (``clustersim.compute.precision``, ``clustersim.training.pricing``).
Each optimizer step also costs ``step_s`` whatever the model's size: the gradient-norm reduction and
clipping, the optimizer's per-tensor kernels and the host synchronisation that ends a step. The
experts of a MoE layer run as one grouped GEMM per matrix over the device's local experts; in FP8,
each expert's slice costs ``expert_gemm_s`` more than a GEMM of its size: the quantization of its own
input (casts, scales, amax) before its GEMM. A BF16 slice pays a GEMM's own fixed cost only
(``gemm_half_flop``): Megatron-Core's BF16 MoE runs (Megatron-MoE-ModelZoo's Qwen3-235B) sit within
a few percent with no extra cost per expert, where its FP8 runs (Megatron-Bridge's tables) need tens
of microseconds per slice.
What the software does (fused attention, overlap, sharding, its own kernels' share of these
fractions) is the framework's, in ``clustersim.compute.software``; these numbers describe the chip.

The values live in ``efficiency.toml`` beside this module, each family with the source it was fitted
to (``benchmarks/calibrate_training.py`` fits them once to ``../shared/validation/training.jsonl``,
never per case). A user's own file (``--efficiency FILE`` or ``CLUSTERSIM_EFFICIENCY``, paths separated
by ``os.pathsep``) replaces the fields it gives, so a measured machine can bring its own fractions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field

from clustersim.catalog.overlay import RecordFile
from clustersim.catalog.schema import Accelerator

FloatArray = npt.NDArray[np.float64]
ENV_VAR = "CLUSTERSIM_EFFICIENCY"
PACKAGE, FILE_NAME = "clustersim.compute", "efficiency.toml"
FALLBACK_FAMILY = "hopper"


class FamilyEfficiency(BaseModel):
    """Achieved fractions of the peaks of one accelerator family (dimensionless unless named)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gemm_max: float = Field(gt=0, le=1, description="Ceiling of a large GEMM, fraction of the dense peak.")
    gemm_half_flop: float = Field(ge=0, description="GEMM size (FLOPs) at which half the ceiling is reached.")
    attention: float = Field(gt=0, le=1, description="Attention core, fraction of the GEMM ceiling.")
    attention_half_keys: float = Field(
        0.0,
        ge=0,
        description="Keys per query in one attention kernel call at which the core reaches half its fraction.",
    )
    softmax_exposed: float = Field(
        1.0,
        ge=0,
        le=1,
        description=(
            "Share of the attention core's exponentials (at the device's exp_per_s) its kernels leave exposed "
            "after the products: 1 one after the other, 0 hidden under them."
        ),
    )
    memory_efficiency: float = Field(gt=0, le=1, description="Element-wise kernels, fraction of HBM bandwidth.")
    fp8_efficiency_ratio: float = Field(gt=0, le=1, description="FP8 fraction of FP8 peak / BF16 fraction.")
    step_s: float = Field(
        0.0, ge=0, le=1, description="Fixed seconds per optimizer step (gradient norm, many small kernels, syncs)."
    )
    expert_gemm_s: float = Field(
        0.0,
        ge=0,
        le=1e-3,
        description="Fixed seconds per expert GEMM slice of a grouped (MoE) FP8 GEMM, beyond a GEMM's own.",
    )
    source: str = Field(min_length=1, description="What the values were fitted to, or where they come from.")
    fitted: str | None = Field(None, description="When and how the values were last fitted (the calibration script).")

    def gemm_fraction(self, flop: FloatArray | float) -> FloatArray:
        """Achieved fraction of the dense peak for GEMMs of ``flop`` FLOPs each."""
        flop = np.asarray(flop, dtype=float)
        return self.gemm_max * flop / (flop + self.gemm_half_flop)

    def attention_fraction(self, keys_per_call: FloatArray | float) -> FloatArray:
        """Achieved fraction of the dense 16-bit peak of an attention core whose queries each meet
        ``keys_per_call`` keys in one kernel call."""
        keys = np.asarray(keys_per_call, dtype=float)
        return self.gemm_max * self.attention / (1.0 + self.attention_half_keys / keys)


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
EFFICIENCY_FILE = RecordFile(FamilyEfficiency, PACKAGE, FILE_NAME, ENV_VAR, what="efficiency file", entry="family")


def efficiency_table(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, FamilyEfficiency]:
    """The packaged fractions per family, with the user's files (``CLUSTERSIM_EFFICIENCY``, then
    ``extra``) merged over them field by field. The same inputs return the same (cached) table."""
    return EFFICIENCY_FILE.records(extra, use_env=use_env)


def efficiency_for(accelerator: Accelerator, table: Mapping[str, FamilyEfficiency] | None = None) -> FamilyEfficiency:
    """The fractions of the accelerator's family (Hopper's where the table has no such family)."""
    table = efficiency_table() if table is None else table
    return table.get(accelerator.family) or table[FALLBACK_FAMILY]
