"""``clustersim fabric``: simulate a collective flow by flow on a catalogued UltraCluster fat-tree
(``simulate``), and set ECMP against spraying and the analytic model against the simulator
(``compare``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import CatalogOption, JsonOption, emit_json, print_all, user_errors
from clustersim.cli.fabric_options import (
    AlgoOpt,
    CollectiveOpt,
    FailLeafOpt,
    FailOpt,
    FailSwitchOpt,
    HostsOpt,
    IdealOpt,
    InstanceOpt,
    JobsOpt,
    NodesOpt,
    OversubOpt,
    PlacementOpt,
    PlotOpt,
    RadixOpt,
    RoutingOpt,
    SeedOpt,
    SeedsOpt,
    SizeOpt,
    StepsOpt,
    calibration_in_force,
    calibration_line,
    flow_progress,
    links_line,
    parse_routing,
    parse_size,
    refuse_ideal_calibration,
    write_plot,
)
from clustersim.cli.fabric_pattern import pattern_command
from clustersim.cli.fabric_step import step_command
from clustersim.cli.progress import MaxEventsOpt
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm

if TYPE_CHECKING:
    from clustersim.network.flowsim.results import CollectiveResult
    from clustersim.network.flowsim.topology import FatTree
    from clustersim.network.work import WorkEstimate

fabric_app = typer.Typer(
    help="Flow-level fabric simulation: rails, fat-tree tiers, ECMP against spraying.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


def _work(
    tree: FatTree,
    hosts: Any,
    op: Any,
    size_bytes: float,
    algorithm: Algorithm,
    max_steps: int,
    max_events: float | None,
    *,
    jobs: int = 1,
    runs: int = 1,
) -> WorkEstimate:
    """The run's work, estimated before it starts, refused above ``--max-events`` (or its default)."""
    from clustersim.network.flowsim.work import collective_work
    from clustersim.network.work import check_work

    first = hosts[0] if isinstance(hosts, list) else hosts
    estimate = collective_work(
        tree, first, op, size_bytes, algorithm=algorithm, max_steps=max_steps, jobs=jobs, runs=runs
    )
    check_work(estimate, max_events)
    return estimate


def _setup(
    catalog: list[Path] | None,
    instance: str,
    nodes: int,
    collective: str,
    size: str,
    oversubscription: float | None,
    placement: str,
    fail_links: int,
    seed: int,
    radix: int,
    fabric_hosts: int | None,
    fail_switches: int = 0,
    num_jobs: int = 1,
    fail_leaves: int = 0,
) -> tuple[Any, FatTree, Any, Any, float]:
    import numpy as np

    from clustersim.catalog.registry import load_catalog
    from clustersim.network.collectives import parse_op
    from clustersim.network.flowsim.cluster import (
        fail_job_links,
        fail_job_switches,
        fat_tree_for_instance,
        parse_placement,
        place_jobs,
    )
    from clustersim.network.flowsim.failover import fail_job_leaves

    cat = load_catalog(catalog or ())
    op = parse_op(collective)
    size_bytes = parse_size(size)
    where = parse_placement(placement)
    if fabric_hosts is not None and nodes * num_jobs > fabric_hosts:
        raise ClusterSimError(
            f"--jobs {num_jobs} of {nodes} nodes need {nodes * num_jobs} hosts; --fabric-hosts is {fabric_hosts}",
            field="--jobs",
            value=num_jobs,
        )
    tree = fat_tree_for_instance(
        cat, instance, nodes * num_jobs, fabric_hosts=fabric_hosts, radix=radix, oversubscription=oversubscription
    )
    jobs = place_jobs(tree, nodes, num_jobs, where, seed)
    everyone = np.concatenate(jobs)
    tree = fail_job_switches(fail_job_links(tree, everyone, fail_links, seed), everyone, fail_switches, seed)
    tree = fail_job_leaves(tree, everyone, fail_leaves, seed)
    return cat, tree, jobs[0] if num_jobs == 1 else jobs, op, size_bytes


@fabric_app.command("simulate")
def simulate_command(
    instance: InstanceOpt = "p5.48xlarge",
    nodes: NodesOpt = 16,
    collective: CollectiveOpt = "all_reduce",
    size: SizeOpt = "1G",
    routing: RoutingOpt = "spray",
    algo: AlgoOpt = None,
    oversubscription: OversubOpt = None,
    placement: PlacementOpt = "packed",
    fail_links: FailOpt = 0,
    fail_switches: FailSwitchOpt = 0,
    fail_leaves: FailLeafOpt = 0,
    jobs: JobsOpt = 1,
    seed: SeedOpt = 0,
    radix: RadixOpt = 64,
    fabric_hosts: HostsOpt = None,
    max_steps: StepsOpt = 4,
    max_events: MaxEventsOpt = None,
    ideal: IdealOpt = False,
    plot: PlotOpt = None,
    calibration: CalibrationOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Simulate one collective flow by flow on the cluster's fat-tree (with --jobs, several copies at once):
    on the calibrated links with NCCL's latencies, or with --ideal on the datasheet links."""
    from clustersim.network.flowsim.results import JobsResult, simulate_collective, simulate_jobs
    from clustersim.network.flowsim.routing import Routing

    with user_errors(), calibration_overlay(calibration):
        refuse_ideal_calibration(ideal, calibration)
        calibrated = calibration_in_force()
        route = Routing(parse_routing(routing))
        cat, tree, hosts, op, size_bytes = _setup(
            catalog, instance, nodes, collective, size, oversubscription, placement, fail_links, seed, radix,
            fabric_hosts, fail_switches, jobs, fail_leaves,
        )  # fmt: skip
        algo = _algorithm(cat, instance, nodes, op, size_bytes, algo)
        estimate = _work(tree, hosts, op, size_bytes, algo, max_steps, max_events, jobs=jobs, runs=1 if ideal else 2)
        shared: JobsResult | None = None
        with flow_progress(estimate) as progress:
            if jobs == 1:
                result = simulate_collective(
                    tree, hosts, op, size_bytes, routing=route, algorithm=algo, seed=seed, max_steps=max_steps,
                    progress=progress, ideal=ideal,
                )  # fmt: skip
            else:
                shared = simulate_jobs(
                    tree, hosts, op, size_bytes, routing=route, algorithm=algo, seed=seed, max_steps=max_steps,
                    progress=progress, ideal=ideal,
                )  # fmt: skip
                result = max(shared.together, key=lambda r: r.time_s)  # the slowest job
    from clustersim.present.fabric import fabric_json, fabric_view, plot_fabric
    from clustersim.present.fabric_step import jobs_view

    if plot is not None:
        with user_errors():
            write_plot(plot_fabric, result, plot)
    from clustersim.present.fabric import draw_json, draw_line, seeded

    drawn = seeded(route.value, placement, fail_links + fail_switches + fail_leaves)
    if as_json:
        out = fabric_json(result, tree, placement=placement, seed=seed, failed_links=fail_links)
        out |= {"failed_switches": fail_switches, "failed_leaves": fail_leaves, "num_jobs": jobs}
        out |= {"calibration": calibrated}
        if shared is not None:
            out |= shared.to_dict()
        emit_json(out | draw_json(drawn, [seed]))
        return
    print_all(*fabric_view(result, tree))
    if shared is not None:
        print_all(jobs_view(shared))
    print_all(links_line(result.links, result.ramp), draw_line(drawn, [seed]))
    if not ideal:
        print_all(calibration_line(calibrated))


@fabric_app.command("compare")
def compare_command(
    instance: InstanceOpt = "p5.48xlarge",
    nodes: NodesOpt = 16,
    collective: CollectiveOpt = "all_reduce",
    size: SizeOpt = "1G",
    algo: AlgoOpt = None,
    oversubscription: OversubOpt = None,
    placement: PlacementOpt = "packed",
    fail_links: FailOpt = 0,
    fail_switches: FailSwitchOpt = 0,
    fail_leaves: FailLeafOpt = 0,
    seed: SeedOpt = 0,
    seeds: SeedsOpt = 1,
    radix: RadixOpt = 64,
    fabric_hosts: HostsOpt = None,
    max_steps: StepsOpt = 4,
    max_events: MaxEventsOpt = None,
    ideal: IdealOpt = False,
    calibration: CalibrationOption = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """ECMP against spraying on the calibrated links, with the analytic model's calibrated time and its link
    bound (ideal links) beside them; with --ideal on the datasheet links, against the link bound alone."""
    import numpy as np

    from clustersim.network.analytic import predict_collective
    from clustersim.network.collectives import Protocol
    from clustersim.network.flowsim.results import progress_share, simulate_collective
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.topology import fabric_for_instance
    from clustersim.present.fabric import seeded

    def setup(draw: int) -> tuple[Any, FatTree, Any, Any, float]:
        return _setup(
            catalog, instance, nodes, collective, size, oversubscription, placement, fail_links, draw, radix,
            fabric_hosts, fail_switches, fail_leaves=fail_leaves,
        )  # fmt: skip

    failures = fail_links + fail_switches + fail_leaves
    seed_list = list(range(seed, seed + seeds))
    with user_errors(), calibration_overlay(calibration):
        refuse_ideal_calibration(ideal, calibration)
        calibrated = calibration_in_force()
        cat, tree, hosts, op, size_bytes = setup(seed)
        algorithm = _algorithm(cat, instance, nodes, op, size_bytes, algo)
        # a routing whose answer no seed draws runs once
        plan = [(route, seed_list if seeded(route.value, placement, failures) else seed_list[:1]) for route in Routing]
        total = sum(len(draws) for _, draws in plan)
        estimate = _work(
            tree, hosts, op, size_bytes, algorithm, max_steps, max_events, runs=total * (1 if ideal else 2)
        )
        runs: list[tuple[str, CollectiveResult | None, float, float]] = []
        spreads: list[tuple[float | None, float | None]] = []
        done = 0
        with flow_progress(estimate) as progress:
            for route, draws in plan:
                results = []
                for draw in draws:
                    _, on, at, _, _ = (cat, tree, hosts, op, size_bytes) if draw == seed else setup(draw)
                    results.append(
                        simulate_collective(
                            on,
                            at,
                            op,
                            size_bytes,
                            routing=route,
                            algorithm=algorithm,
                            seed=draw,
                            max_steps=max_steps,
                            progress=progress_share(progress, done, total),
                            ideal=ideal,
                        )
                    )
                    done += 1
                results.sort(key=lambda r: r.time_s)
                r = results[len(results) // 2]  # the median draw
                runs.append((f"simulated {route.value}", r, r.time_s, r.busbw_bytes_per_s))
                spreads.append((results[0].time_s, results[-1].time_s))
        bound = _ideal_analytic(cat, instance, nodes, op, size_bytes, algorithm)
        runs.append(("analytic, ideal links", None, bound[0], bound[1]))
        if not ideal:  # --ideal compares link bounds only: the calibrated model prices other links than were run
            table = predict_collective(
                op,
                np.array([size_bytes]),
                fabric_for_instance(cat, instance, nodes),
                algorithm=algorithm,
                protocol=Protocol.SIMPLE,
            )
            runs.append(("analytic, calibrated", None, float(table.time_s[0]), float(table.busbw_bytes_per_s[0])))
    from clustersim.present.fabric import compare_rows, compare_view, draw_json, draw_line

    simulated = "ideal" if ideal else "calibrated"
    rows = compare_rows(runs)
    # each row's links: a simulated run's own, the analytic rows' by their name
    labels = [r.links if r else ("ideal" if "ideal" in model else "calibrated") for model, r, _, _ in runs]
    analytic = [(None, None)] * (len(runs) - len(spreads))
    for row, (low, high), label in zip(rows, [*spreads, *analytic], labels, strict=True):
        row |= {"time_min_s": low, "time_max_s": high, "links": label}
    drawn = sorted({what for route in Routing for what in seeded(route.value, placement, failures)})
    if as_json:
        out = {"op": op.value, "nodes": nodes, "size_bytes": size_bytes, "links": simulated, "rows": rows}
        out |= {"calibration": calibrated}
        emit_json(out | draw_json(drawn, seed_list))
        return
    title = f"{op.value} of {size_bytes:,.0f} B on {nodes} x {instance}, simulated on {simulated} links"
    ramps = {r.ramp for _, r, _, _ in runs if r is not None}
    ramp = ramps.pop() if len(ramps) == 1 else None
    print_all(compare_view(rows, title), links_line(simulated, ramp), draw_line(drawn, seed_list, seeds_option=True))
    print_all(calibration_line(calibrated))


def _algorithm(cat: Any, instance: str, nodes: int, op: Any, size_bytes: float, algo: Algorithm | None) -> Algorithm:
    """``--algo`` if given (NVLS ones refused where the NVSwitch cannot reduce), else NCCL's pick."""
    from clustersim.network.flowsim.collectives import default_algorithm
    from clustersim.network.topology import fabric_for_instance

    fabric = fabric_for_instance(cat, instance, nodes)
    if algo is None:
        return default_algorithm(op, fabric, size_bytes)
    if algo in (Algorithm.NVLS, Algorithm.NVLSTREE) and not fabric.in_network_reduction:
        raise ClusterSimError(
            f"--algo {algo.value}: {instance}'s scale-up switch has no in-network reduction (NVLink SHARP); "
            "use ring, tree or hierarchical",
            field="--algo",
            value=algo.value,
        )
    return algo


def _ideal_analytic(
    cat: Any, instance: str, nodes: int, op: Any, size_bytes: float, algorithm: Algorithm
) -> tuple[float, float]:
    """The analytic model's bandwidth term on the datasheet links: efficiencies 1, no latency or ramp."""
    import dataclasses

    import numpy as np

    from clustersim.network.analytic import DEFAULT_CALIBRATION, candidates
    from clustersim.network.collectives import Protocol, busbw_factor
    from clustersim.network.topology import fabric_for_instance

    fabric = fabric_for_instance(cat, instance, nodes)
    ideal = dataclasses.replace(DEFAULT_CALIBRATION, network_efficiency=1.0, nvlink_efficiency=1.0, nvls_efficiency=1.0)
    match = [c for c in candidates(op, fabric, ideal) if c.algorithm is algorithm and c.protocol is Protocol.SIMPLE]
    if not match:
        raise ClusterSimError(f"the analytic model has no {algorithm.value} for {op.value}", field="--algo")
    time_s = float(size_bytes / match[0].algbw_bytes_per_s)
    return time_s, float(np.float64(size_bytes / time_s * busbw_factor(op, fabric.num_ranks)))


# ``fabric step`` and ``fabric pattern`` live in their own modules, with the options of cli.fabric_options.
fabric_app.command("step")(step_command)
fabric_app.command("pattern")(pattern_command)
