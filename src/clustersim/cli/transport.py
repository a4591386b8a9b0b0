"""``clustersim transport``: SRD vs RC vs TCP at packet level, and the host data paths.

Commands: ``compare`` (one flow per transport under loss, background load, an ECMP collision),
``sweep`` (compare as loss or load rises), ``incast`` (N senders to one receiver), ``ring`` (a ring
all-reduce step across two nodes): each over ``--seeds`` seeds where the seed draws the answer (the
median, with min-max); ``datapath`` (each host data path's steps for one message, its crossover
size) and ``nccl`` (small-message NCCL collective times beside published nccl-tests times)."""

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    LightGroup,
    console,
    emit_json,
    print_all,
    user_errors,
    write_figure,
)
from clustersim.cli.fabric_options import SeedsOpt
from clustersim.cli.progress import MaxEventsOpt, packet_progress
from clustersim.cli.transport_options import (
    BackgroundOption,
    CollisionOption,
    CongestionOption,
    DcqcnOption,
    FlowControlOption,
    InstanceOption,
    KernelOption,
    LossOption,
    LossyOption,
    MessageOption,
    MessagesOption,
    PathsOption,
    PlotOption,
    RcOutstandingOption,
    RcRecoveryOption,
    RcRetryOption,
    RcTimeoutOption,
    RecoveryOption,
    RtoOption,
    SeedOption,
    parse_bytes,
    parse_fraction,
    parse_seconds,
    rc_label,
    rc_options,
    scenario_on,
)
from clustersim.errors import ClusterSimError
from clustersim.network.transport.seeds import over_seeds, seeds_to_run

if TYPE_CHECKING:
    from clustersim.catalog.schema import Instance
    from clustersim.network.transport.experiments import Scenario

transport_app = typer.Typer(
    help="Packet-level transport simulation (SRD, RC, TCP) and host data paths (TCP/ENA, EFA, GPUDirect RDMA).",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=LightGroup,
)


def _total(scenario: "Scenario", messages: int, max_events: float | None, *, flows: int = 1, runs: int = 1) -> Any:
    """The run's work (``transport.work``), refused above ``--max-events`` (or its default)."""
    from clustersim.network.transport.work import transport_work
    from clustersim.network.work import check_work

    lossless = scenario.rc_flow_control != "none"
    estimate = transport_work(scenario.message_bytes, messages, flows=flows, runs=runs, lossless_rc=lossless)
    check_work(estimate, max_events)
    return estimate


def _instance(name: str, catalog: list[Path] | None) -> "Instance":
    from clustersim.catalog.registry import load_catalog

    return load_catalog(catalog or ()).instance(name)


def _flows(
    instance: str,
    catalog: list[Path] | None,
    *,
    paths: int,
    message: str,
    messages: int,
    seed: int,
    loss: str = "0",
    **options: Any,
) -> tuple["Instance", "Scenario"]:
    """The instance and the scenario of a flow-level command, its options parsed (compare, sweep, incast)."""
    node = _instance(instance, catalog)
    scenario = scenario_on(
        node,
        loss=parse_fraction(loss, "--loss"),
        num_paths=paths,
        message_bytes=parse_bytes(message, "--message"),
        num_messages=messages,
        seed=seed,
        **options,
    )
    return node, scenario


def _finish(
    *,
    as_json: bool,
    payload: Callable[[], Any],
    tables: Callable[[], list[Any]],
    plot: Path | None = None,
    draw: Callable[[Path], None] | None = None,
) -> None:
    """What every command ends with: the figure ``--plot`` asks for (``draw`` writes it), then JSON or tables."""
    if plot is not None and draw is not None:
        with user_errors():
            write_figure(lambda: draw(plot), plot)
    if as_json:
        emit_json(payload())
        return
    print_all(*tables())
    if plot is not None:
        console.print(f"figure written to {plot}")


@transport_app.command("compare")
def compare_command(
    instance: InstanceOption = "p5.48xlarge",
    loss: LossOption = "0",
    paths: PathsOption = 16,
    message: MessageOption = "1M",
    messages: MessagesOption = 200,
    background: BackgroundOption = 0.0,
    collision: CollisionOption = False,
    seed: SeedOption = 1,
    seeds: SeedsOpt = 5,
    srd_rto: RtoOption = "50us",
    flow_control: FlowControlOption = None,
    lossy: LossyOption = False,
    rc_recovery: RcRecoveryOption = "selective",
    dcqcn: DcqcnOption = None,
    rc_timeout: RcTimeoutOption = 20,
    rc_retry: RcRetryOption = 7,
    rc_outstanding: RcOutstandingOption = 1,
    tcp_kernel: KernelOption = True,
    tcp_congestion: CongestionOption = "cubic",
    tcp_recovery: RecoveryOption = "rack",
    max_events: MaxEventsOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
) -> None:
    """SRD vs RC vs TCP for one flow of messages: throughput, p50/p99/p99.9 message time, retransmissions."""
    from clustersim.network.transport.experiments import compare
    from clustersim.present import transport as present

    with user_errors():
        node, scenario = _flows(
            instance,
            catalog,
            loss=loss,
            paths=paths,
            message=message,
            messages=messages,
            seed=seed,
            background=background,
            collision=collision,
            srd_rto_s=parse_seconds(srd_rto, "--srd-rto"),
            rc=rc_options(flow_control, lossy, rc_recovery, dcqcn, rc_timeout, rc_retry, rc_outstanding),
            tcp_kernel=tcp_kernel,
            tcp_congestion=tcp_congestion,
            tcp_recovery=tcp_recovery,
        )
        drawn = present.drawn_by_seed(scenario)
        runs = seeds_to_run(drawn, seed, seeds)
        estimate = _total(scenario, messages, max_events, runs=len(runs))
        with packet_progress(estimate):
            results = over_seeds(compare, scenario, runs)
    title = f"{node.id}: {messages} x {message} messages, loss {scenario.loss:.4g}, {paths} paths; {rc_label(scenario)}"
    _finish(
        as_json=as_json,
        payload=lambda: {
            "instance": node.id,
            "scenario": present.scenario_json(scenario),
            "results": present.results_json(results),
            **present.seeds_json(drawn, runs),
        },
        tables=lambda: [present.results_table(results, title), present.seeds_line(drawn, runs)],
        plot=plot,
        draw=lambda out: present.plot_results([s.result for s in results], out, title),
    )


@transport_app.command("sweep")
def sweep_command(
    over: Annotated[str, typer.Option("--over", help="What rises: loss or background.")] = "loss",
    values: Annotated[
        str, typer.Option("--values", help="Comma-separated values, e.g. 0,0.1%,1% (loss) or 0,0.3,0.6 (load).")
    ] = "0,0.1%,0.5%,1%",
    instance: InstanceOption = "p5.48xlarge",
    paths: PathsOption = 16,
    message: MessageOption = "256K",
    messages: MessagesOption = 50,
    seed: SeedOption = 1,
    seeds: SeedsOpt = 5,
    flow_control: FlowControlOption = None,
    lossy: LossyOption = False,
    rc_recovery: RcRecoveryOption = "selective",
    dcqcn: DcqcnOption = None,
    rc_timeout: RcTimeoutOption = 20,
    rc_retry: RcRetryOption = 7,
    rc_outstanding: RcOutstandingOption = 1,
    max_events: MaxEventsOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
) -> None:
    """Compare the transports as loss or background load rises."""
    from clustersim.network.transport.experiments import at_point, compare
    from clustersim.present import transport as present

    with user_errors():
        if over not in ("loss", "background"):
            raise ClusterSimError(f"--over: {over!r} is not loss or background", field="--over", value=over)
        parts = [v for v in values.split(",") if v.strip()]
        if not parts or len(parts) > 20:
            raise ClusterSimError(f"--values: give 1 to 20 values, got {len(parts)}", field="--values", value=values)
        points = [parse_fraction(v, "--values") for v in parts]
        if over == "background" and max(points) > 0.99:
            raise ClusterSimError("--values: a background load must be <= 0.99", field="--values", value=values)
        node, scenario = _flows(
            instance,
            catalog,
            paths=paths,
            message=message,
            messages=messages,
            seed=seed,
            rc=rc_options(flow_control, lossy, rc_recovery, dcqcn, rc_timeout, rc_retry, rc_outstanding),
        )
        drawn = ["the losses" if over == "loss" else "the background load"] if any(points) else []
        runs = seeds_to_run(drawn, seed, seeds)
        # each point's scenario and seeds: a point of no loss or load draws nothing
        plan = [(v, at_point(scenario, over, v), runs if v else [seed]) for v in points]
        estimate = _total(scenario, messages, max_events, runs=sum(len(r) for _, _, r in plan))
        with packet_progress(estimate):
            rows = [(v, over_seeds(compare, at, draws)) for v, at, draws in plan]
    _finish(
        as_json=as_json,
        payload=lambda: {
            "instance": node.id,
            "over": over,
            "rows": [{over: v, "results": present.results_json(r)} for v, r in rows],
            **present.seeds_json(drawn, runs),
        },
        tables=lambda: [present.sweep_table(over, rows), present.seeds_line(drawn, runs)],
        plot=plot,
        draw=lambda out: present.plot_sweep(over, [(v, [s.result for s in r]) for v, r in rows], out),
    )


@transport_app.command("incast")
def incast_command(
    senders: Annotated[int, typer.Option("--senders", min=1, max=64, help="Hosts sending to one receiver.")] = 8,
    instance: InstanceOption = "p5.48xlarge",
    paths: PathsOption = 16,
    message: MessageOption = "256K",
    messages: MessagesOption = 4,
    loss: LossOption = "0",
    seed: SeedOption = 1,
    seeds: SeedsOpt = 5,
    flow_control: FlowControlOption = None,
    lossy: LossyOption = False,
    rc_recovery: RcRecoveryOption = "selective",
    dcqcn: DcqcnOption = None,
    rc_timeout: RcTimeoutOption = 20,
    rc_retry: RcRetryOption = 7,
    rc_outstanding: RcOutstandingOption = 1,
    max_events: MaxEventsOpt = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
) -> None:
    """N senders on one leaf to one receiver on another: when the last finishes, drops, retransmissions."""
    from clustersim.network.transport.experiments import incast
    from clustersim.present import transport as present

    with user_errors():
        node, scenario = _flows(
            instance,
            catalog,
            loss=loss,
            paths=paths,
            message=message,
            messages=messages,
            seed=seed,
            rc=rc_options(flow_control, lossy, rc_recovery, dcqcn, rc_timeout, rc_retry, rc_outstanding),
        )
        drawn = present.drawn_by_seed(scenario, senders, one_receiver=True)
        runs = seeds_to_run(drawn, seed, seeds)
        estimate = _total(scenario, messages, max_events, flows=senders, runs=len(runs))
        with packet_progress(estimate):
            results = over_seeds(lambda at: incast(at, senders), scenario, runs)
    title = f"incast: {senders} senders x {messages} x {message} to one receiver ({node.id} NICs); {rc_label(scenario)}"
    _finish(
        as_json=as_json,
        payload=lambda: {
            "instance": node.id,
            "senders": senders,
            "results": present.group_json(results),
            **present.seeds_json(drawn, runs),
        },
        tables=lambda: [present.group_table(results, title), present.seeds_line(drawn, runs)],
        plot=plot,
        draw=lambda out: present.plot_group([s.result for s in results], out, title),
    )


@transport_app.command("ring")
def ring_command(
    instance: InstanceOption = "p5.48xlarge",
    loss: LossOption = "0.1%",
    buffer: Annotated[str, typer.Option("--buffer", help="The all-reduce buffer, e.g. 16M.")] = "16M",
    paths: PathsOption = 16,
    seed: SeedOption = 1,
    seeds: SeedsOpt = 5,
    flow_control: FlowControlOption = None,
    lossy: LossyOption = False,
    rc_recovery: RcRecoveryOption = "selective",
    dcqcn: DcqcnOption = None,
    rc_timeout: RcTimeoutOption = 20,
    rc_retry: RcRetryOption = 7,
    rc_outstanding: RcOutstandingOption = 1,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
) -> None:
    """One ring all-reduce step across two nodes: each rank's chunk over the node's NICs, per transport."""
    from functools import partial

    from clustersim.network.transport.experiments import ring_step
    from clustersim.present import transport as present

    with user_errors():
        node = _instance(instance, catalog)
        rc = rc_options(flow_control, lossy, rc_recovery, dcqcn, rc_timeout, rc_retry, rc_outstanding)
        scenario = scenario_on(node, loss=parse_fraction(loss, "--loss"), num_paths=paths, seed=seed, rc=rc)
        num_nics = int(node.network.num_cards.value)
        num_ranks = 2 * int(node.num_accelerators.value)
        size = parse_bytes(buffer, "--buffer")
        drawn = present.drawn_by_seed(scenario, num_nics)
        runs = seeds_to_run(drawn, seed, seeds)
        per_flow = max(1, size // num_ranks * (num_ranks // 2) // num_nics)
        estimate = _total(replace(scenario, message_bytes=per_flow), 1, None, flows=num_nics, runs=len(runs))
        with packet_progress(estimate):
            ring = partial(ring_step, num_nics=num_nics, num_ranks=num_ranks, buffer_bytes=size)
            results = over_seeds(ring, scenario, runs)
    title = (
        f"one ring all-reduce step, 2 x {node.id} ({num_ranks} ranks, {num_nics} NICs each), {buffer}, loss {loss}; "
        f"{rc_label(scenario)}"
    )
    _finish(
        as_json=as_json,
        payload=lambda: {
            "instance": node.id,
            "num_ranks": num_ranks,
            "num_nics": num_nics,
            "results": present.group_json(results),
            **present.seeds_json(drawn, runs),
        },
        tables=lambda: [present.group_table(results, title), present.seeds_line(drawn, runs)],
        plot=plot,
        draw=lambda out: present.plot_group([s.result for s in results], out, title),
    )


@transport_app.command("datapath")
def datapath_command(
    instance: InstanceOption = "p5.48xlarge",
    message: MessageOption = "4K",
    nccl: Annotated[bool, typer.Option("--nccl", help="Add NCCL's own overhead around each send.")] = False,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    plot: PlotOption = None,
) -> None:
    """Each host data path's steps for one message (TCP over ENA, EFA host-staged, EFA GPUDirect RDMA)."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.catalog.schema import Vendor
    from clustersim.network.transport.datapath import instance_paths

    with user_errors():
        node = _instance(instance, catalog)
        chip = load_catalog(catalog or ()).accelerator(node.accelerator)
        device = "GPU" if chip.vendor is Vendor.NVIDIA else chip.family.capitalize()
        if nccl and device != "GPU":
            raise ClusterSimError(
                f"--nccl: NCCL runs on NVIDIA GPUs, and {node.id} has {chip.id} ({chip.family}) accelerators",
                field="--nccl",
            )
        size = parse_bytes(message, "--message")
        paths = instance_paths(node, nccl=nccl, device=device)
    from clustersim.present import transport as present

    _finish(
        as_json=as_json,
        payload=lambda: present.datapath_json(paths, size),
        tables=lambda: present.datapath_tables(paths, size),
        plot=plot,
        draw=lambda out: present.plot_datapath(paths, size, out),
    )


MAX_NCCL_SIZES = 40


@transport_app.command("nccl")
def nccl_command(
    instance: InstanceOption = "p5.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=4096, help="Nodes in the communicator.")] = 2,
    collective: Annotated[
        str, typer.Option("--collective", help="all_reduce or all_gather (nccl-tests' names).")
    ] = "all_reduce",
    sizes: Annotated[
        str, typer.Option("--sizes", help="Comma-separated message sizes, e.g. 8,1K,64K,1M (binary, as nccl-tests).")
    ] = "8,1K,64K,1M",
    algorithm: Annotated[
        str | None, typer.Option("--algorithm", help="Force tree or ring (default: the fastest estimate).")
    ] = None,
    protocol: Annotated[
        str | None, typer.Option("--protocol", help="Force LL, LL128 or Simple (default: the fastest estimate).")
    ] = None,
    path: Annotated[
        str | None,
        typer.Option("--path", help="The network data path: efa-gdr or efa-host (default: the catalog's)."),
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Small-message NCCL collective times over the instance's data path (nccl-tests' time and busbw),
    with the algorithm, protocol and hop breakdown, beside published nccl-tests times where there are any."""
    from clustersim.network.transport.nccl_small import best, instance_fabric, published_case

    with user_errors():
        node = _instance(instance, catalog)
        parts = [v for v in sizes.split(",") if v.strip()]
        if not parts or len(parts) > MAX_NCCL_SIZES:
            raise ClusterSimError(
                f"--sizes: give 1 to {MAX_NCCL_SIZES} sizes, got {len(parts)}", field="--sizes", value=sizes
            )
        message_sizes = [parse_bytes(v, "--sizes") for v in parts]
        if path is not None and path not in ("efa-gdr", "efa-host"):
            raise ClusterSimError(f"--path: {path!r} is not efa-gdr or efa-host", field="--path", value=path)
        fabric = instance_fabric(node, nodes, path=path)
        rows = [
            (est, published_case(node.id, nodes, collective, est.message_bytes))
            for est in (best(fabric, collective, m, algorithm=algorithm, protocol=protocol) for m in message_sizes)
        ]
    from clustersim.present import nccl as present

    ranks = fabric.num_nodes * fabric.gpus_per_node
    title = f"{collective} on {nodes} x {node.id} ({ranks} ranks), {fabric.net_path.kind.value}"
    _finish(
        as_json=as_json,
        payload=lambda: {
            "instance": node.id,
            "nodes": nodes,
            "collective": collective,
            "path": fabric.net_path.kind.value,
            "rows": [present.nccl_row_json(est, case) for est, case in rows],
        },
        tables=lambda: present.nccl_tables(rows, title),
    )
