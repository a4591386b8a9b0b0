"""A serving scenario from a command line's inputs (the user's files from the environment included,
as absolute paths, so that a saved scenario replays the same run anywhere)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clustersim.catalog import registry
from clustersim.scenario.schema import LoadSpec, RequestSpec, ServingOptions, ServingScenario, ServingSystemSpec
from clustersim.scenario.training import model_spec, user_files
from clustersim.workload import zoo


def serving_scenario(
    *,
    model: str,
    system: ServingSystemSpec,
    request: RequestSpec,
    load: LoadSpec,
    catalog: Sequence[Path] = (),
    models: Sequence[Path] = (),
    engine: str | None = None,
) -> ServingScenario:
    """The scenario of a command line's inputs; the files in ``CLUSTERSIM_CATALOG`` and
    ``CLUSTERSIM_MODELS`` come first in its options, as a run reads them."""
    options = ServingOptions(catalog=user_files(registry.ENV_VAR, catalog), models=user_files(zoo.ENV_VAR, models))
    return ServingScenario(
        model=model_spec(model), system=system, request=request, load=load, engine=engine, options=options
    )
