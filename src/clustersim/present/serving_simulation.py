"""A simulated serving run (``clustersim serve --simulate``) as rich renderables: what ran, the latency
percentiles, throughput and goodput, and the closed form of the same load beside them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from clustersim.units import format_seconds


def _load(payload: dict[str, Any]) -> str:
    if payload["arrivals"] == "poisson":
        return f"Poisson, {payload['rate_per_s']:g} requests/s"
    if payload["arrivals"] == "closed_loop":
        return f"closed loop, {payload['concurrency']} clients"
    return f"trace {payload['trace']}"


def simulation_view(payload: dict[str, Any], notes: Sequence[str]) -> list[RenderableType]:
    """The run's setup line, the latency table and the throughput lines."""
    head = (
        f"[bold]{escape(payload['model'])}[/bold] on {escape(payload['system'])}: tp {payload['tp']} x dp "
        f"{payload['dp']}, {payload['engine']}, {payload['precision']} (KV {payload['kv_precision']}), "
        f"{payload['batching']} batching; {_load(payload)}; {payload['requests']:,} requests"
        + (f" of {payload['dataset']}" if payload["dataset"] else "")
        + (f", seed {payload['seed']}" if len(payload["seeds"]) == 1 else "")
    )
    lengths = (
        f"lengths: prompts {escape(payload['lengths']['input'])} (drawn mean {payload['input_tokens']['mean']:.1f}); "
        f"outputs {escape(payload['lengths']['output'])} (drawn mean {payload['output_tokens']['mean']:.1f})"
    )
    table = Table(title="simulated latency")
    for column in ("", "p50", "p90", "p99", "mean"):
        table.add_column(column, justify="right" if column else "left")
    rows = (
        ("TTFT", "ttft_s"),
        ("ITL (every token gap)", "itl_s"),
        ("TPOT (a request's mean ITL)", "tpot_s"),
        ("end to end", "e2e_s"),
    )
    for label, key in rows:
        values = payload[key]
        table.add_row(label, *(format_seconds(values[k], digits=3) for k in ("p50", "p90", "p99", "mean")))
    rate = payload["throughput"]
    lines: list[RenderableType] = [
        head,
        lengths,
        table,
        f"throughput: {rate['output_tokens_per_s']:,.0f} output tokens/s, {rate['requests_per_s']:.3g} requests/s "
        f"over {format_seconds(payload['duration_s'], digits=3)}; {payload['preemptions']:,.0f} preemptions",
    ]
    if payload["goodput"] is not None:
        bounds = ", ".join(
            f"{k.removesuffix('_s')} <= {format_seconds(v, digits=3)}" for k, v in payload["slo"].items()
        )
        good = payload["goodput"]
        lines.append(f"goodput ({bounds}): {good['requests_per_s']:.3g} requests/s, {good['fraction']:.1%} of requests")
    closed = payload["closed_form"]
    if closed is not None and "error" in closed:
        lines.append(f"closed form ({closed['scenario']}): {escape(closed['error'])}")
    elif closed is not None:
        lines.append(
            f"closed form ({closed['scenario']}, mean lengths {closed['input_tokens']:g} / "
            f"{closed['output_tokens']:g}): "
            f"TTFT {format_seconds(closed['ttft_s'], digits=3)}, TPOT {format_seconds(closed['tpot_s'], digits=3)}, "
            f"{closed['output_tokens_per_s']:,.0f} output tokens/s"
        )
    spread, seeds = payload["spread"], payload["seeds"]
    if spread is not None:
        ranges: list[tuple[str, list[float], Callable[..., str]]] = [
            ("TTFT p99", spread["ttft_s"]["p99"], format_seconds),
            ("TPOT mean", spread["tpot_s"]["mean"], format_seconds),
            ("output tokens/s", spread["throughput"]["output_tokens_per_s"], lambda v, digits: f"{v:,.0f}"),
        ]
        if "goodput" in spread:
            ranges.append(("goodput", spread["goodput"]["fraction"], lambda v, digits: f"{v:.1%}"))
        shown = "; ".join(
            f"{label} {show(low, digits=3)}-{show(high, digits=3)}" for label, (low, high), show in ranges
        )
        lines.append(f"medians over {len(seeds)} seeds ({seeds[0]}-{seeds[-1]}); min-max: {shown}")
    lines.extend(f"note: {escape(note)}" for note in notes)
    lines.append(f"simulated {payload['steps']:,} engine steps in {payload['sim_wall_s']:.2f} s")
    return lines
