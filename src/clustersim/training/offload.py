"""Activation offload to host memory (``Layout.offload_layers``, Megatron-Core's ``cpu_offloading_num_layers``).

Each offloaded layer's activations (``compute.memory.layer_activation_bytes``) leave the device over its host
link (``System.host_copy_bytes_per_s``: what copies reach over PCIe, or NVLink-C2C on Grace superchips) while
the next layer computes its forward pass, and come back while a later layer computes its backward pass: per
micro-batch and offloaded layer, a copy each way, exposed where it outlasts the layer it hides behind. The copies
move ``2 k B`` bytes per micro-batch for ``k`` offloaded layers of ``B`` bytes each.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from clustersim.catalog.schema import Dtype
from clustersim.compute.memory import FloatArray, layer_activation_bytes
from clustersim.compute.software import SoftwareProfile
from clustersim.execution import LayoutArrays
from clustersim.training.terms import TermTimes
from clustersim.workload.transformer import Transformer


def offloaded_layer_bytes(
    model: Transformer, lay: LayoutArrays, *, seq_len: int, precision: Dtype, sw: SoftwareProfile
) -> FloatArray:
    """The activation bytes one layer of a layout that recomputes nothing keeps under ``sw`` (its attention kernel,
    FP8 inputs and tensor-parallel inputs): what offloading it moves each way."""
    return layer_activation_bytes(
        model,
        lay,
        seq_len=seq_len,
        fused=sw.fused_attention,
        float8_inputs=sw.keeps_float8_inputs(precision),
        gathered_inputs=sw.tp_keeps_gathered_inputs,
    )


def offload_times(ctx: Any) -> TermTimes:  # a clustersim.training.step.StepContext
    """Seconds per step the offload copies keep the host link busy, and the part the layers they hide behind
    cannot cover (zero for a layout that offloads nothing)."""
    lay = ctx.lay
    assert lay.offload_layers is not None  # LayoutArrays fills it
    layers = lay.offload_layers.astype(float)
    if not layers.any():
        zero = np.zeros_like(ctx.tokens)
        return TermTimes(zero, zero)
    per_layer = offloaded_layer_bytes(ctx.model, lay, seq_len=ctx.seq_len, precision=ctx.precision, sw=ctx.sw)
    host = np.asarray(ctx.system.host_copy_bytes_per_s, dtype=float)  # NaN where not recorded (refused before)
    copy = np.where(layers > 0, per_layer / np.where(np.isfinite(host), host, np.inf), 0.0)
    link = ctx.micro_batches * layers * 2 * copy
    exposed = np.maximum(copy - ctx.layer_fwd, 0.0) + np.maximum(copy - ctx.layer_bwd, 0.0)
    return TermTimes(link, ctx.micro_batches * layers * exposed)
