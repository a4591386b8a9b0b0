"""What a serving estimate says of its deployment beyond the request: a pipeline stage's layer mix, prompt steps
bound by their host's launches, and a Mamba-2 hybrid's prefill scan at its FP32 bound."""

from __future__ import annotations

from clustersim.catalog.schema import Dtype
from clustersim.compute.scan_kernel import fp32_bound_note
from clustersim.serving.eager_note import Prompts, eager_note
from clustersim.serving.engine import InferenceCalibration, ServingSystem
from clustersim.serving.engines import EngineProfile
from clustersim.serving.memory import holding_notes
from clustersim.workload.transformer import Transformer


def deployment_notes(
    model: Transformer, system: ServingSystem, request: Prompts, cal: InferenceCalibration, engine: EngineProfile
) -> tuple[str, ...]:
    """The notes of ``clustersim.serving.memory.holding_notes``, ``clustersim.serving.eager_note`` and
    ``clustersim.compute.scan_kernel.fp32_bound_note`` (its bounds derated alike in a serving step, the device's own
    peaks decide which binds), in that order."""
    device = system.system
    scan = fp32_bound_note(model, device.accelerator.id, device.peak_flop_per_s(Dtype.BF16), device.fp32_flop_per_s)
    return holding_notes(model, system.pp) + eager_note(model, system, request, cal, engine) + ((scan,) if scan else ())
