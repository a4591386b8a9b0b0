"""What ``clustersim plan --dataset`` prints: the cost-latency front and the top deployments as tables, its JSON,
and its figure (cost per million output tokens against latency)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from clustersim.cli.plan_view import margin_text
from clustersim.present.intervals import interval_line

if TYPE_CHECKING:
    from rich.table import Table

    from clustersim.plan.serving_rows import ServingPlan, ServingRow
    from clustersim.workload.transformer import Transformer

UNITS = {"cost": "USD per 1M output tokens", "time": "mean end-to-end latency", "energy": "J per output token"}


def serving_plan_json(plan: ServingPlan, model: Transformer) -> dict[str, Any]:
    """The plan's JSON with the model it is for."""
    return {"model": model.name, "params": model.num_params(), **plan.to_json()}


def _range(row: ServingRow, key: str, show: Any) -> str:
    found = row.interval.get(key)
    return "" if found is None else f" ({found.level:.0%}: {show(found.low)}-{show(found.high)})"


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:,.0f}" if seconds >= 0.1 else f"{seconds * 1e3:,.1f}"


def _usd(value: float) -> str:
    return f"${value:,.2f}" if value >= 0.1 else f"${value:,.3f}"


def _table(title: str, rows: tuple[ServingRow, ...], *, reasons: bool) -> Table:
    from rich.table import Table

    table = Table(title=title)
    heads = ("#", "instance", "nodes", "layout", "tok/s", "TTFT ms", "ITL ms", "p99 TTFT/ITL ms", "goodput", "$/h",
             "$/1M tok", "J/tok")  # fmt: skip
    for column in heads:
        table.add_column(column, justify="left" if column in ("instance", "layout") else "right")
    if reasons:
        table.add_column("why it wins (against the next row)")
        table.add_column("margin", justify="right")
    for i, row in enumerate(rows, start=1):
        e, d, sim = row.estimate, row.deployment, row.simulated
        cost, energy = row.cost_usd_per_mtok, row.energy_j_per_token
        cells = [
            str(i), d.instance, str(d.nodes), f"{d.layout} {d.precision}",
            f"{row.output_tokens_per_s:,.0f}" + _range(row, "output_tokens_per_s", lambda v: f"{v:,.0f}"),
            _ms(e.ttft_s), _ms(e.tpot_s),
            "" if sim is None else f"{_ms(sim.ttft_p99_s)} / {_ms(sim.itl_p99_s)}",
            "" if sim is None or sim.goodput_share is None else f"{sim.goodput_share:.1%}",
            "" if row.price_usd_per_hour is None else f"${row.price_usd_per_hour:,.2f}",
            "" if cost is None else _usd(cost) + _range(row, "cost_usd_per_mtok", _usd),
            "" if energy is None else f"{energy:.3g}",
        ]  # fmt: skip
        if reasons:
            cells += [row.why, margin_text(row.margin)]
        table.add_row(*cells)
    return table


def serving_plan_view(plan: ServingPlan, model: Transformer) -> list[Any]:
    """The front, the top rows, the search's figures and the notes."""
    from clustersim.plan.serving_rows import LATENCY

    first, load = plan.top[0], plan.load
    at = (
        f"{load.rate_per_s:g} requests/s"
        if load.rate_per_s is not None
        else f"{load.concurrency} clients"
        if load.concurrency is not None
        else "the highest rate meeting the SLO"
    )
    bounds = {} if load.slo is None else load.slo.to_json()
    slo = "".join(f"{', SLO ' if i == 0 else ', '}{k.removesuffix('_s')} <= {_ms(v)} ms" for i, (k, v) in
                  enumerate(bounds.items()))  # fmt: skip
    simulated = [i + 1 for i, row in enumerate(plan.top) if row.simulated is not None]
    requests = next((row.simulated.requests for row in plan.top if row.simulated is not None), 0)
    rows = "no rows" if not simulated else f"row {simulated[0]}" if len(simulated) == 1 else (
        f"rows {', '.join(map(str, simulated[:-1]))} and {simulated[-1]}")  # fmt: skip
    lines: list[Any] = [
        f"[bold]{model.name}[/] serving {plan.dataset} (mean {plan.input_tokens:,.1f} in / {plan.output_tokens:,.1f} "
        f"out tokens) at {at}{slo}: {len(plan.rows)} deployments keep it of {plan.evaluated} priced "
        f"({plan.points} points); objective {plan.objective} ({UNITS[plan.objective]})",
        _table("Pareto front: cost per token against latency (lowest latency first)", plan.pareto, reasons=False),
        _table(f"top {len(plan.top)} by {plan.objective}", plan.top, reasons=True),
        f"best: {first.deployment.name}; {first.why}"
        + ("" if first.margin is None else f", {margin_text(first.margin)} over the runner-up (the next row)"),
        f"TTFT and ITL: the closed forms' means (the SLO applies to them); latency: {LATENCY}; p99 and goodput: the "
        f"request-level simulator on {rows} of the top table"
        + ("" if not simulated else f" ({requests:,} requests each)"),
        f"priced {plan.evaluated:,} deployments in {plan.priced_s:.2f} s ({plan.priced_per_s:,.0f} deployments/s); "
        f"{plan.elapsed_s:.2f} s in all with the intervals and simulations",
    ]
    if first.spread is not None:
        lines.append(interval_line(first.spread, "published serving runs"))
    if first.latency_spread is not None:
        lines.append("latency: " + interval_line(first.latency_spread, "published TPOT"))
    p99 = [(i, row) for i, row in enumerate(plan.top, 1) if row.simulated is not None and row.simulated_spread]
    if p99:
        ranges = ", ".join(
            f"row {i} {_ms(found.low)}-{_ms(found.high)} ms"
            for i, row in p99
            if (found := row.interval.get("simulated_ttft_p99_s")) is not None
        )
        spread = p99[0][1].simulated_spread
        assert spread is not None
        lines.append(f"p99 TTFT {ranges}: " + interval_line(spread, "published p99 TTFT"))
    lines += [f"note: {note}" for note in plan.notes]
    return lines


def plot_serving_plan(plan: ServingPlan, path: Path) -> None:
    """Every deployment that keeps the SLO as cost per million tokens against latency, the front drawn over them."""
    from clustersim.present.figures import figure

    priced = [r for r in plan.rows if r.cost_usd_per_mtok is not None]
    with figure(path, figsize=(7, 4.5)) as (_, ax):
        ax.scatter([r.latency_s for r in priced], [r.cost_usd_per_mtok or 0.0 for r in priced], s=12,
                   color="#999999", label="deployments")  # fmt: skip
        front = plan.pareto
        ax.plot([r.latency_s for r in front], [r.cost_usd_per_mtok or 0.0 for r in front], "o-", color="#C44E52",
                label="Pareto front")  # fmt: skip
        for row in front:
            ax.annotate(f"{row.deployment.nodes} x {row.deployment.instance} {row.deployment.layout}",
                        (row.latency_s, row.cost_usd_per_mtok or 0.0), fontsize=7)  # fmt: skip
        ax.set_xlabel("mean end-to-end latency (s)")
        ax.set_ylabel("USD per million output tokens")
        ax.set_title(f"{len(plan.rows)} deployments, objective {plan.objective}")
        ax.legend()
