"""Achieved fractions of an accelerator's peaks, per architecture family, fitted once.

A matrix multiply of ``F`` FLOPs runs at ``peak x gemm_max x F / (F + gemm_half_flop)``: large
GEMMs approach a ceiling (``gemm_max``), small ones lose to launch, tail and wave quantization
(half the ceiling at ``gemm_half_flop``). The attention core (scores, softmax, context) has its own
fraction of the ceiling; element-wise work (norms, activations, residuals, dropout, the loss and the
optimizer) streams through HBM at ``memory_efficiency`` of the datasheet bandwidth. FP8 GEMMs run
at the FP8 peak times ``fp8_efficiency_ratio`` of the BF16 fraction (casts, scaling, smaller tiles).
``fused_attention`` records whether the software measured on the family (Megatron-LM of 2021-22 on
Ampere; Transformer Engine, NeuronX) ran a fused attention kernel that keeps no score matrix, and
``tp_overlap`` whether it overlapped tensor-parallel communication with GEMMs (Transformer Engine's
userbuffers on Hopper); a layout that says neither takes the family's software default.

The values are fitted by ``benchmarks/calibrate_training.py`` to the training cases of
``../shared/validation/training.jsonl`` (mean |log error| over all cases of a family, never per
case) and stored here with the hardware family they describe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Accelerator

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class FamilyEfficiency:
    """Achieved fractions of the peaks of one accelerator family (dimensionless unless named)."""

    gemm_max: float  # ceiling of a large GEMM, fraction of the dense peak
    gemm_half_flop: float  # GEMM size (FLOPs) at which half the ceiling is reached
    attention: float  # attention core, fraction of the GEMM ceiling
    memory_efficiency: float  # element-wise kernels, fraction of the HBM datasheet bandwidth
    fp8_efficiency_ratio: float  # FP8 GEMM fraction of the FP8 peak / BF16 fraction of the BF16 peak
    fused_attention: bool  # the measured software used a fused (flash) attention kernel: no stored scores
    tp_overlap: bool  # the measured software overlapped tensor-parallel communication with GEMMs

    def gemm_fraction(self, flop: FloatArray | float) -> FloatArray:
        """Achieved fraction of the dense peak for GEMMs of ``flop`` FLOPs each."""
        flop = np.asarray(flop, dtype=float)
        return self.gemm_max * flop / (flop + self.gemm_half_flop)


# Fitted by benchmarks/calibrate_training.py; see the module docstring.
FAMILY_EFFICIENCY: dict[str, FamilyEfficiency] = {
    "ampere": FamilyEfficiency(
        gemm_max=0.776,
        gemm_half_flop=4.8e7,
        attention=0.533,
        memory_efficiency=0.75,
        fp8_efficiency_ratio=1.0,
        fused_attention=False,
        tp_overlap=False,
    ),
    "hopper": FamilyEfficiency(
        gemm_max=0.677,
        gemm_half_flop=2.3e9,
        attention=0.295,
        memory_efficiency=0.718,
        fp8_efficiency_ratio=0.850,
        fused_attention=True,
        tp_overlap=True,
    ),
    "trainium": FamilyEfficiency(
        gemm_max=0.537,
        gemm_half_flop=1.37e8,
        attention=0.90,
        memory_efficiency=0.95,
        fp8_efficiency_ratio=1.0,
        fused_attention=True,
        tp_overlap=False,
    ),
}
# Blackwell has no published training runs in the ground truth yet: Hopper's fractions stand in.
FAMILY_EFFICIENCY["blackwell"] = FAMILY_EFFICIENCY["hopper"]


def efficiency_for(accelerator: Accelerator) -> FamilyEfficiency:
    """The fitted fractions of the accelerator's family (Hopper's where the family has none)."""
    return FAMILY_EFFICIENCY.get(accelerator.family, FAMILY_EFFICIENCY["hopper"])
