"""``clustersim fabric``: simulate a collective flow by flow on a catalogued UltraCluster fat-tree
(``simulate``), and set ECMP against spraying and the analytic model against the simulator
(``compare``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.common import CatalogOption, JsonOption, emit_json, number, print_all, user_errors
from clustersim.cli.progress import MaxEventsOpt
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm
from clustersim.units import MAX_COLLECTIVE_BYTES

if TYPE_CHECKING:
    from clustersim.network.flowsim.results import CollectiveResult
    from clustersim.network.flowsim.topology import FatTree
    from clustersim.network.work import WorkEstimate

fabric_app = typer.Typer(
    help="Flow-level fabric simulation: rails, fat-tree tiers, ECMP against spraying.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

InstanceOpt = Annotated[str, typer.Option("--instance", help="Instance id or alias, e.g. p5.48xlarge.")]
NodesOpt = Annotated[int, typer.Option("--nodes", min=1, max=50_000, help="Instances in the job.")]
CollectiveOpt = Annotated[
    str, typer.Option("--collective", help="all_reduce, all_gather, reduce_scatter, alltoall, sendrecv.")
]
SizeOpt = Annotated[str, typer.Option("--size", help="Bytes per rank (nccl-tests' size), e.g. 1G, 64MiB.")]
AlgoOpt = Annotated[
    Algorithm | None,
    typer.Option(
        "--algo",
        case_sensitive=False,
        help="ring, tree, hierarchical, nvls (one node), nvlstree (2+ nodes), pairwise, direct; "
        "default: what NCCL's tuner picks for the size.",
    ),
]
OversubOpt = Annotated[
    float | None,
    typer.Option(
        "--oversubscription",
        callback=number(ge=1, le=32),
        help="Leaf-to-spine oversubscription (2 = 2:1); default: the cluster template's (1).",
    ),
]
RoutingOpt = Annotated[str, typer.Option("--routing", help="ecmp (a hash per flow), spray (SRD), flowlet or adaptive.")]
PlacementOpt = Annotated[str, typer.Option("--placement", help="packed, spread or random (seeded).")]
FailOpt = Annotated[int, typer.Option("--fail-links", min=0, help="Leaf-spine cables of the job's leaves to fail.")]
FailSwitchOpt = Annotated[
    int,
    typer.Option("--fail-switches", min=0, help="Spine switches of the job's pods to fail (seeded; all their links)."),
]
FailLeafOpt = Annotated[
    int,
    typer.Option(
        "--fail-leaves",
        min=0,
        help="Leaf switches of the job to fail (seeded): their hosts lose those NICs; NCCL's PXN sends through a "
        "peer GPU's NIC.",
    ),
]
JobsOpt = Annotated[
    int,
    typer.Option(
        "--jobs", min=1, max=1024, help="Copies of the job side by side (placed by --placement); each one's slowdown."
    ),
]
SeedOpt = Annotated[int, typer.Option("--seed", min=0, help="Seed of ECMP's hash, placement and failures.")]
RadixOpt = Annotated[int, typer.Option("--radix", min=4, max=1024, help="Switch ports (assumed; default 64).")]
HostsOpt = Annotated[
    int | None,
    typer.Option("--fabric-hosts", min=1, max=50_000, help="Hosts of the whole fabric; default: the cluster's."),
]
StepsOpt = Annotated[
    int,
    typer.Option(
        "--max-steps", min=1, max=64, help="Ring steps or all-to-all rounds simulated; the rest extrapolated."
    ),
]
PlotOpt = Annotated[Path | None, typer.Option("--plot", help="Write link utilization and flow completion (PNG).")]


def _size(text: str) -> float:
    from clustersim.cli.collective import _bytes_suffix
    from clustersim.units import parse_bytes

    size = parse_bytes(_bytes_suffix(text))
    if not 1 <= size <= MAX_COLLECTIVE_BYTES:
        raise ClusterSimError(f"--size: {size:g} bytes is out of range (1 byte to 1 TiB)", field="--size", value=text)
    return size


@contextmanager
def _progress(estimate: WorkEstimate | None) -> Iterator[Callable[[int, int], None] | None]:
    """A transient progress bar on stderr fed by the simulator's flow counts (``cli.progress``: a run
    estimated over ~2 s, on a terminal), nothing on stdout."""
    from clustersim.cli.progress import progress_bar

    with progress_bar("simulating", "flows", estimate) as update:
        yield update


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
    size_bytes = _size(size)
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
    plot: PlotOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Simulate one collective flow by flow on the cluster's fat-tree (with --jobs, several copies at once)."""
    from clustersim.network.flowsim.results import JobsResult, simulate_collective, simulate_jobs
    from clustersim.network.flowsim.routing import Routing

    with user_errors():
        route = Routing(_routing(routing))
        cat, tree, hosts, op, size_bytes = _setup(
            catalog, instance, nodes, collective, size, oversubscription, placement, fail_links, seed, radix,
            fabric_hosts, fail_switches, jobs, fail_leaves,
        )  # fmt: skip
        algo = _algorithm(cat, instance, nodes, op, size_bytes, algo)
        estimate = _work(tree, hosts, op, size_bytes, algo, max_steps, max_events, jobs=jobs)
        shared: JobsResult | None = None
        with _progress(estimate) as progress:
            if jobs == 1:
                result = simulate_collective(
                    tree, hosts, op, size_bytes, routing=route, algorithm=algo, seed=seed, max_steps=max_steps,
                    progress=progress,
                )  # fmt: skip
            else:
                shared = simulate_jobs(
                    tree, hosts, op, size_bytes, routing=route, algorithm=algo, seed=seed, max_steps=max_steps,
                    progress=progress,
                )  # fmt: skip
                result = max(shared.together, key=lambda r: r.time_s)  # the slowest job
    from clustersim.present.fabric import fabric_json, fabric_view, plot_fabric
    from clustersim.present.fabric_step import jobs_view

    if plot is not None:
        with user_errors():
            _plot(plot_fabric, result, plot)
    if as_json:
        out = fabric_json(result, tree, placement=placement, seed=seed, failed_links=fail_links)
        out |= {"failed_switches": fail_switches, "failed_leaves": fail_leaves, "num_jobs": jobs}
        if shared is not None:
            out |= shared.to_dict()
        emit_json(out)
        return
    print_all(*fabric_view(result, tree))
    if shared is not None:
        print_all(jobs_view(shared))


def _plot(draw: Callable[[Any, Path], None], result: Any, path: Path) -> None:
    """``draw(result, path)``, an unwritable path refused naming --plot."""
    try:
        draw(result, path)
    except OSError as exc:
        raise ClusterSimError(f"--plot: cannot write {path}: {exc.strerror}", field="--plot", value=str(path)) from None


def _routing(name: str) -> str:
    from clustersim.errors import UnknownNameError
    from clustersim.network.flowsim.routing import Routing

    key = name.strip().lower()
    if key not in {r.value for r in Routing}:
        raise UnknownNameError("routing", name, [r.value for r in Routing])
    return key


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
    radix: RadixOpt = 64,
    fabric_hosts: HostsOpt = None,
    max_steps: StepsOpt = 4,
    max_events: MaxEventsOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """ECMP against spraying, and the analytic model's link-bound (ideal) time against both."""
    import numpy as np

    from clustersim.network.analytic import predict_collective
    from clustersim.network.collectives import Protocol
    from clustersim.network.flowsim.results import simulate_collective
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.topology import fabric_for_instance

    with user_errors():
        cat, tree, hosts, op, size_bytes = _setup(
            catalog,
            instance,
            nodes,
            collective,
            size,
            oversubscription,
            placement,
            fail_links,
            seed,
            radix,
            fabric_hosts,
            fail_switches,
            fail_leaves=fail_leaves,
        )
        algorithm = _algorithm(cat, instance, nodes, op, size_bytes, algo)
        estimate = _work(tree, hosts, op, size_bytes, algorithm, max_steps, max_events, runs=len(Routing))
        runs: list[tuple[str, CollectiveResult | None, float, float]] = []
        with _progress(estimate) as progress:
            for k, route in enumerate(Routing):
                r = simulate_collective(
                    tree,
                    hosts,
                    op,
                    size_bytes,
                    routing=route,
                    algorithm=algorithm,
                    seed=seed,
                    max_steps=max_steps,
                    progress=_part(progress, k, len(Routing)),
                )
                runs.append((f"simulated {route.value}", r, r.time_s, r.busbw_bytes_per_s))
        ideal = _ideal_analytic(cat, instance, nodes, op, size_bytes, algorithm)
        table = predict_collective(
            op,
            np.array([size_bytes]),
            fabric_for_instance(cat, instance, nodes),
            algorithm=algorithm,
            protocol=Protocol.SIMPLE,
        )
        runs.append(("analytic, ideal links", None, ideal[0], ideal[1]))
        runs.append(("analytic, calibrated", None, float(table.time_s[0]), float(table.busbw_bytes_per_s[0])))
    from clustersim.present.fabric import compare_rows, compare_view

    rows = compare_rows(runs)
    if as_json:
        emit_json({"op": op.value, "nodes": nodes, "size_bytes": size_bytes, "rows": rows})
        return
    print_all(compare_view(rows, f"{op.value} of {size_bytes:,.0f} B on {nodes} x {instance}"))


def _part(progress: Callable[[int, int], None] | None, k: int, parts: int) -> Callable[[int, int], None] | None:
    """``progress`` for the ``k``-th of ``parts`` runs of the same flows."""
    if progress is None:
        return None
    report = progress

    def update(done: int, n: int) -> None:
        report(k * n + done, parts * n)

    return update


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


# ``fabric step`` lives in its own module (it reads train's options); it imports the options above.
from clustersim.cli.fabric_step import step_command  # noqa: E402

fabric_app.command("step")(step_command)
from clustersim.cli.fabric_pattern import pattern_command  # noqa: E402

fabric_app.command("pattern")(pattern_command)
