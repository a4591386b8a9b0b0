"""A training scenario from a command line's inputs, and the estimate it gives.

``training_scenario`` gathers the inputs (the user's files from the environment included, as
absolute paths) so that a saved scenario replays the same run anywhere; ``run_training`` runs one,
reading no environment variable, and returns the scenario as run: the layout filled in (chosen, or
with ``dp`` filling the devices) and the sequence length resolved.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clustersim.catalog import registry
from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import user_paths
from clustersim.compute import efficiency as efficiencies
from clustersim.compute.efficiency import efficiency_for, efficiency_table
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.plan.search import choose_layout
from clustersim.scenario.schema import (
    LayoutSpec,
    SystemSpec,
    TrainingJobSpec,
    TrainingOptions,
    TrainingScenario,
    looks_like_path,
)
from clustersim.system import System, system_for_instance
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload import zoo
from clustersim.workload.transformer import Transformer


def user_files(env_var: str, given: Sequence[str | Path]) -> tuple[Path, ...]:
    """The files a run reads: those named in ``env_var``, then ``given``, as absolute paths."""
    return tuple(Path(p).expanduser().resolve() for p in user_paths(env_var, given, use_env=True))


def model_spec(model: str) -> str:
    """A zoo id as is; a model file as its absolute path."""
    return str(Path(model).expanduser().resolve()) if looks_like_path(model) else model


def training_scenario(
    *,
    model: str,
    system: SystemSpec,
    layout: LayoutSpec | Literal["choose"],
    job: TrainingJobSpec,
    efficiency: Sequence[Path] = (),
    catalog: Sequence[Path] = (),
    models: Sequence[Path] = (),
) -> TrainingScenario:
    """The scenario of a command line's inputs; the files in ``CLUSTERSIM_EFFICIENCY``,
    ``CLUSTERSIM_CATALOG`` and ``CLUSTERSIM_MODELS`` come first in its options, as a run reads them."""
    options = TrainingOptions(
        efficiency=user_files(efficiencies.ENV_VAR, efficiency),
        catalog=user_files(registry.ENV_VAR, catalog),
        models=user_files(zoo.ENV_VAR, models),
    )
    return TrainingScenario(model=model_spec(model), system=system, layout=layout, job=job, options=options)


@dataclass(frozen=True)
class TrainingRun:
    """A scenario's estimate (and the same job on a second system, when asked)."""

    scenario: TrainingScenario  # as run: the layout and the sequence length filled in; save this to replay
    model: Transformer
    estimate: Estimate
    layout_chosen: bool
    compared: Estimate | None = None


def layout_for(spec: LayoutSpec, system: System) -> Layout:
    """The layout ``spec`` gives on ``system``: ``dp`` fills the devices when omitted, SP follows tp > 1."""
    t, p, c = spec.tp, spec.pp, spec.cp
    dp = spec.dp
    if dp is None:
        if system.num_devices % (t * p * c):
            raise ClusterSimError(
                f"tp*pp*cp = {t}*{p}*{c} = {t * p * c} does not divide the {system.num_devices} devices of "
                f"{system.name}"
            )
        dp = system.num_devices // (t * p * c)
    fields = spec.model_dump()
    fields |= {"dp": dp, "sequence_parallel": t > 1 if spec.sequence_parallel is None else spec.sequence_parallel}
    return Layout(**fields)


def run_training(scenario: TrainingScenario, *, compare: SystemSpec | None = None) -> TrainingRun:
    """The estimate of ``scenario``; with ``compare``, also the same job on that system (its layout
    chosen again, or the same degrees with ``dp`` filling its devices)."""
    options = scenario.options
    transformer = zoo.load_model(scenario.model, extra_dirs=options.models, use_env=False)
    catalog = load_catalog(options.catalog, use_env=False)
    table = efficiency_table(options.efficiency, use_env=False)
    spec = scenario.job
    job = TrainingJob(
        global_batch=spec.global_batch,
        seq_len=spec.seq_len if spec.seq_len is not None else transformer.seq_len,
        precision=spec.precision,
        tokens=spec.tokens,
    )
    chosen = scenario.layout == "choose"

    def run_on(where: SystemSpec, layout: LayoutSpec | Literal["choose"]) -> Estimate:
        system = system_for_instance(catalog, where.instance, where.nodes, devices_per_node=where.devices_per_node)
        fractions = efficiency_for(system.accelerator, table)
        if isinstance(layout, LayoutSpec):
            given = layout_for(layout, system)
        else:
            given = choose_layout(transformer, system, job, efficiency=fractions)
        notes = (f"layout chosen (fastest that fits): {given.describe()}",) if chosen else ()
        return estimate_training(transformer, system, given, job, offer=spec.price, efficiency=fractions, notes=notes)

    estimate = run_on(scenario.system, scenario.layout)
    compared = None
    if compare is not None:
        other = scenario.layout if isinstance(scenario.layout, str) else scenario.layout.model_copy(update={"dp": None})
        compared = run_on(compare, other)
    ran = scenario.model_copy(
        update={
            "layout": LayoutSpec(**estimate.layout.model_dump()),
            "job": spec.model_copy(update={"seq_len": job.seq_len}),
        }
    )
    return TrainingRun(scenario=ran, model=transformer, estimate=estimate, layout_chosen=chosen, compared=compared)
