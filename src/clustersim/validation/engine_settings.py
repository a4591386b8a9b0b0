"""The engine caps a serving case states (``workload.engine_settings``, a disaggregated pool's ``engine_settings``),
applied to its engine profile."""

from __future__ import annotations

from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.serving.engines import DEFAULT_ENGINE, EngineProfile
from clustersim.validation.cases import CaseEngineSettings, CaseSoftware

# CaseSoftware's training settings
TRAINING_ONLY = (
    "compiled",
    "compiled_loss",
    "float8_recipe",
    "fp8_attention",
    "quantized_head",
    "fp8_param_gather",
    "cuda_graphs",
)


def engine_with_settings(engine: EngineProfile, settings: CaseEngineSettings | None) -> EngineProfile:
    """``engine`` with the caps a run states, in place of the profile's, its per-accelerator values and its
    benchmark's sizing (a run that states a cap is not sized by the heuristic)."""
    if settings is None:
        return engine
    update: dict[str, Any] = {k: v for k, v in settings.model_dump().items() if v is not None}
    if update.get("cpp_sampler") and engine.framework != DEFAULT_ENGINE:
        raise ClusterSimError(
            f"engine_settings.cpp_sampler: TensorRT-LLM's sampler_type TRTLLMSampler; engine {engine.name!r} runs "
            f"{engine.framework}, valid only with {DEFAULT_ENGINE}",
            field="engine_settings.cpp_sampler",
            value=True,
        )
    for cap in ("max_batch_sequences", "max_tokens_per_step"):
        if cap in update:
            update[f"{cap}_on"] = {}
            update["benchmark_sizing"] = "fixed"
    return engine.model_copy(update=update)


def engine_with_software(engine: EngineProfile, software: CaseSoftware | None, where: str) -> EngineProfile:
    """``engine`` with the kernels a serving case's ``software`` states (``fused_expert_mlp``: the profile field of
    that name); a training setting there (torch.compile, a float8 recipe, FP8 attention) is refused, not dropped."""
    if software is None:
        return engine
    for name in TRAINING_ONLY:
        if getattr(software, name) is not None:
            raise ClusterSimError(
                f"{where}: software.{name} is a training setting; a serving case states its engine's kernels with "
                "software.fused_expert_mlp or workload.engine_settings",
                field=f"software.{name}",
                value=getattr(software, name),
            )
    if software.fused_expert_mlp is None:
        return engine
    return engine.model_copy(update={"fused_expert_mlp": software.fused_expert_mlp})
