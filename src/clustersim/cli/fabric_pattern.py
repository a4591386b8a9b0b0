"""``clustersim fabric pattern``: a point-to-point traffic pattern (permutation, shift, incast,
all-to-all) on the cluster's fat-tree, against the bound of a non-blocking fabric. The fabric
options are ``fabric simulate``'s."""

from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, emit_json, print_all, user_errors
from clustersim.cli.fabric_options import (
    FailLeafOpt,
    FailOpt,
    FailSwitchOpt,
    HostsOpt,
    InstanceOpt,
    NodesOpt,
    OversubOpt,
    PlacementOpt,
    PlotOpt,
    RadixOpt,
    RoutingOpt,
    SeedOpt,
    flow_progress,
    parse_routing,
    parse_size,
    write_plot,
)
from clustersim.cli.progress import MaxEventsOpt


def pattern_command(
    pattern: Annotated[
        str, typer.Option("--pattern", help="permutation (seeded), shift, incast or all_to_all.")
    ] = "permutation",
    instance: InstanceOpt = "p5.48xlarge",
    nodes: NodesOpt = 16,
    size: Annotated[str, typer.Option("--size", help="Bytes per flow, e.g. 64M, 1GiB.")] = "64M",
    senders: Annotated[
        int | None,
        typer.Option("--senders", help="incast only: GPUs sending to the receiver (default: one per other host)."),
    ] = None,
    shift: Annotated[
        int | None,
        typer.Option("--shift", help="shift only: host h sends to host h+K, GPU to GPU (default 1)."),
    ] = None,
    routing: RoutingOpt = "spray",
    oversubscription: OversubOpt = None,
    placement: PlacementOpt = "packed",
    fail_links: FailOpt = 0,
    fail_switches: FailSwitchOpt = 0,
    fail_leaves: FailLeafOpt = 0,
    seed: SeedOpt = 0,
    radix: RadixOpt = 64,
    fabric_hosts: HostsOpt = None,
    max_events: MaxEventsOpt = None,
    plot: PlotOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Simulate a point-to-point pattern on the cluster's fat-tree: flow completion (p50, p99, max)
    against a non-blocking fabric's bound, throughput, and the links that bind it."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.network.flowsim.cluster import (
        fail_job_links,
        fail_job_switches,
        fat_tree_for_instance,
        parse_placement,
        place,
    )
    from clustersim.network.flowsim.failover import fail_job_leaves
    from clustersim.network.flowsim.patterns import parse_pattern, pattern_flows, simulate_pattern
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.flowsim.work import estimate_flows
    from clustersim.network.work import check_work

    with user_errors():
        kind = parse_pattern(pattern)
        route = Routing(parse_routing(routing))
        size_bytes = parse_size(size)
        where = parse_placement(placement)
        cat = load_catalog(catalog or ())
        tree = fat_tree_for_instance(
            cat, instance, nodes, fabric_hosts=fabric_hosts, radix=radix, oversubscription=oversubscription
        )
        hosts = place(tree, nodes, where, seed)
        tree = fail_job_switches(fail_job_links(tree, hosts, fail_links, seed), hosts, fail_switches, seed)
        tree = fail_job_leaves(tree, hosts, fail_leaves, seed)
        plan = pattern_flows(tree, hosts, kind, size_bytes, seed=seed, senders=senders, k=shift)
        estimate = estimate_flows(plan.flows, what=f"{kind.value} on {nodes:,} nodes, {plan.flows.num_flows:,} flows")
        check_work(estimate, max_events)
        with flow_progress(estimate) as progress:
            result = simulate_pattern(tree, hosts, plan, routing=route, seed=seed, progress=progress)
    from clustersim.present.fabric import fabric_dict
    from clustersim.present.fabric_pattern import pattern_view, plot_pattern

    if plot is not None:
        with user_errors():
            write_plot(plot_pattern, result, plot)
    from clustersim.present.fabric import draw_json, draw_line, seeded

    drawn = seeded(route.value, placement, fail_links + fail_switches + fail_leaves)
    drawn += ["the permutation"] if kind.value == "permutation" else []
    if as_json:
        extra = {"placement": placement, "seed": seed, "failed_links": fail_links, "failed_switches": fail_switches}
        extra |= draw_json(drawn, [seed])
        emit_json({**result.to_dict(), "fabric": fabric_dict(tree), **extra, "failed_leaves": fail_leaves})
        return
    print_all(*pattern_view(result, tree), draw_line(drawn, [seed]))
