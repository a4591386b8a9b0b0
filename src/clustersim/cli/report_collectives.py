"""A training run's numbers for its report and for ``train --plot``: what ``train --json`` prints
(``train_json``), and the collectives the run's step makes: per kind (TP, CP, EP, PP, DP), the analytic
model's busbw over a size sweep on the job's group (``collective --json``'s rows, with the interval that
``collective`` prints at --level), the job's own message on that curve, and the bundled nccl-tests cases
measured on the same instance, operation and group shape (ranks and ranks per node)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog
    from clustersim.scenario.training import TrainingRun
    from clustersim.system import System
    from clustersim.training.fabric_step import StepCollective

SWEEP = ("1KiB", "16GiB", 4.0)  # nccl-tests' -b, -e, -f of the curves


@dataclass(frozen=True)
class JobContext:
    """What a training run's step was priced with: the catalog, the system, and the step's collectives as the
    estimator lays them out (``training.fabric_step.step_collectives``)."""

    catalog: Catalog
    system: System
    collectives: list[StepCollective]


def job_context(run: TrainingRun) -> JobContext:
    """The catalog, system, software, efficiency and job of ``run``'s scenario, read as the run read them, and
    its step's collectives."""
    from clustersim.scenario.training import run_system
    from clustersim.training.fabric_step import step_collectives
    from clustersim.training.job import TrainingJob

    catalog, system, software, efficiency = run_system(run)
    spec = run.scenario.job
    job = TrainingJob(
        global_batch=int(spec.global_batch or 0), seq_len=int(spec.seq_len or 0), precision=spec.precision
    )
    found = step_collectives(run.model, system, run.estimate.layout, job, software=software, efficiency=efficiency)
    return JobContext(catalog, system, found)


def job_collectives(run: TrainingRun, level: float) -> list[dict[str, Any]]:
    """One entry per kind of the step's collectives (see the module docstring)."""
    from clustersim.cli.collective import measured_points, sweep_sizes, sweep_spreads
    from clustersim.network.cost import ANALYTIC
    from clustersim.present.collective import collective_json
    from clustersim.units import parse_bytes

    context = job_context(run)
    where, system, found = run.scenario.system, context.system, context.collectives
    sizes = sweep_sizes(parse_bytes(SWEEP[0]), parse_bytes(SWEEP[1]), SWEEP[2])
    accelerator = system.accelerator
    out = []
    for c in found:
        fabric = system.group_fabric(c.group_ranks, c.stride)
        if fabric is None:
            continue
        spread = sweep_spreads(accelerator, fabric, sizes, level)
        at_job = ANALYTIC.table(c.op, [c.size_bytes], fabric)
        measured, sources = measured_points(where.instance, c.op.value, fabric)
        out.append(
            {
                "kind": c.kind,
                "op": c.op.value,
                "ranks": fabric.num_ranks,
                "nodes": fabric.num_nodes,
                "per_node": fabric.devices_per_node,
                "groups": c.num_groups,
                "per_step": c.per_step,
                "size_bytes": c.size_bytes,
                "time_us": float(at_job.time_s[0]) * 1e6,
                "step_time_us": c.analytic_time_s * 1e6,  # as the estimate prices it (EP: per-node dispatch)
                "busbw_GBps": float(at_job.busbw_bytes_per_s[0]) / 1e9,
                "sweep": collective_json(ANALYTIC.table(c.op, sizes, fabric), spread),
                "measured": measured,
                "sources": sources,
                "measured_note": f"No bundled nccl-tests case measured {c.op.value} on {fabric.num_ranks} ranks "
                f"({fabric.devices_per_node} per node) of {where.instance}.",
            }
        )
    return out


def train_json(run: TrainingRun, level: float) -> dict[str, Any]:
    """What ``train --scenario FILE [--network sim ...] --json`` prints for ``run``."""
    from clustersim.cli.spreads import memory_spread, training_spread
    from clustersim.present.training import estimate_json

    estimate = run.estimate
    where = run.scenario.system.instance, level, run.scenario.options.catalog
    payload = estimate_json(estimate, training_spread(estimate, *where), memory_spread(estimate, *where))
    network = {"network": run.contention.to_dict()} if run.contention is not None else {}
    said: dict[str, Any] = {"params": run.model.num_params(), "layout_chosen": run.layout_chosen}
    said["torch_compile"] = run.scenario.torch_compile  # none: not a setting of the framework
    found: dict[str, Any] = json.loads(json.dumps({**said, **payload, **network}))
    return found


def plot_training_run(run: TrainingRun, level: float, path: Path, *, comparing: bool) -> None:
    """``train --plot``: the report's step and memory figures of ``run`` (from ``train --json``'s numbers),
    refused with ``--compare`` (it draws one system)."""
    from clustersim.cli.common import write_figure
    from clustersim.present.report_plots import plot_training

    if comparing:
        raise ClusterSimError("--plot draws one system's step and memory; not with --compare", field="--plot")
    train = train_json(run, level)
    write_figure(lambda: plot_training(train, path), path)
    typer.echo(f"figure written to {path}", err=True)
