"""What an estimate says where its engine's prompt steps are host-bound (``clustersim.serving.eager_launches``)."""

from __future__ import annotations

from typing import Protocol

from clustersim.serving.eager_launches import eager_floor_s, kernels_per_layer
from clustersim.serving.engine import InferenceCalibration, ServingSystem, step_times
from clustersim.serving.engines import EngineProfile
from clustersim.serving.formats import ServingPrecision
from clustersim.serving.memory import stage_share
from clustersim.workload.transformer import Transformer


class Prompts(Protocol):
    """What is served, as the note reads it (``clustersim.serving.estimate.Request``)."""

    @property
    def precision(self) -> ServingPrecision: ...
    @property
    def kv(self) -> ServingPrecision: ...
    @property
    def input_tokens(self) -> float: ...


def eager_note(
    model: Transformer, system: ServingSystem, request: Prompts, cal: InferenceCalibration, engine: EngineProfile
) -> tuple[str, ...]:
    """A note where a step running one mean prompt alone takes its kernels' launches longer than the GPU its
    work (nothing where the engine replays graphs, the prompt is within them, or the GPU takes longer)."""
    precision, kv_precision, prompt_tokens = request.precision, request.kv, request.input_tokens
    launch_s = engine.eager_launch_s
    if launch_s is None or prompt_tokens <= engine.graphed_prompt_tokens:
        return ()
    graphed = engine.model_copy(update={"eager_launch_s": None, "mixed_steps": True})
    device_s = float(
        step_times(
            model, system, precision, kv_precision, decode_sequences=0.0, decode_context_tokens=0.0,
            prefill_tokens=prompt_tokens, prefill_sequences=1.0, prompt_tokens=prompt_tokens, cal=cal, engine=graphed,
        ).step_s
    )  # fmt: skip
    layers = model.layers * stage_share(model, system.pp)
    floor_s = eager_floor_s(model, layers, precision, system.tp, launch_s)
    if floor_s <= device_s:
        return ()
    kernels = kernels_per_layer(model, precision, system.tp)
    return (
        f"prompt steps host-bound on {engine.name}: a {prompt_tokens:,.0f}-token prompt's step launches "
        f"{kernels:.1f} kernels a layer over {layers:g} layers, {floor_s * 1e3:.1f} ms at {launch_s * 1e6:g} us "
        f"each, where the GPU's work takes {device_s * 1e3:.1f} ms (eager_launch_s; a profile with CUDA graphs "
        f"for prompts would not wait)",
    )
