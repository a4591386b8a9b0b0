"""A collective's predicted sweep in nccl-tests' columns (size, count, type, time, algbw, busbw), as
JSON rows and as a rich table, with NCCL's algorithm/protocol choice and the bounding link; given a
``Spread`` (``clustersim.intervals``), each row's time and busbw with their interval.

The words follow the fabric's scale-up link (the catalog's link type): a NeuronLink fabric's bound says
NeuronLink, never NVLink, and its table names the algorithm (ring, tree) without NCCL's protocol
names (LL, LL128, Simple), which Neuron's collectives do not have (the JSON keeps the cost model's
``protocol``, as ``--proto`` takes it). Only words change; the numbers are the model's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from clustersim.intervals import Spread
from clustersim.network.analytic import CollectiveTable
from clustersim.present.intervals import interval_line

ELEMENT_BYTES = 4  # nccl-tests' default type, float


NCCL_LINK = "NVLink"  # the scale-up link the cost model's bound words name


def is_nccl_fabric(table: CollectiveTable) -> bool:
    """Whether the fabric's scale-up link is NVLink (NCCL's words apply), not NeuronLink."""
    return table.fabric.scaleup_link == NCCL_LINK


def bound_label(bound: str, table: CollectiveTable) -> str:
    """The model's bound in the words of the fabric's own scale-up link (NeuronLink, not NVLink)."""
    return bound if is_nccl_fabric(table) else bound.replace(NCCL_LINK, table.fabric.scaleup_link)


Spreads = Spread | Sequence[Spread] | None
"""One interval's spread for every size of a sweep, or one per size (a collective's size band can decide it)."""


def per_size(table: CollectiveTable, spread: Spreads) -> list[Spread] | None:
    """``spread`` as one spread per size of ``table`` (None: no intervals)."""
    if spread is None:
        return None
    if isinstance(spread, Spread):
        return [spread] * len(table.size_bytes)
    if len(spread) != len(table.size_bytes):
        raise ValueError(f"{len(spread)} spreads for {len(table.size_bytes)} sizes")
    return list(spread)


def rows(table: CollectiveTable, spread: Spreads = None) -> list[dict[str, Any]]:
    """One row per size: nccl-tests' columns (time in us, bandwidths in GB/s), algorithm, protocol, bound;
    with ``spread`` (one for every size, or one per size), ``intervals`` of the time, algbw and busbw (in their
    units)."""
    found = [
        {
            "size_bytes": int(size),
            "count": int(size // ELEMENT_BYTES),
            "type": "float",
            "time_us": float(t * 1e6),
            "algbw_GBps": float(a / 1e9),
            "busbw_GBps": float(b / 1e9),
            "algorithm": al.value,
            "protocol": pr.value,
            "bound": bound_label(bound, table),
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
    for row, own in zip(found, per_size(table, spread) or (), strict=False):
        row["intervals"] = {
            "time_us": own.duration(row["time_us"]).to_json(),
            "algbw_GBps": own.rate(row["algbw_GBps"]).to_json(),
            "busbw_GBps": own.rate(row["busbw_GBps"]).to_json(),
        }
    return found


def interval_lines(table: CollectiveTable, spread: Spreads) -> list[str]:
    """Where the sweep's intervals come from: one line, or one per distinct spread with the sizes it sizes."""
    spreads = per_size(table, spread)
    if not spreads:
        return []
    neuron = "published collective runs (nccl-tests, nccom-test)"  # a Trainium chip's intervals may be its own runs
    what = "published nccl-tests runs" if is_nccl_fabric(table) else neuron
    distinct = list(dict.fromkeys(spreads))
    if len(distinct) == 1:
        return [interval_line(distinct[0], what)]
    lines = []
    for own in distinct:
        sizes = [int(size) for size, s in zip(table.size_bytes, spreads, strict=True) if s == own]
        span = f"{sizes[0]}" if len(sizes) == 1 else f"{sizes[0]}-{sizes[-1]}"
        lines.append(f"{span} B: " + interval_line(own, what))
    return lines


def collective_json(table: CollectiveTable, spread: Spreads = None) -> dict[str, Any]:
    """The operation, the fabric, its ranks and the rows (with ``spread``, each figure's interval)."""
    return {
        "op": table.op.value,
        "fabric": table.fabric.name,
        "ranks": table.fabric.num_ranks,
        "rows": rows(table, spread),
    }


def collective_view(table: CollectiveTable, spread: Spreads = None) -> list[RenderableType]:
    """The sweep as nccl-tests prints it (with ``spread``, the time and busbw intervals beside them), and a
    footnote when busbw exceeds the raw link bandwidth."""
    fabric = table.fabric
    out = Table(
        title=f"{table.op.value} on {fabric.name} ({fabric.num_ranks} ranks), predicted",
        caption="size in bytes, time in us, algbw and busbw in GB/s (1e9 B/s)",
    )
    spreads = per_size(table, spread)
    level = f"{spreads[0].level:.0%}" if spreads else ""
    columns = ("size", "count", "type", "time", *((f"time {level}",) if spread else ()), "algbw", "busbw")
    for column in (*columns, *((f"busbw {level}",) if spread else ())):
        out.add_column(column, justify="right", no_wrap=True)
    out.add_column("algorithm", no_wrap=True)
    out.add_column("bound", min_width=12, overflow="fold")
    found = rows(table, spread)
    nccl = is_nccl_fabric(table)
    for row in found:
        mark = " *" if row["busbw_exceeds_links"] else ""
        intervals = row.get("intervals", {})
        time_range = (_range(intervals["time_us"], ".1f"),) if spread else ()
        busbw_range = (_range(intervals["busbw_GBps"], ".2f"),) if spread else ()
        out.add_row(
            str(row["size_bytes"]),
            str(row["count"]),
            "float",
            f"{row['time_us']:.1f}",
            *time_range,
            f"{row['algbw_GBps']:.2f}",
            f"{row['busbw_GBps']:.2f}{mark}",
            *busbw_range,
            f"{row['algorithm']}/{row['protocol']}" if nccl else row["algorithm"],
            str(row["bound"]),
        )
    lines: list[RenderableType] = [out]
    lines += interval_lines(table, spread)
    if any(r["busbw_exceeds_links"] for r in found):
        switch = "NVLS reduces in the switch and " if table.fabric.in_network_reduction else ""
        lines.append(
            f"* busbw above the raw link bandwidth: nccl-tests' formula assumes a ring, while {switch}a 2-node "
            "tree halves the traffic (NVIDIA/nccl-tests#366, #22)."
        )
    return lines


def _range(interval: dict[str, Any], spec: str) -> str:
    return f"{interval['low']:{spec}}-{interval['high']:{spec}}"
