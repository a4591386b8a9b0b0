"""A training ``Estimate`` as rich renderables: the step's terms with bars, memory per device, the MFU
line, the job's totals, a side-by-side comparison and the operations table.

Each function returns tables or lines (markup strings) for a console to print; nothing is printed here.
Given a ``Spread`` (``clustersim.intervals``: left-out residuals of published step times), the step,
tokens/s, MFU and the job's days, device-hours, cost and energy carry their interval; the job's totals
scale with the step, so they take its relative range.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from clustersim.intervals import Interval, Spread
from clustersim.present.intervals import interval_line, seconds_in_unit_of, with_range
from clustersim.training.estimate import Estimate
from clustersim.training.job import JobTotals
from clustersim.units import format_bytes, format_count, format_seconds

BAR_WIDTH = 30


def headline(estimate: Estimate, params: int) -> str:
    """The model, system, layout and batch in one line."""
    layout, job = estimate.layout, estimate.job
    return (
        f"[bold]{estimate.model}[/] ({format_count(params)} parameters) on {estimate.system}: "
        f"{layout.describe()}, global batch {job.global_batch} sequences = {format_count(job.tokens_per_step)} "
        f"tokens of {job.seq_len}, {job.precision.value}"
    )


def training_intervals(estimate: Estimate, spread: Spread) -> dict[str, Interval]:
    """The interval of each headline figure: the step and the job's totals (durations), tokens/s and MFU
    (rates)."""
    found = {
        "step_s": spread.duration(estimate.step_s),
        "tokens_per_s_per_device": spread.rate(estimate.tokens_per_s_per_device),
        "mfu": spread.rate(estimate.mfu),
    }
    totals = estimate.totals
    if totals is not None:
        for key in JOB_FIGURES:
            value = getattr(totals, key)
            if value is not None:
                found[key] = spread.duration(value)
    return found


JOB_FIGURES = ("time_s", "device_hours", "cost_usd", "energy_kwh")


def estimate_json(estimate: Estimate, spread: Spread | None) -> dict[str, Any]:
    """``estimate.to_json()`` with, given ``spread``, ``intervals`` beside the figures they belong to:
    ``{figure: {low, high, level, basis, cases, note}}`` at the top (step, tokens/s, MFU) and in ``job``
    (time, device-hours, cost, energy)."""
    data = estimate.to_json()
    if spread is None:
        return data
    found = {key: i.to_json() for key, i in training_intervals(estimate, spread).items()}
    data["intervals"] = {key: value for key, value in found.items() if key not in JOB_FIGURES}
    if data.get("job"):
        data["job"] = data["job"] | {"intervals": {key: value for key, value in found.items() if key in JOB_FIGURES}}
    return data


def step_table(estimate: Estimate, spread: Spread | None = None) -> Table:
    """Every non-zero term: link time, exposed time and its share of the step as a bar."""
    step = spread.duration(estimate.step_s) if spread else None
    shown = with_range(format_seconds(estimate.step_s), step, seconds_in_unit_of(estimate.step_s))
    table = Table(title=f"step {shown}")
    for column in ("term", "link time", "exposed", "share"):
        table.add_column(column, justify="left" if column in ("term", "share") else "right")
    for term in estimate.terms:
        if term.link_s <= 0 and term.exposed_s <= 0:
            continue
        share = term.exposed_s / estimate.step_s
        bar = "█" * round(share * BAR_WIDTH)
        table.add_row(
            term.name, format_seconds(term.link_s), format_seconds(term.exposed_s), f"{bar} {100 * share:.1f}%"
        )
    return table


def memory_table(estimate: Estimate) -> Table:
    """Bytes per device by kind, titled with the device's capacity."""
    table = Table(title=f"memory per device (capacity {format_bytes(estimate.capacity_bytes)})")
    table.add_column("kind")
    table.add_column("bytes", justify="right")
    for kind, value in estimate.memory.to_json().items():
        table.add_row(kind, format_bytes(value))
    return table


def utilization_line(estimate: Estimate, spread: Spread | None = None) -> str:
    """Whether it fits (and the headroom), MFU, HFU, tokens/s per device and the bottleneck."""
    headroom = estimate.capacity_bytes - estimate.memory.required_bytes
    fit = "fits" if estimate.fits else "[bold red]does not fit[/]"
    mfu = with_range(f"MFU {100 * estimate.mfu:.1f}%", spread.rate(estimate.mfu) if spread else None, _percent)
    tokens = spread.rate(estimate.tokens_per_s_per_device) if spread else None
    return (
        f"{fit} (headroom {format_bytes(headroom)}); {mfu}, HFU {100 * estimate.hfu:.1f}%, "
        f"{with_range(f'{estimate.tokens_per_s_per_device:,.0f} tokens/s per device', tokens, _whole)}; "
        f"bottleneck: {estimate.bottleneck}"
    )


def _percent(value: float) -> str:
    return f"{100 * value:.1f}%"


def _whole(value: float) -> str:
    return f"{value:,.0f}"


def totals_line(totals: JobTotals | None, spread: Spread | None = None) -> str | None:
    """The token budget's steps, days, device-hours, cost and energy; ``None`` without a budget."""
    if totals is None:
        return None
    days = with_range(
        f"{totals.time_s / 86400:,.1f} days",
        spread.duration(totals.time_s) if spread else None,
        lambda v: f"{v / 86400:,.1f}",
    )
    line = (
        f"{format_count(totals.tokens)} tokens: {totals.steps:,} steps, {days}, {totals.device_hours:,.0f} device-hours"
    )
    if totals.cost_usd is not None and totals.price_usd_per_hour is not None:
        cost = spread.duration(totals.cost_usd) if spread else None
        line += (
            f", {with_range(f'${totals.cost_usd:,.0f}', cost, lambda v: f'${v:,.0f}')} at "
            f"${totals.price_usd_per_hour:,.2f}/h per instance "
            f"({totals.price_offer.replace('_', ' ')}, {totals.price_region}, {totals.price_as_of})"
        )
    else:
        line += f", cost unknown ({totals.price_note})"
    if totals.energy_kwh is not None:
        line += f", {totals.energy_kwh / 1000:,.1f} MWh at board power"
    else:
        line += ", energy unknown (the catalog has no board power for this accelerator: its maker publishes none)"
    return line


def estimate_view(estimate: Estimate, params: int, spread: Spread | None = None) -> list[RenderableType]:
    """The whole estimate, in the order ``clustersim train`` prints it (with ``spread``, the headline
    figures' intervals and where they come from)."""
    lines: list[RenderableType] = [
        headline(estimate, params),
        step_table(estimate, spread),
        memory_table(estimate),
        utilization_line(estimate, spread),
    ]
    totals = totals_line(estimate.totals, spread)
    if totals is not None:
        lines.append(totals)
    if spread is not None:
        lines.append(escape(interval_line(spread, "published training runs")))
    lines += [f"note: {note}" for note in estimate.notes]
    return lines


def operations_table(estimate: Estimate) -> Table:
    """Each operation's forward and backward time per micro-batch."""
    table = Table(title="operations per micro-batch (one layer; the head runs on the last stage)")
    for column in ("operation", "scope", "forward", "backward"):
        table.add_column(column, justify="left" if column in ("operation", "scope") else "right")
    for op in estimate.operations:
        table.add_row(op.name, op.scope, format_seconds(op.forward_s), format_seconds(op.backward_s))
    return table


# ---- two systems side by side ---------------------------------------------------------------------


def summary(estimate: Estimate) -> dict[str, Any]:
    """The figures a comparison shows, numbers in SI units."""
    totals = estimate.totals
    return {
        "system": estimate.system,
        "layout": estimate.layout.describe(),
        "step_s": estimate.step_s,
        "tokens_per_s_per_device": estimate.tokens_per_s_per_device,
        "tokens_per_s": estimate.tokens_per_s_per_device * estimate.num_devices,
        "mfu": estimate.mfu,
        "memory_required_bytes": estimate.memory.required_bytes,
        "capacity_bytes": estimate.capacity_bytes,
        "fits": estimate.fits,
        "bottleneck": estimate.bottleneck,
        "time_s": totals.time_s if totals else None,
        "device_hours": totals.device_hours if totals else None,
        "cost_usd": totals.cost_usd if totals else None,
        "energy_kwh": totals.energy_kwh if totals else None,
    }


def ratios(first: Estimate, second: Estimate) -> dict[str, float]:
    """Second over first for every non-zero float of the summary."""
    a, b = summary(first), summary(second)
    return {
        key: b[key] / a[key]
        for key in a
        if isinstance(a[key], float) and isinstance(b[key], float) and a[key] and not isinstance(a[key], bool)
    }


def comparison_json(
    first: Estimate, second: Estimate, spreads: tuple[Spread | None, Spread | None] = (None, None)
) -> dict[str, Any]:
    """Both estimates (with ``spreads``, each one's intervals) and the ratios of the summary's figures,
    second to first."""
    return {
        "first": estimate_json(first, spreads[0]),
        "second": estimate_json(second, spreads[1]),
        "ratios_second_to_first": ratios(first, second),
    }


_FORMATS: dict[str, Callable[[float], str]] = {
    "step_s": format_seconds,
    "time_s": lambda v: f"{v / 86400:,.1f} days",
    "memory_required_bytes": format_bytes,
    "capacity_bytes": format_bytes,
    "mfu": lambda v: f"{100 * v:.1f}%",
    "cost_usd": lambda v: f"${v:,.0f}",
    "energy_kwh": lambda v: f"{v / 1000:,.1f} MWh",
}


# the words of each summary key (a key not named here is its own words, its unit suffix dropped)
_LABELS: dict[str, str] = {
    "step_s": "step",
    "tokens_per_s_per_device": "tokens/s per device",
    "tokens_per_s": "tokens/s",
    "mfu": "MFU",
    "memory_required_bytes": "memory required per device",
    "capacity_bytes": "memory capacity per device",
    "time_s": "time to train",
    "cost_usd": "cost",
    "energy_kwh": "energy",
}
_UNIT_SUFFIX = re.compile(r"_(s|bytes|bits|usd|kwh|per_s)$")


def label(key: str) -> str:
    """The words for a summary key (``time_s`` is "time to train", never "time s")."""
    return _LABELS.get(key) or _UNIT_SUFFIX.sub("", key).replace("_", " ")


def _plain(value: object) -> str:
    return f"{value:,.0f}" if isinstance(value, float) else str(value)


def comparison_view(first: Estimate, second: Estimate) -> list[RenderableType]:
    """The summary of both side by side with ratios, then each one's notes."""
    a, b = summary(first), summary(second)
    by_key = ratios(first, second)
    table = Table(title=f"{first.model}: {a['system']} vs {b['system']}")
    for column in ("", a["system"], b["system"], "ratio"):
        table.add_column(column, overflow="fold")
    for key in a:
        show = _FORMATS.get(key, _plain)
        cells = ["unknown" if v is None else show(v) for v in (a[key], b[key])]
        ratio = f"{by_key[key]:.2f}x" if key in by_key else ""
        table.add_row(label(key), *cells, ratio)
    lines: list[RenderableType] = [table]
    for estimate in (first, second):
        lines += [f"note ({estimate.system}): {note}" for note in estimate.notes]
    return lines
