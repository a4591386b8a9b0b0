"""``clustersim collective``: what nccl-tests would print for a catalogued cluster."""

from __future__ import annotations

from typing import Annotated

import numpy as np
import typer
from rich.table import Table

from clustersim.catalog.registry import load_catalog
from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import predict_collective
from clustersim.network.collectives import Algorithm, Protocol, parse_op
from clustersim.network.topology import fabric_for_instance
from clustersim.units import parse_bytes

_ELEMENT_BYTES = 4  # nccl-tests' default type, float


def sweep_sizes(min_bytes: float, max_bytes: float, factor: float) -> np.ndarray:
    """nccl-tests' -b/-e/-f sweep: min, min*factor, ... up to max."""
    if min_bytes <= 0 or max_bytes < min_bytes:
        raise ClusterSimError(f"sizes: need 0 < --min <= --max, got {min_bytes:g} and {max_bytes:g} bytes")
    if factor <= 1:
        raise ClusterSimError(f"--factor must be greater than 1, got {factor}")
    count = int(np.floor(np.log(max_bytes / min_bytes) / np.log(factor) + 1e-9)) + 1
    if count > 10_000:
        raise ClusterSimError(f"the sweep has {count} sizes; use a larger --factor or a narrower range")
    return np.asarray(min_bytes * factor ** np.arange(count), dtype=np.float64)


def collective_command(
    op: Annotated[
        str, typer.Argument(help="all_reduce, all_gather, reduce_scatter, alltoall, broadcast, reduce, sendrecv.")
    ],
    instance: Annotated[
        str, typer.Option("--instance", help="Instance id or alias, e.g. p5.48xlarge.")
    ] = "p5.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", help="Number of instances.")] = 2,
    min_size: Annotated[str, typer.Option("--min", help="Smallest size (nccl-tests -b), e.g. 8, 1M, 64MiB.")] = "8",
    max_size: Annotated[str, typer.Option("--max", help="Largest size (nccl-tests -e), e.g. 8G.")] = "8GiB",
    factor: Annotated[float, typer.Option("--factor", help="Size multiplier between rows (nccl-tests -f).")] = 2.0,
    algo: Annotated[Algorithm | None, typer.Option("--algo", case_sensitive=False, help="Force an algorithm.")] = None,
    proto: Annotated[Protocol | None, typer.Option("--proto", case_sensitive=False, help="Force a protocol.")] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Predict a collective over a size sweep, in nccl-tests' columns (size, count, type, time, algbw, busbw)."""
    with user_errors():
        operation = parse_op(op)
        sizes = sweep_sizes(_size(min_size, "--min"), _size(max_size, "--max"), factor)
        fabric = fabric_for_instance(load_catalog(catalog or ()), instance, nodes)
        table = predict_collective(operation, sizes, fabric, algorithm=algo, protocol=proto)
    rows = [
        {
            "size_bytes": int(size),
            "count": int(size // _ELEMENT_BYTES),
            "type": "float",
            "time_us": float(t * 1e6),
            "algbw_GBps": float(a / 1e9),
            "busbw_GBps": float(b / 1e9),
            "algorithm": al.value,
            "protocol": pr.value,
            "bound": bound,
            "busbw_exceeds_links": exceeds,
        }
        for size, t, a, b, al, pr, bound, exceeds in zip(
            table.size_bytes,
            table.time_s,
            table.algbw_bytes_per_s,
            table.busbw_bytes_per_s,
            table.algorithm,
            table.protocol,
            table.bound,
            table.busbw_exceeds_links,
            strict=True,
        )
    ]
    if as_json:
        emit_json({"op": operation.value, "fabric": fabric.name, "ranks": fabric.num_ranks, "rows": rows})
        return
    out = Table(
        title=f"{operation.value} on {fabric.name} ({fabric.num_ranks} ranks), predicted",
        caption="size in bytes, time in us, algbw and busbw in GB/s (1e9 B/s)",
    )
    for column in ("size", "count", "type", "time", "algbw", "busbw"):
        out.add_column(column, justify="right", no_wrap=True)
    out.add_column("algorithm", no_wrap=True)
    out.add_column("bound", min_width=12, overflow="fold")
    for row in rows:
        mark = " *" if row["busbw_exceeds_links"] else ""
        out.add_row(
            str(row["size_bytes"]),
            str(row["count"]),
            "float",
            f"{row['time_us']:.1f}",
            f"{row['algbw_GBps']:.2f}",
            f"{row['busbw_GBps']:.2f}{mark}",
            f"{row['algorithm']}/{row['protocol']}",
            str(row["bound"]),
        )
    console.print(out)
    if any(r["busbw_exceeds_links"] for r in rows):
        console.print(
            "* busbw above the raw link bandwidth: nccl-tests' formula assumes a ring, while NVLS reduces in "
            "the switch and a 2-node tree halves the traffic (NVIDIA/nccl-tests#366, #22)."
        )


def _size(text: str, option: str) -> float:
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
