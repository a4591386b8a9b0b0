"""How a simulated point-to-point pattern is shown: a summary table, the hottest links, a plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from clustersim.present.figures import figure

if TYPE_CHECKING:
    from rich.table import Table

    from clustersim.network.flowsim.patterns import PatternResult
    from clustersim.network.flowsim.topology import FatTree

GB = 1e9


def pattern_view(result: PatternResult, tree: FatTree) -> list[Table]:
    """A summary table (completion against the non-blocking bound) and the hottest links."""
    from rich.table import Table

    spec = tree.spec
    summary = Table(title=f"{result.description}, {result.size_bytes:,.0f} B each, on {result.num_nodes} x {spec.name}")
    summary.add_column("quantity")
    summary.add_column("value", justify="right")
    rows = [
        ("fabric", f"{spec.num_hosts} hosts, {tree.num_tiers} tiers, radix {spec.radix}, {spec.oversubscription:g}:1"),
        ("routing", result.routing.value),
        ("flows", f"{result.num_flows:,}"),
        ("completion p50 / p99", f"{result.p50_s * 1e3:.3f} / {result.p99_s * 1e3:.3f} ms"),
        ("completion max (time)", f"{result.time_s * 1e3:.3f} ms"),
        ("non-blocking bound", f"{result.ideal_s * 1e3:.3f} ms"),
        ("slowdown (max / bound)", f"{result.slowdown:.3f}"),
        ("throughput", f"{result.throughput_bytes_per_s / GB:.1f} GB/s"),
        ("max link utilization", f"{result.links.max_link_utilization:.3f}"),
        ("binding tier", result.links.binding_tier),
        ("events / wall time", f"{result.num_events:,} / {result.wall_s:.2f} s"),
    ]
    for name, value in rows:
        summary.add_row(name, value)
    for tier, util in result.links.tier_utilization.items():
        summary.add_row(f"mean utilization {tier}", f"{util:.3f}")
    hot = Table(title="hottest links (time-averaged utilization)")
    hot.add_column("link")
    hot.add_column("utilization", justify="right")
    for name, util in result.links.hottest_links:
        hot.add_row(name, f"{util:.3f}")
    return [summary, hot]


def plot_pattern(result: PatternResult, path: Path) -> None:
    """Link utilization by tier (box plot) and the flows' completion times (CDF, with the
    non-blocking bound) into ``path``."""
    import numpy as np

    from clustersim.present.fabric import tier_boxes

    with figure(path, ncols=2, figsize=(11, 4)) as (_, (left, right)):
        tier_boxes(left, result.links.utilization, result.links.tier)
        ends = np.sort(result.flow_end_s)
        right.plot(ends * 1e3, np.arange(1, ends.size + 1) / ends.size, label="simulated")
        right.axvline(result.ideal_s * 1e3, color="grey", linestyle="--", label="non-blocking bound")
        right.set_xlabel("flow completion (ms)")
        right.set_ylabel("fraction of flows")
        right.set_title(f"{result.pattern.value}, {result.routing.value}")
        right.legend(fontsize="small")
