"""Serving estimates as rich renderables: the breakdown table (one or two systems, with ratios) and
the reasons a second system is faster or slower.

Given ``ServingSpreads`` per system (``clustersim.intervals``: left-out residuals of published serving
runs), output tokens/s carry the interval of the throughput residuals, and TTFT and TPOT those of their own
field's residuals (published TTFT and TPOT); where a latency field has too few, the throughput's relative
range stands in and the line under the table says so.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from clustersim.intervals import Interval, Spread
from clustersim.intervals.residuals import LATENCY_FIELDS
from clustersim.present.intervals import interval_line, seconds_in_unit_of, with_range
from clustersim.serving.estimate import ServingEstimate
from clustersim.units import format_bytes, format_count, format_seconds
from clustersim.workload.transformer import Transformer

# (label, ServingEstimate field or a derived one: layout, precisions, batch_text).
ROWS: tuple[tuple[str, str], ...] = (
    ("layout", "layout"),
    ("precision (weights / KV)", "precisions"),
    ("batch per replica (limited by)", "batch_text"),
    ("weights per device", "weights_bytes_per_device"),
    ("KV cache per token per device", "kv_bytes_per_token_per_device"),
    ("KV room per device, tokens", "kv_capacity_tokens_per_device"),
    ("step", "step_s"),
    ("  GEMM compute", "gemm_compute_s"),
    ("  GEMM weight reads", "gemm_memory_s"),
    ("  decode attention (KV reads)", "decode_attention_s"),
    ("  prefill attention", "prefill_attention_s"),
    ("  elementwise (norms, residuals)", "elementwise_s"),
    ("  tensor/pipeline communication", "communication_s"),
    ("  overheads (step, per sequence)", "overhead_s"),
    ("memory-bound share of the step", "memory_bound_share"),
    ("TTFT", "ttft_s"),
    ("TPOT", "tpot_s"),
    ("requests/s", "request_rate_per_s"),
    ("output tokens/s per device", "output_tokens_per_s_per_device"),
    ("output tokens/s (system)", "output_tokens_per_s"),
)
_BOLD = {"output_tokens_per_s", "output_tokens_per_s_per_device"}
_TIMES = {field for _, field in ROWS if field.endswith("_s") and "_per_s" not in field}
RATES = ("output_tokens_per_s", "output_tokens_per_s_per_device")  # the fields with an interval: rates,
DURATIONS = tuple(LATENCY_FIELDS)  # and durations (their own residuals', or the throughput's relative range)
LATENCY_NOTE = (
    "{fields} take the throughput's relative range: too few left-out residuals of published {fields} "
    "for their own (validate scores them)"
)


@dataclass(frozen=True)
class ServingSpreads:
    """Where a serving estimate's intervals come from: its throughput's spread, and per latency field
    (``DURATIONS``) its own (None or absent: too few of that field's residuals)."""

    throughput: Spread
    latency: Mapping[str, Spread | None] = dataclasses.field(default_factory=dict)

    def of(self, name: str) -> Spread:
        """The spread of figure ``name``: a latency field's own, else the throughput's."""
        return self.latency.get(name) or self.throughput

    def borrowed(self) -> list[str]:
        """The latency fields whose intervals borrow the throughput's range."""
        return [name for name in DURATIONS if self.latency.get(name) is None]


def serving_intervals(estimate: ServingEstimate, spreads: ServingSpreads) -> dict[str, Interval]:
    """The interval of output tokens/s (system and per device), TTFT and TPOT."""
    found = {name: spreads.throughput.rate(getattr(estimate, name)) for name in RATES}
    return found | {name: spreads.of(name).duration(getattr(estimate, name)) for name in DURATIONS}


def intervals_json(estimate: ServingEstimate, spreads: ServingSpreads | None) -> dict[str, Any]:
    """``{"intervals": {figure: {low, high, level, basis, cases, note}}}`` (empty without ``spreads``)."""
    if spreads is None:
        return {}
    found = serving_intervals(estimate, spreads)
    out = {key: i.to_json() for key, i in found.items()}
    for name in spreads.borrowed():
        words = LATENCY_FIELDS[name]
        out[name]["note"] = "; ".join(n for n in (out[name]["note"], LATENCY_NOTE.format(fields=words)) if n)
    return {"intervals": out}


def interval_lines(spreads: ServingSpreads) -> list[str]:
    """Where the intervals come from: the throughput's residuals, then each latency field's (or that it borrows)."""
    lines = [interval_line(spreads.throughput, "published serving throughput")]
    lines += [
        interval_line(own, f"published {LATENCY_FIELDS[name]}")
        for name in DURATIONS
        if (own := spreads.latency.get(name)) is not None
    ]
    borrowed = spreads.borrowed()
    if borrowed:
        lines.append(LATENCY_NOTE.format(fields=" and ".join(LATENCY_FIELDS[name] for name in borrowed)))
    return lines


def generic_reasons(first: ServingEstimate, second: ServingEstimate) -> list[str]:
    """Why two estimates differ when no finer comparison applies: batch, memory-bound share, layout."""
    reasons = [
        f"batch: {first.batch} ({first.batch_limited_by}, KV room {first.kv_capacity_tokens_per_device:,.0f} "
        f"tokens/device) vs {second.batch} ({second.batch_limited_by}, "
        f"{second.kv_capacity_tokens_per_device:,.0f})",
        f"memory-bound share of the step: {first.memory_bound_share:.0%} vs {second.memory_bound_share:.0%}",
    ]
    if (first.tp, first.pp) != (second.tp, second.pp):
        reasons.append(
            f"layout: {first.dp} x tp{first.tp} pp{first.pp} vs {second.dp} x tp{second.tp} pp{second.pp}; "
            f"communication {format_seconds(first.communication_s)} vs {format_seconds(second.communication_s)} "
            f"per step"
        )
    return reasons


def instances_name(instance: str, nodes: int) -> str:
    """The instance, or ``2 x p5.48xlarge`` where a deployment fills several."""
    return instance if nodes == 1 else f"{nodes} x {instance}"


def _instances(estimate: ServingEstimate) -> str:
    return instances_name(estimate.system, estimate.nodes)


def cell(estimate: ServingEstimate, field: str, spreads: ServingSpreads | None = None) -> str:
    """One table cell: ``field`` of ``estimate`` in its unit (with ``spreads``, its interval where it has one)."""
    if spreads is not None and field in (*RATES, *DURATIONS):
        interval = serving_intervals(estimate, spreads)[field]
        show = seconds_in_unit_of(getattr(estimate, field)) if field in DURATIONS else _rate
        return with_range(cell(estimate, field), interval, show)
    if field == "layout":
        exchange = ", all-to-all" if estimate.moe_exchange == "alltoall" else ""
        groups = f" x attention dp {estimate.attention_dp}{exchange}" if estimate.attention_dp > 1 else ""
        over = f" over {_instances(estimate)}" if estimate.nodes > 1 else ""
        return f"{estimate.dp} x (tp {estimate.tp} x pp {estimate.pp}{groups}) on {estimate.device}{over}"
    if field == "precisions":
        return f"{estimate.precision} / {estimate.kv_precision}"
    if field == "batch_text":
        return f"{estimate.batch} of {estimate.max_batch} ({estimate.batch_limited_by})"
    value = getattr(estimate, field)
    if field in _TIMES:
        return format_seconds(value)
    if field.endswith("_bytes_per_device") or field.endswith("_per_token_per_device"):
        return format_bytes(value)
    if field == "memory_bound_share":
        return f"{100 * value:.0f}%"
    if field == "kv_capacity_tokens_per_device":
        return format_count(value)
    return f"{value:,.4g}" if value < 100 else f"{value:,.0f}"


def ratio(first: ServingEstimate, second: ServingEstimate, field: str) -> str:
    """Second over first for a numeric field, or empty."""
    key = "batch" if field == "batch_text" else field
    value = getattr(first, key, None)
    other = getattr(second, key, None)
    if not isinstance(value, int | float) or not isinstance(other, int | float) or value == 0:
        return ""
    return f"{other / value:.2f}x"


def _rate(value: float) -> str:
    return f"{value:,.4g}" if value < 100 else f"{value:,.0f}"


def _in_flight(estimate: ServingEstimate) -> str:
    """Where a decoder's context is not its prompt and half the mean output: the request set's in-flight mean."""
    half = estimate.input_tokens + estimate.output_tokens / 2.0
    if abs(estimate.decode_context_tokens - half) < 0.5:
        return ""
    held = estimate.decode_context_tokens - estimate.input_tokens
    return (
        f"; decoders at {estimate.input_tokens:,.0f} + {held:,.0f} tokens (half the outputs in flight: "
        "a longer request is in flight longer)"
    )


def serving_view(
    model: Transformer,
    estimates: list[ServingEstimate],
    reasons: list[str],
    spreads: Sequence[ServingSpreads | None] = (),
) -> list[RenderableType]:
    """The scenario line, the breakdown of one or two systems (with ratios), and the reasons; with
    ``spreads`` (one per estimate), the intervals and where they come from."""
    given = list(spreads) + [None] * (len(estimates) - len(spreads))
    head = estimates[0]
    scenario = "offline" if head.scenario == "offline" else "server"
    lines: list[RenderableType] = [
        f"[bold]{model.name}[/] ({format_count(model.num_params())} parameters), {scenario}, "
        f"{head.input_tokens:,.0f} in / {head.output_tokens:,.0f} out tokens, {head.batching} batching"
        + _in_flight(head)
    ]
    table = Table(title=" vs ".join(_instances(e) for e in estimates))
    table.add_column("")
    for estimate in estimates:
        table.add_column(_instances(estimate), justify="right")
    if len(estimates) == 2:
        table.add_column("ratio", justify="right")
    for label, field in ROWS:
        cells = [cell(e, field, spread) for e, spread in zip(estimates, given, strict=True)]
        if len(estimates) == 2:
            cells.append(ratio(estimates[0], estimates[1], field))
        table.add_row(label, *cells, style="bold" if field in _BOLD else None)
    lines.append(table)
    for estimate, spread in zip(estimates, given, strict=True):
        if spread is not None:
            where = f"{_instances(estimate)}: " if len(estimates) > 1 else ""
            lines += [escape(where + line) for line in interval_lines(spread)]
    lines += [Text.from_markup(f"why: {reason}") for reason in reasons]
    lines += [Text(f"note: {note}") for note in dict.fromkeys(n for e in estimates for n in e.notes)]
    return lines
