"""A simulated serving run (``clustersim serve --simulate``) as rich renderables: what ran, the latency
percentiles, throughput and goodput, and the closed form of the same load beside them."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from clustersim.intervals import Spread
from clustersim.present.serving import instances_name
from clustersim.units import format_seconds


def _load(payload: dict[str, Any]) -> str:
    if payload["arrivals"] == "poisson":
        return f"Poisson, {payload['rate_per_s']:g} requests/s"
    if payload["arrivals"] == "closed_loop":
        return f"closed loop, {payload['concurrency']} clients"
    return f"trace {payload['trace']}"


def _instances(payload: dict[str, Any]) -> str:
    return escape(instances_name(payload["system"], payload.get("nodes", 1)))


def _layout(payload: dict[str, Any]) -> str:
    """``tp 2 x dp 4`` (pipelined: ``x pp 2``), or a disaggregated run's two pools."""
    pools = payload.get("pools")
    if pools:
        return " + ".join(f"{name} {pool['workers']} x tp {pool['tp']}" for name, pool in pools.items())
    pp = f" x pp {payload['pp']}" if payload.get("pp", 1) > 1 else ""
    return f"tp {payload['tp']}{pp} x dp {payload['dp']}"


SIMULATED_INTERVALS = {
    "ttft_s": {"p50": "ttft_p50_s", "p99": "ttft_p99_s", "mean": "ttft_s"},
    "tpot_s": {"p50": "tpot_p50_s", "p99": "tpot_p99_s", "mean": "tpot_s"},
}
"""The simulated figures with an interval: per latency (TTFT, TPOT), each statistic's own residuals' field."""


def simulation_intervals(figures: dict[str, Any], spreads: Mapping[str, Spread | None]) -> dict[str, Any]:
    """Intervals of a simulated run's ``figures`` (``SimulationResult.to_json``'s): its output rate's, and its TTFT's
    and TPOT's median, p99 and mean (``SIMULATED_INTERVALS``), each from that figure's ``spreads``; a figure whose
    kind has no residual has none."""
    out: dict[str, Any] = {}
    rate = spreads.get("output_tokens_per_s")
    if rate is not None:
        out["output_tokens_per_s"] = rate.rate(figures["throughput"]["output_tokens_per_s"]).to_json()
    for figure, stats in SIMULATED_INTERVALS.items():
        found = {
            stat: spread.duration(figures[figure][stat]).to_json()
            for stat, field in stats.items()
            if (spread := spreads.get(field)) is not None
        }
        if found:
            out[figure] = found
    return out


def simulation_view(payload: dict[str, Any], notes: Sequence[str]) -> list[RenderableType]:
    """The run's setup line, the latency table and the throughput lines."""
    head = (
        f"[bold]{escape(payload['model'])}[/bold] on {_instances(payload)}: {_layout(payload)}, "
        f"{payload['engine']}, {payload['precision']} (KV {payload['kv_precision']}), "
        f"{payload['batching']} batching; {_load(payload)}; {payload['requests']:,} requests"
        + (f" of {payload['dataset']}" if payload["dataset"] else "")
        + (f", seed {payload['seed']}" if len(payload["seeds"]) == 1 else "")
    )
    lengths = (
        f"lengths: prompts {escape(payload['lengths']['input'])} (drawn mean {payload['input_tokens']['mean']:.1f}); "
        f"outputs {escape(payload['lengths']['output'])} (drawn mean {payload['output_tokens']['mean']:.1f})"
    )
    lines: list[RenderableType] = [head, lengths]
    prefix = payload.get("prefix_cache") or {}
    if prefix.get("source") == "trace" or prefix.get("cached_share"):
        trace = prefix["source"] == "trace"
        how = "the trace's prompt blocks, least recently used evicted" if trace else "--prefix-hit"
        if trace and payload["dp"] > 1:
            sent = "at random" if payload.get("routing", "random") == "random" else "by --routing cache-aware"
            how += f"; each of the {payload['dp']} replicas has its own cache and gets requests {sent}"
        lines.append(f"prefix cache: {prefix['cached_share']:.1%} of prompt tokens found cached ({how})")
    if payload.get("disaggregation"):
        lines.extend(_pools(payload["disaggregation"]))
    if payload.get("speculation"):
        spec = payload["speculation"]
        lines.append(
            f"speculative decoding: {spec['draft_tokens']} draft tokens a step from {escape(spec['draft'])}, each "
            f"accepted at {spec['acceptance']:g}: {spec['tokens_per_step']:.3g} tokens a target step"
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
    lines += [
        table,
        f"throughput: {rate['output_tokens_per_s']:,.0f} output tokens/s, {rate['requests_per_s']:.3g} requests/s "
        f"over {format_seconds(payload['duration_s'], digits=3)}; {payload['preemptions']:,.0f} preemptions",
        *_interval_lines(payload.get("intervals") or {}),
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


def _interval_lines(intervals: Mapping[str, Any]) -> list[str]:
    """The intervals of a run's figures (``simulation_intervals``), then what each comes from."""
    if not intervals:
        return []
    shown: list[str] = []
    bases: dict[str, Mapping[str, Any]] = {}
    for figure, label in (("ttft_s", "TTFT"), ("tpot_s", "TPOT")):
        stats = intervals.get(figure) or {}
        ranges = [f"{stat} {_range(found, format_seconds)}" for stat, found in stats.items()]
        shown += [f"{label} " + ", ".join(ranges)] if ranges else []
        bases |= {f"{label} {stat}": found for stat, found in stats.items()}
    rate = intervals.get("output_tokens_per_s")
    if rate is not None:
        shown.append("output tokens/s " + _range(rate, lambda v, digits: f"{v:,.0f}"))
        bases["output tokens/s"] = rate
    level = next(iter(bases.values()))["level"]
    lines = [f"{level:.0%} intervals: " + "; ".join(shown)]
    for what, found in bases.items():
        note = f"; {found['note']}" if found["note"] else ""
        lines.append(f"  {what}: left-out residuals of published runs ({found['basis']}){note}")
    return lines


def _range(found: Mapping[str, Any], show: Callable[..., str]) -> str:
    return f"{show(found['low'], digits=3)}-{show(found['high'], digits=3)}"


def sweep_view(payload: dict[str, Any], notes: Sequence[str]) -> list[RenderableType]:
    """A rate sweep: the setup line and a row per rate (achieved throughput, TTFT and ITL, goodput)."""
    head = (
        f"[bold]{escape(payload['model'])}[/bold] on {_instances(payload)}: {_layout(payload)}, "
        f"{payload['engine']}, {payload['precision']} (KV {payload['kv_precision']}); "
        f"{payload['requests']:,} requests per rate" + (f" of {payload['dataset']}" if payload["dataset"] else "")
    )
    table = Table(title="simulated rate sweep (Poisson arrivals)")
    columns = ["rate/s", "achieved req/s", "output tok/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99", "TPOT mean"]
    columns += ["goodput"] if payload["slo"] is not None else []
    for column in columns:
        table.add_column(column, justify="right")
    for row in payload["rates"]:
        cells = [
            f"{row['rate_per_s']:g}",
            f"{row['throughput']['requests_per_s']:.3g}",
            f"{row['throughput']['output_tokens_per_s']:,.0f}",
            *(format_seconds(row[key][p], digits=3) for key, p in SWEEP_LATENCIES),
            format_seconds(row["tpot_s"]["mean"], digits=3),
        ]
        if row["goodput"] is not None:
            cells.append(f"{row['goodput']['fraction']:.1%}")
        table.add_row(*cells)
    lines: list[RenderableType] = [head, table]
    if payload["rates"] and payload["rates"][0].get("disaggregation"):
        lines.extend(_pools(payload["rates"][-1]["disaggregation"])[:1])
    if payload["slo"]:
        bounds = ", ".join(
            f"{k.removesuffix('_s')} <= {format_seconds(v, digits=3)}" for k, v in payload["slo"].items()
        )
        lines.append(f"goodput: the share of requests meeting {bounds}")
    lines.extend(f"note: {escape(note)}" for note in notes)
    lines.append(f"simulated {payload['steps']:,} engine steps in {payload['sim_wall_s']:.2f} s")
    return lines


def _pools(found: dict[str, Any]) -> list[str]:
    """A disaggregated run's pools and its KV transfers."""
    pools = found["pools"]
    shown = " and ".join(f"{name} {pool['workers']} x tp {pool['tp']}" for name, pool in pools.items())
    moved, wire, wait = found["kv_bytes_per_request"], found["kv_transfer_s"], found["kv_link_wait_s"]
    return [
        f"disaggregated: {shown} on {found['instances']} instance(s), KV cache over {escape(found['link'])}",
        f"KV transfer per request: {moved['mean'] / 1e6:,.1f} MB mean; on the wire p50 "
        f"{format_seconds(wire['p50'], digits=3)}, p99 {format_seconds(wire['p99'], digits=3)}; waiting for the "
        f"link p99 {format_seconds(wait['p99'], digits=3)} (all in TTFT)",
    ]


SWEEP_LATENCIES = (("ttft_s", "p50"), ("ttft_s", "p99"), ("itl_s", "p50"), ("itl_s", "p99"))


def _cdf(values: Any, weights: Any = None) -> tuple[Any, Any]:
    """Sorted values and the share of the (weighted) population at or below each."""
    import numpy as np

    order = np.argsort(values, kind="stable")
    counts = np.ones(len(values)) if weights is None else np.asarray(weights, dtype=float)[order]
    return np.asarray(values)[order], np.cumsum(counts) / counts.sum()


def plot_latency_cdf(results: Sequence[Any], payload: dict[str, Any], path: Path) -> None:
    """One run's (its seeds' together) TTFT over requests and ITL over tokens as CDFs, the SLO bounds as
    vertical lines; written to ``path``."""
    import numpy as np

    from clustersim.present.figures import figure

    ttft = np.concatenate([r.ttft_s for r in results])
    gaps = np.concatenate([np.concatenate((r.step_s, r.resume_gaps_s)) for r in results])
    weights = np.concatenate(
        [np.concatenate((r.step_tokens.astype(float), np.ones(r.resume_gaps_s.size))) for r in results]
    )
    keep = weights > 0
    slo = payload.get("slo") or {}
    with figure(path, ncols=2, figsize=(11, 4.2)) as (fig, (left, right)):
        for ax, (values, w), label, bound in (
            (left, (ttft, None), "TTFT (s), per request", slo.get("ttft_s")),
            (right, (gaps[keep], weights[keep]), "inter-token latency (s), per token", slo.get("itl_s")),
        ):
            xs, ys = _cdf(values, w)
            ax.step(xs, ys, where="post", color="tab:blue")
            for q, style in ((0.5, ":"), (0.99, "--")):
                ax.axhline(q, color="grey", linestyle=style, linewidth=0.8)
            if bound is not None:
                ax.axvline(bound, color="tab:red", linestyle="--", label=f"SLO {format_seconds(bound, digits=3)}")
                ax.legend(loc="lower right")
            ax.set_xlabel(label)
            ax.set_ylabel("share at or below")
            ax.set_xscale("log")
            ax.grid(True, which="both", alpha=0.3)
        fig.suptitle(
            f"{payload['model']} on {_instances(payload)} (tp {payload['tp']} x dp {payload['dp']}): {_load(payload)}"
        )


def plot_rate_sweep(payload: dict[str, Any], path: Path) -> None:
    """A sweep's p50 and p99 TTFT and ITL against the achieved output tokens/s, one point per rate, the SLO
    bounds as horizontal lines; written to ``path``."""
    from clustersim.present.figures import figure

    rows = payload["rates"]
    achieved = [row["throughput"]["output_tokens_per_s"] for row in rows]
    slo = payload.get("slo") or {}
    with figure(path, ncols=2, figsize=(11, 4.2)) as (fig, (left, right)):
        for ax, key, label in ((left, "ttft_s", "TTFT"), (right, "itl_s", "inter-token latency")):
            for p, style in (("p50", "o-"), ("p99", "s--")):
                ax.plot(achieved, [row[key][p] for row in rows], style, label=f"{label} {p}")
            for x, row in zip(achieved, rows, strict=True):
                ax.annotate(f"{row['rate_per_s']:g}/s", (x, row[key]["p99"]), fontsize=7, xytext=(3, 3),
                            textcoords="offset points")  # fmt: skip
            if slo.get(key) is not None:
                ax.axhline(slo[key], color="tab:red", linestyle=":", label=f"SLO {format_seconds(slo[key], digits=3)}")
            ax.set_xlabel("achieved output tokens/s")
            ax.set_ylabel(f"{label} (s)")
            ax.set_yscale("log")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
        where = f"{payload['model']} on {_instances(payload)} (tp {payload['tp']} x dp {payload['dp']})"
        fig.suptitle(f"{where}: rate sweep")


def speculative_view(payload: dict[str, Any]) -> list[RenderableType]:
    """The speculative closed form: what ran, the step's parts and TPOT and throughput beside plain decoding."""
    spec = payload["speculation"]
    lines: list[RenderableType] = [
        f"[bold]{escape(payload['model'])}[/bold] on {_instances(payload)}: {_layout(payload)}, "
        f"{payload['engine']}; {payload['scenario']} at {payload['batch']:.4g} sequences a replica",
        f"speculative decoding: {spec['draft_tokens']} draft tokens a step from {escape(spec['draft'])}, each "
        f"accepted at {spec['acceptance']:g}: {spec['tokens_per_step']:.3g} tokens a target step",
        f"step {format_seconds(payload['step_s'], digits=3)} (verify {format_seconds(payload['verify_s'], digits=3)}"
        f", draft {format_seconds(payload['draft_s'], digits=3)}): TPOT {format_seconds(payload['tpot_s'], digits=3)}"
        f", {payload['output_tokens_per_s']:,.0f} output tokens/s",
    ]
    if "without_speculation" in payload:
        plain = payload["without_speculation"]
        lines.append(
            f"without speculation at that batch: TPOT {format_seconds(plain['tpot_s'], digits=3)}, "
            f"{plain['output_tokens_per_s']:,.0f} output tokens/s"
        )
    if "ttft_s" in payload:
        lines.append(f"TTFT {format_seconds(payload['ttft_s'], digits=3)} (one step with the whole prompt)")
    lines.extend(f"note: {escape(note)}" for note in payload["notes"])
    return lines
