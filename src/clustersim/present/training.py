"""A training ``Estimate`` as rich renderables: the step's terms with bars, memory per device, the MFU
line, the job's totals, a side-by-side comparison and the operations table.

Each function returns tables or lines (markup strings) for a console to print; nothing is printed here.
Given a ``Spread`` (``clustersim.intervals``: left-out residuals of published step times), the step,
tokens/s, MFU and the job's days, device-hours, cost and energy carry their interval; the job's totals
scale with the step, so they take its relative range. Given the memory's (left-out residuals of published
peak memory), the memory per device carries its own, and the fit line says where its upper end leaves none.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from clustersim.intervals import Interval, Spread
from clustersim.present.intervals import interval_line, seconds_in_unit_of, with_range
from clustersim.training.comparison import TrainingComparison
from clustersim.training.estimate import Estimate
from clustersim.training.job import JobTotals
from clustersim.units import format_bytes, format_count, format_seconds

BAR_WIDTH = 30


def headline(estimate: Estimate, params: int) -> str:
    """The model, system, layout and batch in one line."""
    layout, job = estimate.layout, estimate.job
    return (
        f"[bold]{escape(estimate.model)}[/] ({format_count(params)} parameters) on {escape(estimate.system)}: "
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


def memory_intervals(estimate: Estimate, memory: Spread) -> dict[str, Interval]:
    """The interval of the memory per device: the model state and activations (``memory_total_bytes``, what the
    published peaks measure) and with the assumed overhead (``memory_required_bytes``, what must fit)."""
    return {
        "memory_total_bytes": memory.duration(estimate.memory.total_bytes),
        "memory_required_bytes": memory.duration(estimate.memory.required_bytes),
    }


def estimate_json(estimate: Estimate, spread: Spread | None, memory: Spread | None = None) -> dict[str, Any]:
    """``estimate.to_json()`` with, given ``spread``, ``intervals`` beside the figures they belong to:
    ``{figure: {low, high, level, basis, cases, note}}`` at the top (step, tokens/s, MFU) and in ``job``
    (time, device-hours, cost, energy); given ``memory``, the memory's at the top too (``memory_intervals``)."""
    data = estimate.to_json()
    found = {key: i.to_json() for key, i in training_intervals(estimate, spread).items()} if spread else {}
    found |= {key: i.to_json() for key, i in memory_intervals(estimate, memory).items()} if memory else {}
    if found:
        data["intervals"] = {key: value for key, value in found.items() if key not in JOB_FIGURES}
    if spread is not None and data.get("job"):
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


def memory_table(estimate: Estimate, memory: Spread | None = None) -> Table:
    """Bytes per device by kind, titled with the device's capacity; given ``memory``, the total's and the required
    bytes' interval beside them."""
    table = Table(title=f"memory per device (capacity {format_bytes(estimate.capacity_bytes)})")
    table.add_column("kind")
    table.add_column("bytes", justify="right")
    ranges = {"total": "memory_total_bytes", "required": "memory_required_bytes"}
    found = memory_intervals(estimate, memory) if memory else {}
    if memory is not None:
        table.add_column(f"{memory.level:.0%} interval", justify="right")
    for kind, value in estimate.memory.to_json().items():
        interval = found.get(ranges.get(kind, ""))
        shown = _byte_range(interval.low, interval.high) if interval else ""
        table.add_row(kind, format_bytes(value), *((shown,) if found else ()))
    return table


def _byte_range(low: float, high: float) -> str:
    """``17.8-26.7 GiB``: the unit once where both ends share it."""
    first, second = format_bytes(low), format_bytes(high)
    number, _, unit = first.partition(" ")
    return f"{number}-{second}" if second.endswith(f" {unit}") else f"{first}-{second}"


def utilization_line(estimate: Estimate, spread: Spread | None = None, memory: Spread | None = None) -> str:
    """Whether it fits (and the headroom; given ``memory``, whether its interval's upper end still does), MFU, HFU,
    tokens/s per device and the bottleneck."""
    headroom = estimate.capacity_bytes - estimate.memory.required_bytes
    fit = "fits" if estimate.fits else "[bold red]does not fit[/]"
    upper = memory_intervals(estimate, memory)["memory_required_bytes"].high if memory else None
    if estimate.fits and upper is not None and upper > estimate.capacity_bytes:
        fit = f"fits, [bold yellow]not at its memory interval's upper end ({format_bytes(upper)})[/]"
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


def estimate_view(
    estimate: Estimate, params: int, spread: Spread | None = None, memory: Spread | None = None
) -> list[RenderableType]:
    """The whole estimate, in the order ``clustersim train`` prints it (with ``spread``, the headline
    figures' intervals and where they come from; with ``memory``, the memory's)."""
    lines: list[RenderableType] = [
        headline(estimate, params),
        step_table(estimate, spread),
        memory_table(estimate, memory),
        utilization_line(estimate, spread, memory),
    ]
    totals = totals_line(estimate.totals, spread)
    if totals is not None:
        lines.append(totals)
    if spread is not None:
        lines.append(escape(interval_line(spread, "published training runs")))
    if memory is not None:
        lines.append(escape(interval_line(memory, "published peak memory")))
    return lines + note_lines(estimate)


def note_lines(estimate: Estimate, *, leave_out: Sequence[str] = ()) -> list[Text]:
    """The estimate's notes (how it was priced), one line each, as ``clustersim train`` prints them; the notes
    in ``leave_out`` are said elsewhere."""
    return [note_line(note) for note in estimate.notes if note not in leave_out]


def note_line(note: str, system: str | None = None) -> Text:
    """A note as plain text, never read as markup (a note may hold ``[...]``: a path, a model's name; rich's
    ``escape`` doubles a trailing backslash), with the system it belongs to where several are shown."""
    return Text(f"note{'' if system is None else f' ({system})'}: {note}")


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


def comparison_json(comparison: TrainingComparison, spreads: Sequence[Spread | None] = ()) -> dict[str, Any]:
    """Every system's estimate (with ``spreads``, each one's intervals), the systems as run (what was
    adjusted), and each figure and term side by side with its ratio to the first and the reason.
    ``second`` and ``ratios_second_to_first`` keep the two-system shape for the first compared system."""
    estimates = [system.estimate for system in comparison.systems]
    given = list(spreads) + [None] * (len(estimates) - len(spreads))
    names = [e.system for e in estimates]
    return {
        "first": estimate_json(estimates[0], given[0]),
        "second": estimate_json(estimates[1], given[1]),
        "ratios_second_to_first": ratios(estimates[0], estimates[1]),
        "compared": [estimate_json(e, spread) for e, spread in zip(estimates[1:], given[1:], strict=True)],
        "ranking": ranking(comparison, given),
        "systems": [
            {
                "system": system.estimate.system,
                "instance": system.instance,
                "nodes": system.nodes,
                "devices": system.estimate.num_devices,
                "layout": system.estimate.layout.describe(),
                "adjustments": list(system.adjustments),
            }
            for system in comparison.systems
        ],
        "rows": [
            {
                "figure": row.key,
                "label": row.label,
                "unit": row.unit,
                "values": dict(zip(names, row.values, strict=True)),
                "ratios_to_first": dict(zip(names, row.ratios, strict=True)),
                "reasons": dict(zip(names, row.reasons, strict=True)),
            }
            for row in comparison.rows
        ],
    }


_UNIT_FORMATS: dict[str, Callable[[float], str]] = {
    "s": format_seconds,
    "tokens_per_s": lambda v: f"{v:,.0f}",
    "usd": lambda v: f"${v:,.0f}",
    "fraction": lambda v: f"{100 * v:.1f}%",
    "count": lambda v: f"{v:,.0f}",
}


def _plain(value: object) -> str:
    return f"{value:,.0f}" if isinstance(value, float) else str(value)


def ranking(comparison: TrainingComparison, spreads: Sequence[Spread | None]) -> dict[str, Any]:
    """The systems from the fastest step to the slowest, by the prediction (``by_step``) and, for a safe
    choice, by the upper end of each one's interval (``by_upper_bound``: a system without an interval
    last); ``upper_bounds_s`` per system (None without an interval)."""
    estimates = [system.estimate for system in comparison.systems]
    given = list(spreads) + [None] * (len(estimates) - len(spreads))
    upper = [None if s is None else s.duration(e.step_s).high for e, s in zip(estimates, given, strict=True)]
    names = [e.system for e in estimates]
    order = sorted(range(len(names)), key=lambda i: (upper[i] is None, upper[i] or 0.0))
    return {
        "by_step": [names[i] for i in sorted(range(len(names)), key=lambda i: estimates[i].step_s)],
        "by_upper_bound": [names[i] for i in order],
        "upper_bounds_s": dict(zip(names, upper, strict=True)),
        "level": next((s.level for s in given if s is not None), None),
    }


def ranking_line(comparison: TrainingComparison, spreads: Sequence[Spread | None]) -> str:
    """One line: the fastest by the prediction, and the safest by its interval's upper end."""
    ranked = ranking(comparison, spreads)
    steps = {s.estimate.system: s.estimate.step_s for s in comparison.systems}
    fastest, safest = ranked["by_step"][0], ranked["by_upper_bound"][0]
    line = f"fastest: {escape(fastest)} (step {format_seconds(steps[fastest])})"
    bound = ranked["upper_bounds_s"][safest]
    if bound is None:
        return f"{line}; no intervals to rank a safe choice by"
    level = f"{100 * ranked['level']:.0f}%"
    return f"{line}; safest at {level}: {escape(safest)} (step at most {format_seconds(bound)})"


def comparison_view(comparison: TrainingComparison) -> list[RenderableType]:
    """The systems side by side: layout, step, throughput, cost and each term of the step, every value
    of a compared system with its ratio to the first and the reason; then what was adjusted and the notes."""
    systems = comparison.systems
    names = [s.estimate.system for s in systems]
    title = escape(f"{systems[0].estimate.model}: {' vs '.join(names)}")
    table = Table(title=f"{title} (ratios to the first, and why)")
    table.add_column("", overflow="fold")
    for name in names:
        table.add_column(escape(name), overflow="fold")
    table.add_row("layout", *(escape(s.estimate.layout.describe()) for s in systems))
    for row in comparison.rows:
        show = _UNIT_FORMATS.get(row.unit, _plain)
        cells = ["unknown" if row.values[0] is None else show(row.values[0])]
        for value, reason in zip(row.values[1:], row.reasons[1:], strict=True):
            text = "unknown" if value is None else show(value)
            cells.append(f"{text} ({escape('=' if reason == 'same' else reason)})" if reason else text)
        table.add_row(row.label, *cells)
    lines: list[RenderableType] = [table]
    for system in systems:
        lines += [f"adjusted ({escape(system.estimate.system)}): {escape(a)}" for a in system.adjustments]
    for system in systems:
        lines += [note_line(note, system.estimate.system) for note in system.estimate.notes]
    return lines
