"""How a simulated collective is shown: a summary table, a comparison, JSON, and a utilization plot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.network.flowsim.results import NETWORK_TIERS, CollectiveResult
from clustersim.network.flowsim.topology import TIER_NAMES, FatTree
from clustersim.present.figures import figure

if TYPE_CHECKING:
    from rich.table import Table

GB = 1e9


def fabric_json(
    result: CollectiveResult, tree: FatTree, *, placement: str, seed: int, failed_links: int
) -> dict[str, Any]:
    """The JSON of ``fabric simulate``: the result with the fabric it ran on."""
    return {
        **result.to_dict(),
        "fabric": fabric_dict(tree),
        "placement": placement,
        "seed": seed,
        "failed_links": failed_links,
    }


def fabric_dict(tree: FatTree) -> dict[str, Any]:
    """The fabric's shape in JSON (with how many links are down)."""
    spec = tree.spec
    return {
        "name": spec.name,
        "hosts": spec.num_hosts,
        "gpus_per_host": spec.gpus_per_host,
        "nics_per_host": spec.nics_per_host,
        "nic_bytes_per_s": spec.nic_bytes_per_s,
        "radix": spec.radix,
        "oversubscription": spec.oversubscription,
        "rail_optimized": spec.rail_optimized,
        "tiers": tree.num_tiers,
        "leaves": tree.num_leaves,
        "pods": tree.num_pods,
        "links": tree.num_links,
        "links_down": int(tree.failed.sum()),
    }


def fabric_view(result: CollectiveResult, tree: FatTree) -> list[Table]:
    """A summary table and the hottest links."""
    from rich.table import Table

    spec = tree.spec
    summary = Table(title=f"{result.op.value} of {result.size_bytes:,.0f} B on {result.num_nodes} nodes of {spec.name}")
    summary.add_column("quantity")
    summary.add_column("value", justify="right")
    rows = [
        ("fabric", f"{spec.num_hosts} hosts, {tree.num_tiers} tiers, radix {spec.radix}, {spec.oversubscription:g}:1"),
        ("algorithm / routing", f"{result.algorithm.value} / {result.routing.value}"),
        ("time", f"{result.time_s * 1e3:.3f} ms"),
        ("busbw (nccl-tests)", f"{result.busbw_bytes_per_s / GB:.1f} GB/s"),
        ("algbw", f"{result.algbw_bytes_per_s / GB:.1f} GB/s"),
        ("max link utilization", f"{result.max_link_utilization:.3f}"),
        ("binding tier", result.binding_tier),
        ("steps simulated", f"{result.steps_simulated} of {result.steps_total}"),
        ("flows / events", f"{result.num_flows:,} / {result.num_events:,}"),
        ("wall time", f"{result.wall_s:.2f} s ({result.events_per_s:,.0f} events/s)"),
    ]
    for name, value in rows:
        summary.add_row(name, value)
    for tier, util in result.tier_utilization.items():
        summary.add_row(f"mean utilization {tier}", f"{util:.3f}")
    hot = Table(title="hottest links (time-averaged utilization)")
    hot.add_column("link")
    hot.add_column("utilization", justify="right")
    for name, util in result.hottest_links:
        hot.add_row(name, f"{util:.3f}")
    return [summary, hot]


def seeded(routing: str | None, placement: str, failures: int) -> list[str]:
    """What of a run the seed draws: ECMP's and flowlets' hash, a random placement, failed links and switches."""
    drawn = [f"the {routing.upper() if routing == 'ecmp' else routing} hash"] if routing in ("ecmp", "flowlet") else []
    drawn += ["the random placement"] if placement == "random" else []
    return drawn + (["the failures"] if failures else [])


def draw_line(drawn: list[str], seeds: list[int], *, seeds_option: bool = False) -> str | None:
    """Says whether a seeded answer is one draw or the spread over several (``None`` when nothing is drawn);
    ``seeds_option``: the command takes --seeds."""
    if not drawn:
        return None
    what = ", ".join(drawn)
    if len(seeds) == 1:
        how = "--seeds N shows the spread" if seeds_option else "run other --seed values for the spread"
        return f"one draw (seed {seeds[0]}) of {what}: another seed gives another answer; {how}"
    return f"times drawn by {what}: the median of seeds {seeds[0]}-{seeds[-1]}, (min-max) beside it"


def draw_json(drawn: list[str], seeds: list[int]) -> dict[str, Any]:
    """``seeds`` run and what they draw; ``one_draw`` when the answer is a single seed's."""
    return {"seeds": seeds, "seeded": drawn, "one_draw": bool(drawn) and len(seeds) == 1}


def compare_rows(results: list[tuple[str, CollectiveResult | None, float, float]]) -> list[dict[str, Any]]:
    """Rows of ``fabric compare``: (model, result or None for analytic, time, busbw)."""
    rows = []
    for model, result, time_s, busbw in results:
        rows.append(
            {
                "model": model,
                "routing": result.routing.value if result else None,
                "algorithm": result.algorithm.value if result else None,
                "time_s": time_s,
                "busbw_bytes_per_s": busbw,
                "max_link_utilization": result.max_link_utilization if result else None,
                "binding_tier": result.binding_tier if result else None,
            }
        )
    return rows


def compare_view(rows: list[dict[str, Any]], title: str) -> Table:
    """ECMP against spraying and analytic against simulated, side by side."""
    from rich.table import Table

    table = Table(title=title)
    for name in ("model", "algorithm", "time ms", "busbw GB/s", "max util", "binding tier"):
        table.add_column(name, justify="left" if name in ("model", "algorithm", "binding tier") else "right")
    for row in rows:
        util = row["max_link_utilization"]
        spread = row.get("time_min_s") is not None and row["time_min_s"] != row["time_max_s"]
        low_high = f" ({row['time_min_s'] * 1e3:.3f}-{row['time_max_s'] * 1e3:.3f})" if spread else ""
        table.add_row(
            row["model"],
            row["algorithm"] or "-",
            f"{row['time_s'] * 1e3:.3f}{low_high}",
            f"{row['busbw_bytes_per_s'] / GB:.1f}",
            "-" if util is None else f"{util:.3f}",
            row["binding_tier"] or "-",
        )
    return table


def plot_fabric(result: CollectiveResult, path: Path) -> None:
    """Link utilization by tier (box plot) and flow completion times (CDF) into ``path``."""
    import numpy as np

    with figure(path, ncols=2, figsize=(11, 4)) as (_, (left, right)):
        tier_boxes(left, result.link_utilization, result.link_tier)
        ends = np.sort(result.flow_end_s)
        right.plot(ends * 1e3, np.arange(1, ends.size + 1) / ends.size)
        right.set_xlabel("flow completion (ms, simulated steps)")
        right.set_ylabel("fraction of flows")
        right.set_title(f"{result.op.value}, {result.routing.value}")


def tier_boxes(axes: Any, utilization: Any, tier: Any) -> None:
    """A box plot of the used links' time-averaged utilization, one box per network tier."""
    data, labels = [], []
    for t in NETWORK_TIERS:
        util = utilization[(tier == t) & (utilization > 0)]
        if util.size:
            data.append(util)
            labels.append(TIER_NAMES[t])
    if data:
        axes.boxplot(data, tick_labels=labels)
    axes.set_ylabel("time-averaged utilization")
    axes.set_title("link utilization by tier")
    axes.tick_params(axis="x", rotation=30)
