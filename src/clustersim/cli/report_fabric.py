"""The fabric view of a training report (``report --scenario FILE --network sim``): the job's step simulated on
the cluster's fat-tree where ``train --network sim`` placed it (its placement, routing, oversubscription and
first seed, and other tenants' traffic where ``--background`` gives it), each kind of collective alone and every
kind at once, with each network tier's utilization and the hottest links: the JSON ``fabric step --json`` prints
for the same job, layout, fabric and background."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.network.flowsim.engine import Flows
    from clustersim.scenario.training import TrainingRun
    from clustersim.training.contention import FabricPlacement


def job_on_fabric(run: TrainingRun, where: FabricPlacement) -> dict[str, Any]:
    """``run``'s step on its fabric (``run`` made with ``network="sim"``; ``where``: the fabric options it was
    made with): ``StepOnFabric.to_dict()`` with the fabric's shape, the placement and the seed."""
    from clustersim.cli.fabric_options import flow_progress
    from clustersim.cli.report_collectives import job_context
    from clustersim.errors import ClusterSimError
    from clustersim.network.flowsim.cluster import fat_tree_for_instance, parse_placement, place
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.flowsim.work import estimate_flows
    from clustersim.network.work import check_work
    from clustersim.present.fabric import fabric_dict
    from clustersim.training.fabric_step import step_on_fabric

    contention = run.contention
    if contention is None:
        raise ClusterSimError("the fabric view needs a run with --network sim", field="--network", value="analytic")
    context = job_context(run)
    system, layout, nodes = context.system, run.estimate.layout, run.scenario.system.nodes
    instance = system.instance.id if system.instance is not None else run.scenario.system.instance
    if not context.collectives:
        return {}
    tree = fat_tree_for_instance(
        context.catalog, instance, nodes, fabric_hosts=where.fabric_hosts, radix=where.radix,
        oversubscription=where.oversubscription, topology=system.topology,
    )  # fmt: skip
    hosts = place(tree, nodes, parse_placement(contention.placement), contention.seed)

    def bounded(flows: Flows) -> None:
        what = f"one training step on {nodes:,} nodes, {flows.num_flows:,} flows (each kind alone, then all)"
        check_work(estimate_flows(flows, what=what, runs=2), where.max_events)

    title = f"{run.model.name} ({layout.describe()}) on {nodes} x {instance}"
    with flow_progress(None) as progress:
        step = step_on_fabric(
            context.collectives, tree, hosts, layout=layout, title=title, routing=Routing(contention.routing),
            seed=contention.seed, before_run=bounded, progress=progress, background=where.background,
        )  # fmt: skip
    found = {**step.to_dict(), "fabric": fabric_dict(tree), "placement": contention.placement}
    loaded = None if contention.loaded is None else contention.loaded.to_dict()  # with the factors without it
    found |= {"seed": contention.seed, "seeds": list(contention.seeds), "factors": dict(contention.factors)}
    return found | {"background": loaded}
