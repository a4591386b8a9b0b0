"""The engine caps a serving case states (``workload.engine_settings``, a disaggregated pool's ``engine_settings``),
applied to its engine profile."""

from __future__ import annotations

from typing import Any

from clustersim.serving.engines import EngineProfile
from clustersim.validation.cases import CaseEngineSettings


def engine_with_settings(engine: EngineProfile, settings: CaseEngineSettings | None) -> EngineProfile:
    """``engine`` with the caps a run states, in place of the profile's, its per-accelerator values and its
    benchmark's sizing (a run that states a cap is not sized by the heuristic)."""
    if settings is None:
        return engine
    update: dict[str, Any] = {k: v for k, v in settings.model_dump().items() if v is not None}
    for cap in ("max_batch_sequences", "max_tokens_per_step"):
        if cap in update:
            update[f"{cap}_on"] = {}
            update["benchmark_sizing"] = "fixed"
    return engine.model_copy(update=update)
