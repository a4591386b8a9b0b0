"""The same training job on several systems (``clustersim train --compare``): each compared system runs
the job as ``clustersim train --instance X`` would, through ``run_training``, on the same device count
as the first where the instance size allows (else the next whole number of instances, said so), its
layout chosen again or, for a given layout, the same degrees with data parallelism filling the devices;
``clustersim.training.comparison`` then sets the runs side by side with the reason for every ratio.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.compute.precision import formats_on
from clustersim.errors import ClusterSimError
from clustersim.scenario.schema import SystemSpec, TrainingScenario
from clustersim.scenario.training import TrainingRun, run_training
from clustersim.system import system_for_instance
from clustersim.training.comparison import ComparedSystem, TrainingComparison, compare_estimates
from clustersim.training.estimate import Estimate


def compare_training(
    scenario: TrainingScenario, instances: Sequence[str], *, nodes: int | None = None, network: str = "analytic"
) -> TrainingComparison:
    """``scenario`` on its own system and on each of ``instances``: ``nodes`` instances of each, or (None)
    as many as hold the first system's devices."""
    if not instances:
        raise ClusterSimError("compare needs at least one other instance", field="--compare")
    catalog = load_catalog(scenario.options.catalog, use_env=False)
    first_entry = catalog.instance(scenario.system.instance)
    devices = scenario.system.nodes * int(first_entry.num_accelerators.value)
    runs: list[tuple[SystemSpec, TrainingRun, tuple[str, ...]]] = []
    precision = scenario.job.precision
    for name in instances:
        entry = catalog.instance(name)
        chip = catalog.accelerator(entry.accelerator)
        if precision not in chip.dense_flop_per_s:  # the job's format has no tensor cores there
            raise ClusterSimError(
                f"--compare {entry.id}: its {chip.id} has no {precision.value} tensor cores for the job's precision "
                f"(valid there: {', '.join(f.value for f in formats_on(chip))}); compare on one that has them",
                field="--compare",
                value=entry.id,
            )
        spec, adjusted = _spec_for(entry.id, int(entry.num_accelerators.value), devices, nodes)
        run = run_training(scenario, compare=spec, network=network)
        runs.append((spec, run, adjusted))
    first_run = runs[0][1]
    systems = [_compared(catalog, scenario.system, first_run.estimate, ())]
    for spec, run, adjusted in runs:
        assert run.compared is not None
        systems.append(_compared(catalog, spec, run.compared, adjusted))
    return compare_estimates(first_run.model, systems)


def _spec_for(instance: str, chips: int, devices: int, nodes: int | None) -> tuple[SystemSpec, tuple[str, ...]]:
    if nodes is not None:
        return SystemSpec(instance=instance, nodes=nodes), (f"{nodes} x {instance} as given (--compare-nodes)",)
    count = max(1, math.ceil(devices / chips))
    if count * chips == devices:
        return SystemSpec(instance=instance, nodes=count), ()
    note = (
        f"{devices} devices is not a whole number of {chips}-device {instance} instances: {count} "
        f"instance{'s' if count > 1 else ''}, {count * chips} devices"
    )
    return SystemSpec(instance=instance, nodes=count), (note,)


def _compared(catalog: Catalog, spec: SystemSpec, estimate: Estimate, adjusted: tuple[str, ...]) -> ComparedSystem:
    """The system the estimate ran on (its ranks per node as run_training carried them)."""
    per_node = estimate.num_devices // spec.nodes
    chips = int(catalog.instance(spec.instance).num_accelerators.value)
    system = system_for_instance(
        catalog, spec.instance, spec.nodes, devices_per_node=per_node if per_node != chips else None
    )
    return ComparedSystem(spec.instance, spec.nodes, system, estimate, adjusted)
