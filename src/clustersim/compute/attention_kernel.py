"""The time of a fused (flash) attention core, one definition for training and serving.

A fused kernel multiplies each query by its keys and the probabilities by the values on the tensor cores, and between
the two products takes one exponential per score (query head x key) on the special function units, at the device's
``exp_per_s`` (the catalog's). The share ``softmax_exposed`` of the exponentials that the family's kernels do not hide
under the products adds to the time (``clustersim.compute.efficiency``: 1 on Hopper and Ampere, where
FlashAttention-3's head-dim curve is products at 931 TFLOP/s plus every exponential at the MUFU rate; 0.5 on
Blackwell). Both run at the kernel's achieved ``fraction`` of their rates, so a narrow head pays more per FLOP than a
wide one, an 8-bit core gains less than its doubled product rate, and Blackwell Ultra's doubled exponential rate
shortens the core. The training step (``clustersim.training.pricing``) prices its forward and backward cores with it,
the serving step (``clustersim.serving.engine``) a prompt's causal prefill.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def fused_attention_s(
    product_flop: FloatArray | float,
    exps: FloatArray | float,
    *,
    peak_flop_per_s: FloatArray | float,
    exp_per_s: FloatArray | float,
    softmax_exposed: float,
    fraction: FloatArray | float,
) -> FloatArray:
    """Seconds of a fused attention core: ``product_flop`` at ``peak_flop_per_s`` and the exposed share of ``exps``
    exponentials at ``exp_per_s`` (infinite: none recorded, nothing paid), both at ``fraction`` of those rates."""
    seconds = (np.divide(product_flop, peak_flop_per_s) + np.multiply(exps, softmax_exposed) / exp_per_s) / fraction
    return np.asarray(seconds)
