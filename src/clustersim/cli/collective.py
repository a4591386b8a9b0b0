"""``clustersim collective``: what nccl-tests would print for a catalogued cluster."""

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    emit_json,
    number,
    plot_path,
    print_all,
    user_errors,
    write_figure,
)
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.units import MAX_COLLECTIVE_BYTES, MAX_NODES

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy as np

    from clustersim.catalog.schema import Accelerator
    from clustersim.network.fabric import Fabric
    from clustersim.present.collective import Spreads

MAX_SIZES = 1_000  # rows of one sweep
MAX_FACTOR = 1024.0


def sweep_sizes(min_bytes: float, max_bytes: float, factor: float) -> "np.ndarray":
    """nccl-tests' -b/-e/-f sweep: min, min*factor, ... up to max (whole bytes, at most 1 TiB)."""
    import numpy as np

    for flag, size in (("--min", min_bytes), ("--max", max_bytes)):
        if not (math.isfinite(size) and 1 <= size <= MAX_COLLECTIVE_BYTES):
            raise ClusterSimError(
                f"{flag}: {size:g} bytes is out of range (valid: 1 byte to 1 TiB; a collective's buffer sits in "
                f"device memory)",
                field=flag,
                value=size,
            )
    if max_bytes < min_bytes:
        raise ClusterSimError(f"sizes: need --min <= --max, got {min_bytes:g} and {max_bytes:g} bytes", field="--min")
    if not (math.isfinite(factor) and 1 < factor <= MAX_FACTOR):
        raise ClusterSimError(f"--factor must be a finite number > 1 and <= {MAX_FACTOR:g}, got {factor!r}")
    count = math.floor(math.log(max_bytes / min_bytes) / math.log(factor) + 1e-9) + 1
    if count > MAX_SIZES:
        raise ClusterSimError(
            f"the sweep has {count:,} sizes (at most {MAX_SIZES:,}); use a larger --factor or a narrower range",
            field="--factor",
            value=factor,
        )
    return np.asarray(min_bytes * factor ** np.arange(count), dtype=np.float64)


def collective_command(
    op: Annotated[
        str, typer.Argument(help="all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv.")
    ],
    instance: Annotated[
        str, typer.Option("--instance", help="Instance id or alias, e.g. p5.48xlarge.")
    ] = "p5.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=MAX_NODES, help="Number of instances.")] = 2,
    min_size: Annotated[str, typer.Option("--min", help="Smallest size (nccl-tests -b), e.g. 8, 1M, 64MiB.")] = "8",
    max_size: Annotated[str, typer.Option("--max", help="Largest size (nccl-tests -e), e.g. 8G.")] = "8GiB",
    factor: Annotated[
        float,
        typer.Option(
            "--factor", callback=number(gt=1, le=MAX_FACTOR), help="Size multiplier between rows (nccl-tests -f)."
        ),
    ] = 2.0,
    algo: Annotated[Algorithm | None, typer.Option("--algo", case_sensitive=False, help="Force an algorithm.")] = None,
    proto: Annotated[Protocol | None, typer.Option("--proto", case_sensitive=False, help="Force a protocol.")] = None,
    level: LevelOption = DEFAULT_LEVEL,
    catalog: CatalogOption = None,
    calibration: CalibrationOption = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            callback=plot_path,
            help="Draw busbw against size: the interval as a band, the bundled nccl-tests cases of this instance, "
            "operation and ranks as points.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Predict a collective over a size sweep, in nccl-tests' columns (size, count, type, time, algbw, busbw),
    each time and busbw with its interval (--level) from left-out residuals of published nccl-tests runs."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.network.collectives import parse_op
    from clustersim.network.cost import ANALYTIC
    from clustersim.network.topology import fabric_for_instance

    with user_errors(), calibration_overlay(calibration):
        operation = parse_op(op)
        sizes = sweep_sizes(_size(min_size, "--min"), _size(max_size, "--max"), factor)
        loaded = load_catalog(catalog or ())
        fabric = fabric_for_instance(loaded, instance, nodes)
        table = ANALYTIC.table(operation, sizes, fabric, algorithm=algo, protocol=proto)
        accelerator = loaded.accelerator(loaded.instance(instance).accelerator)
        spread = sweep_spreads(accelerator, fabric, table.size_bytes, level)
        from clustersim.present.collective import collective_json, collective_view

        if plot is not None:
            forced = "/".join(str(choice.value) for choice in (algo, proto) if choice is not None)
            rows = collective_json(table, spread)["rows"]
            _plot(rows, loaded.instance(instance).id, operation, fabric, plot, forced)

    if as_json:
        emit_json(collective_json(table, spread))
        return
    print_all(*collective_view(table, spread))


def _plot(rows: list[dict[str, Any]], instance: str, op: Op, fabric: "Fabric", path: Path, forced: str) -> None:
    """``--plot``: busbw against size (the report's figure) with the measured cases of the same shape (which ran
    NCCL's own algorithm and protocol: said in the title when ``forced`` names others)."""
    from clustersim.present.report_plots import plot_busbw

    measured, _ = measured_points(instance, op.value, fabric)
    shape = f"{fabric.num_ranks} ranks ({fabric.num_nodes} x {fabric.devices_per_node}) of {instance}"
    title = f"{op.value} on {shape}"
    if forced:
        title += f"\n{forced} forced; the measured cases ran NCCL's own choice"
    write_figure(lambda: plot_busbw(title, rows, measured, path), path)
    typer.echo(f"figure written to {path}", err=True)


def _size(text: str, option: str) -> float:
    from clustersim.units import parse_bytes

    try:
        return parse_bytes(_bytes_suffix(text))
    except ClusterSimError as exc:
        raise ClusterSimError(f"{option}: {exc}") from None


def _bytes_suffix(text: str) -> str:
    """nccl-tests reads -b 8M as 8 MiB: a bare K/M/G suffix is binary."""
    stripped = text.strip()
    if stripped and stripped[-1] in "KkMmGgTt":
        return stripped[:-1] + stripped[-1].upper() + "iB"
    return stripped


def measured_points(instance: str, op: str, fabric: "Fabric") -> tuple[list[dict[str, Any]], list[str]]:
    """The bundled collective cases of ``op`` on ``instance`` with the group's ranks and ranks per node (run
    with NCCL's own algorithm choice): their points, and their sources."""
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


def sweep_spreads(accelerator: "Accelerator", fabric: "Fabric", sizes: "Iterable[float]", level: float) -> "Spreads":
    """Each size's interval spread for a collective on ``fabric`` (its size band decides which of the chip's own runs
    widen it; ``clustersim.intervals.lookup.size_band``); None where there are no residuals."""
    from clustersim.intervals import spread_for

    spreads = [
        spread_for(
            "collective",
            accelerator=accelerator.id,
            family=accelerator.family,
            framework="nccl-tests" if fabric.torus is None else "nccom-test",  # Neuron's benchmark on NeuronLink
            devices=fabric.num_ranks,
            level=level,
            size_bytes=float(size),
        )
        for size in sizes
    ]
    return None if any(s is None for s in spreads) else [s for s in spreads if s is not None]
