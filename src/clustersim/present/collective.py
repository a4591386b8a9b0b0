"""A collective's predicted sweep in nccl-tests' columns (size, count, type, time, algbw, busbw), as
JSON rows and as a rich table, with NCCL's algorithm/protocol choice and the bounding link."""

from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.table import Table

from clustersim.network.analytic import CollectiveTable

ELEMENT_BYTES = 4  # nccl-tests' default type, float


def rows(table: CollectiveTable) -> list[dict[str, Any]]:
    """One row per size: nccl-tests' columns (time in us, bandwidths in GB/s), algorithm, protocol, bound."""
    return [
        {
            "size_bytes": int(size),
            "count": int(size // ELEMENT_BYTES),
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


def collective_json(table: CollectiveTable) -> dict[str, Any]:
    """The operation, the fabric, its ranks and the rows."""
    return {"op": table.op.value, "fabric": table.fabric.name, "ranks": table.fabric.num_ranks, "rows": rows(table)}


def collective_view(table: CollectiveTable) -> list[RenderableType]:
    """The sweep as nccl-tests prints it, and a footnote when busbw exceeds the raw link bandwidth."""
    fabric = table.fabric
    out = Table(
        title=f"{table.op.value} on {fabric.name} ({fabric.num_ranks} ranks), predicted",
        caption="size in bytes, time in us, algbw and busbw in GB/s (1e9 B/s)",
    )
    for column in ("size", "count", "type", "time", "algbw", "busbw"):
        out.add_column(column, justify="right", no_wrap=True)
    out.add_column("algorithm", no_wrap=True)
    out.add_column("bound", min_width=12, overflow="fold")
    found = rows(table)
    for row in found:
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
    lines: list[RenderableType] = [out]
    if any(r["busbw_exceeds_links"] for r in found):
        lines.append(
            "* busbw above the raw link bandwidth: nccl-tests' formula assumes a ring, while NVLS reduces in "
            "the switch and a 2-node tree halves the traffic (NVIDIA/nccl-tests#366, #22)."
        )
    return lines
