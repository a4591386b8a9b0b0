"""What ``clustersim plan`` prints: the Pareto front and the top rows as tables, its JSON, and its figure."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.plan.ties import TIE_SHARE

if TYPE_CHECKING:
    from rich.table import Table

    from clustersim.plan.planner import Plan, PlanRow
    from clustersim.workload.transformer import Transformer

DAY_S = 86400.0

UPPER_END = " (the upper end of its interval)"


def plan_json(plan: "Plan", model: "Transformer") -> dict[str, Any]:
    """The plan's JSON with the model it is for."""
    return {"model": model.name, "params": model.num_params(), **plan.to_json()}


def _millions(usd: float) -> str:
    return f"${usd / 1e6:,.1f}M"


def _days(seconds: float) -> str:
    return f"{seconds / DAY_S:,.1f}"


def margin_text(margin: float | None) -> str:
    """A margin as a signed percentage, to two significant figures below 1%; a tie's as under 0.01%."""
    if margin is None:
        return ""
    if abs(margin) < TIE_SHARE:
        return f"<{100 * TIE_SHARE:g}%"
    return f"{margin:+.1%}" if abs(margin) >= 0.01 else f"{margin * 100:+.2g}%"


def _range(row: "PlanRow", key: str, show: Any) -> str:
    found = row.interval.get(key)
    return "" if found is None else f" ({found.level:.0%}: {show(found.low)}-{show(found.high)})"


def _table(title: str, rows: "tuple[PlanRow, ...]", *, reasons: bool) -> "Table":
    from rich.table import Table

    table = Table(title=title)
    for column in ("#", "instance", "nodes", "job", "layout", "step", "days", "cost", "MWh"):
        table.add_column(column, justify="right" if column in ("#", "nodes", "step", "days", "cost", "MWh") else "left")
    if reasons:
        table.add_column("why it wins (against the next row)")
        table.add_column("margin", justify="right")
    for i, row in enumerate(rows, start=1):
        point = row.point
        cells = [
            str(i),
            point.instance,
            str(point.nodes),
            f"{point.software.name} {point.job.precision.value}, batch {point.job.global_batch}, "
            f"{point.offer.replace('_', ' ')}"
            + (f", checkpoint {point.checkpoint}" if point.resilience is not None else ""),
            row.estimate.layout.describe(),
            f"{row.estimate.step_s:.2f} s",
            _days(row.wall_s) + _range(row, "time_s", _days),
            "" if row.cost_usd is None else f"${row.cost_usd / 1e6:,.1f}M" + _range(row, "cost_usd", _millions),
            "" if row.energy_j is None else f"{row.energy_j / 3.6e9:,.0f}",
        ]
        if reasons:
            cells += [row.why, margin_text(row.margin)]
        table.add_row(*cells)
    return table


def plan_view(plan: "Plan", model: "Transformer") -> list[Any]:
    """The front, the top rows, the search's figures and the notes."""
    first = plan.top[0]
    days = "expected days with failures and checkpoints" if first.goodput_time_s is not None else "days"
    lines: list[Any] = [
        f"[bold]{model.name}[/]: {len(plan.rows)} plans keep the constraints of {plan.priced} priced "
        f"({plan.points} points); objective {plan.objective}{UPPER_END if plan.safe else ''}; {days}, cost at the "
        "offer's price, energy at board power",
        _table("Pareto front: time against cost (fastest first)", plan.pareto, reasons=False),
        _table(f"top {len(plan.top)} by {plan.objective}{UPPER_END if plan.safe else ''}", plan.top, reasons=True),
        f"best: {first.name}; {first.why}"
        + ("" if first.margin is None else f", {margin_text(first.margin)} over the runner-up (the next row)"),
        f"searched {plan.evaluated:,} layouts in {plan.elapsed_s:.2f} s ({plan.layouts_per_s:,.0f} layouts/s)",
    ]
    if first.spread is not None:
        lines.append(
            f"{first.spread.level:.0%} intervals of the best row from left-out residuals of published training runs "
            f"({first.spread.basis})" + (f"; {first.spread.note}" if first.spread.note else "")
        )
    lines += [f"note: {note}" for note in plan.notes]
    return lines


def plot_plan(plan: "Plan", path: Path) -> None:
    """Every plan that keeps the constraints as time against cost, the Pareto front drawn over them."""
    from clustersim.present.figures import figure

    priced = [r for r in plan.rows if r.cost_usd is not None]

    with figure(path, figsize=(7, 4.5)) as (_, ax):
        ax.scatter(
            [r.wall_s / DAY_S for r in priced], [(r.cost_usd or 0) / 1e6 for r in priced], s=12, color="#999999",
            label="plans",
        )  # fmt: skip
        front = plan.pareto
        ax.plot(
            [r.wall_s / DAY_S for r in front], [(r.cost_usd or 0) / 1e6 for r in front], "o-", color="#C44E52",
            label="Pareto front",
        )  # fmt: skip
        for row in front:
            ax.annotate(
                f"{row.point.nodes} x {row.point.instance}", (row.wall_s / DAY_S, (row.cost_usd or 0) / 1e6), fontsize=7
            )
        ax.set_xlabel("time to train (days)")
        ax.set_ylabel("cost (million USD)")
        ax.set_title(f"{len(plan.rows)} plans, objective {plan.objective}")
        ax.legend()
