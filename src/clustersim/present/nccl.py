"""Tables and JSON for ``clustersim transport nccl``: small-message NCCL collective estimates."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.table import Table

from clustersim.network.transport.nccl_small import Estimate, PublishedCase
from clustersim.units import format_bytes


def nccl_row_json(est: Estimate, case: PublishedCase | None) -> dict[str, Any]:
    """One size's estimate (SI units), and the published time and error where there is one."""
    return {
        "message_bytes": est.message_bytes,
        "algorithm": est.algorithm,
        "protocol": est.protocol,
        "num_channels": est.num_channels,
        "chunk_bytes": est.chunk_bytes,
        "time_s": est.time_s,
        "algbw_bytes_per_s": est.algbw_bytes_per_s,
        "busbw_bytes_per_s": est.busbw_bytes_per_s,
        "launch_s": est.launch_s,
        "hops": [{"name": h.name, "count": h.count, "each_s": h.each_s, "total_s": h.total_s} for h in est.hops],
        "measured_time_s": None if case is None else case.time_s,
        "error": None if case is None else est.time_s / case.time_s - 1,
        "measured_source": None if case is None else case.source,
    }


def nccl_tables(rows: Sequence[tuple[Estimate, PublishedCase | None]], title: str) -> list[Table]:
    """The predicted times beside the published ones, then where each size's time goes."""
    summary = Table(title=title, caption="time as nccl-tests reports it; busbw in GB/s; measured: published nccl-tests")
    for column in ("size", "algorithm", "channels", "time (us)", "busbw", "measured (us)", "error"):
        summary.add_column(column, justify="left" if column == "algorithm" else "right", no_wrap=True)
    steps = Table(title="where the time goes (us): count x each", caption=None)
    for column in ("size", "launch", *(h.name for h in rows[0][0].hops)) if rows else ():
        steps.add_column(column, justify="right", no_wrap=True)
    for est, case in rows:
        size = format_bytes(est.message_bytes)
        summary.add_row(
            size,
            f"{est.algorithm}/{est.protocol}",
            str(est.num_channels),
            f"{est.time_s * 1e6:,.1f}",
            f"{est.busbw_bytes_per_s / 1e9:,.3f}",
            "-" if case is None else f"{case.time_s * 1e6:,.1f}",
            "-" if case is None else f"{(est.time_s / case.time_s - 1) * 100:+.1f}%",
        )
        steps.add_row(size, f"{est.launch_s * 1e6:,.2f}", *(f"{h.count} x {h.each_s * 1e6:,.2f}" for h in est.hops))
    return [summary, steps]
