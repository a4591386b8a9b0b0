"""The collectives a training run's step makes, for its report: per kind (TP, CP, EP, PP, DP), the analytic
model's busbw over a size sweep on the job's group (``collective --json``'s rows, with the interval that
``collective`` prints at --level), the job's own message on that curve, and the bundled nccl-tests cases
measured on the same instance, operation and group shape (ranks and ranks per node)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.network.fabric import Fabric
    from clustersim.scenario.training import TrainingRun

SWEEP = ("1KiB", "16GiB", 4.0)  # nccl-tests' -b, -e, -f of the curves


def job_collectives(run: TrainingRun, level: float) -> list[dict[str, Any]]:
    """One entry per kind of the step's collectives (see the module docstring)."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.cli.collective import sweep_sizes
    from clustersim.compute import software as profiles
    from clustersim.compute.efficiency import efficiency_for, efficiency_table
    from clustersim.intervals import spread_for
    from clustersim.network.cost import ANALYTIC
    from clustersim.present.collective import collective_json
    from clustersim.system import system_for_instance
    from clustersim.training.fabric_step import step_collectives
    from clustersim.training.job import TrainingJob
    from clustersim.units import parse_bytes

    scenario, options = run.scenario, run.scenario.options
    catalog = load_catalog(options.catalog, use_env=False)
    where = scenario.system
    system = system_for_instance(catalog, where.instance, where.nodes, devices_per_node=where.devices_per_node)
    software = profiles.software_for(
        scenario.framework,
        system.accelerator.family,
        profiles.software_profiles(options.software, use_env=False),
        accelerator=system.accelerator.id,
    )
    efficiency = efficiency_for(system.accelerator, efficiency_table(options.efficiency, use_env=False))
    spec = scenario.job
    job = TrainingJob(
        global_batch=int(spec.global_batch or 0), seq_len=int(spec.seq_len or 0), precision=spec.precision
    )
    found = step_collectives(run.model, system, run.estimate.layout, job, software=software, efficiency=efficiency)
    sizes = sweep_sizes(parse_bytes(SWEEP[0]), parse_bytes(SWEEP[1]), SWEEP[2])
    accelerator = system.accelerator
    out = []
    for c in found:
        fabric = system.group_fabric(c.group_ranks, c.stride)
        if fabric is None:
            continue
        spread = spread_for(
            "collective", accelerator=accelerator.id, family=accelerator.family,
            framework="nccl-tests" if fabric.torus is None else "nccom-test", devices=fabric.num_ranks, level=level,
        )  # fmt: skip
        at_job = ANALYTIC.table(c.op, [c.size_bytes], fabric)
        measured, sources = _measured(where.instance, c.op.value, fabric)
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


def _measured(instance: str, op: str, fabric: Fabric) -> tuple[list[dict[str, Any]], list[str]]:
    """The bundled collective cases of ``op`` on ``instance`` with the group's ranks and ranks per node."""
    from clustersim.network.collectives import parse_op
    from clustersim.validation.cases import default_paths, read_all, source_key

    points: list[dict[str, Any]] = []
    for case in read_all(default_paths("collectives.jsonl")):
        system = case.system
        busbw = (case.measured or {}).get("busbw_GBps")
        if system is None or system.instance != instance or busbw is None or case.size_bytes is None:
            continue
        per_node = system.devices_per_node or system.devices
        if parse_op(str(case.op)).value != op or system.devices != fabric.num_ranks:
            continue
        if per_node != fabric.devices_per_node or case.algorithm:
            continue
        points.append({"id": case.id, "size_bytes": case.size_bytes, "busbw_GBps": float(busbw),
                       "source": source_key(case.source)})  # fmt: skip
    return points, sorted({str(p["source"]) for p in points})
