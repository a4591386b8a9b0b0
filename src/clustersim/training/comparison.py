"""The same training job on several systems, side by side: per system the step, tokens/s and cost, and
per term of the step (compute-bound work, memory-bound work, pipeline bubble, exposed TP/CP/EP/PP/DP
communication, optimizer) the ratio to the first system with its reason: which figure moved it.

A compute ratio splits exactly into three factors, work per device x (peak FLOP/s)^-1 x (achieved
fraction of peak)^-1, since compute time = work / (peak x fraction); a memory-bound ratio into the HBM
bandwidth and the rest; a communication ratio is named by the layout degree, the link bandwidth and the
domain size that changed, and how much of the link time stayed exposed. ``clustersim.scenario.compare``
runs the systems; this module reads their estimates.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from clustersim.system import System
from clustersim.training.estimate import Estimate
from clustersim.units import format_bits_per_s, format_bytes_per_s, format_flop_per_s, format_seconds
from clustersim.workload.ops import OpKind
from clustersim.workload.transformer import Transformer

_SAME = 0.005  # factors within half a percent are "the same"
COMM_TERMS = ("tp comm", "cp comm", "ep comm", "pp comm", "dp comm")
_SCALE_UP_GROUPS = {"tp comm": "tp", "cp comm": "cp", "ep comm": "ep"}
_NETWORK_GROUPS = {"pp comm": "pp", "dp comm": "dp"}


@dataclass(frozen=True)
class ComparedSystem:
    """One system of the comparison: ``nodes`` instances, the system the job ran on, its estimate, and
    what was adjusted to run it there."""

    instance: str
    nodes: int
    system: System
    estimate: Estimate
    adjustments: tuple[str, ...] = ()


@dataclass(frozen=True)
class ComparedRow:
    """One figure across the systems: values (None: unknown or not applicable), ratios to the first and
    the reason for each ratio (the first's reason is empty)."""

    key: str
    label: str
    unit: str  # s, tokens_per_s, usd, fraction, count
    values: tuple[float | None, ...]
    ratios: tuple[float | None, ...]
    reasons: tuple[str, ...]


@dataclass(frozen=True)
class TrainingComparison:
    """The job on every system, and the figures and terms side by side."""

    model: Transformer
    systems: tuple[ComparedSystem, ...]
    rows: tuple[ComparedRow, ...]


def compare_estimates(model: Transformer, systems: Sequence[ComparedSystem]) -> TrainingComparison:
    """The rows of ``systems`` (the first is the reference), each with its ratios and reasons."""
    return TrainingComparison(model, tuple(systems), tuple(_rows(model, systems)))


def _exposed(estimate: Estimate, name: str) -> float:
    return next((t.exposed_s for t in estimate.terms if t.name == name), 0.0)


def _link(estimate: Estimate, name: str) -> float:
    return next((t.link_s for t in estimate.terms if t.name == name), 0.0)


def memory_bound_share(model: Transformer, estimate: Estimate) -> float:
    """The share of the forward, backward and recompute time spent in memory-bound operations (norms,
    activations, unfused attention scores, the loss), from the estimate's per-operation times: layer
    operations weighted by the layers of one pipeline stage, the head's once."""
    layers = model.layers / estimate.layout.pp
    total = memory = 0.0
    for op in estimate.operations:
        weight = layers if op.scope == "layer" else 1.0
        seconds = weight * (op.forward_s + op.backward_s)
        total += seconds
        if op.kind is OpKind.MEMORY:
            memory += seconds
    return memory / total if total > 0 else 0.0


@dataclass(frozen=True)
class _Split:
    """One estimate's step, split the way the comparison reads it."""

    compute_bound_s: float
    memory_bound_s: float
    work_per_device: float  # hardware FLOPs per device per step
    peak: float
    fraction: float  # achieved fraction of peak in the compute-bound work


def _split(model: Transformer, estimate: Estimate) -> _Split:
    busy = sum(_exposed(estimate, name) for name in ("forward", "backward", "recompute"))
    share = memory_bound_share(model, estimate)
    compute, memory = busy * (1 - share), busy * share
    work = estimate.hardware_flops_per_step / estimate.num_devices
    fraction = work / (compute * estimate.peak_flop_per_s) if compute > 0 else 0.0
    return _Split(compute, memory, work, estimate.peak_flop_per_s, fraction)


def _ratio(value: float | None, first: float | None) -> float | None:
    if value is None or first is None or first <= 0:
        return None
    return value / first


def _moved(pairs: Sequence[tuple[str, float, float, str]]) -> list[str]:
    """``(what, this, first, text)`` for each factor; the texts of those that differ."""
    return [text for _, this, first, text in pairs if first > 0 and abs(this / first - 1) >= _SAME]


def _row(
    key: str,
    label: str,
    unit: str,
    systems: Sequence[ComparedSystem],
    value: Callable[[ComparedSystem], float | None],
    reason: Callable[[ComparedSystem, ComparedSystem, float | None], str],
) -> ComparedRow:
    values = tuple(value(s) for s in systems)
    ratios = tuple(_ratio(v, values[0]) for v in values)
    reasons = [""]
    for system, this, ratio in zip(systems[1:], values[1:], ratios[1:], strict=True):
        both_zero = values[0] == 0 and this == 0
        reasons.append("none on either" if both_zero else reason(system, systems[0], ratio))
    return ComparedRow(key, label, unit, values, ratios, tuple(reasons))


def _lead(ratio: float | None, parts: list[str], *, zero_first: bool = False) -> str:
    if ratio is None:
        head = "none on the first" if zero_first else "unknown"
        return f"{head}: {'; '.join(parts)}" if parts else head
    if not parts:
        return "same" if abs(ratio - 1) < _SAME else f"{ratio:.2f}x"
    return f"{ratio:.2f}x: " + "; ".join(parts)


def _rows(model: Transformer, systems: Sequence[ComparedSystem]) -> list[ComparedRow]:
    splits = {id(s): _split(model, s.estimate) for s in systems}

    def split(s: ComparedSystem) -> _Split:
        return splits[id(s)]

    rows = [
        _row("devices", "devices", "count", systems, lambda s: float(s.estimate.num_devices), _devices_reason),
        _row("step_s", "step", "s", systems, lambda s: s.estimate.step_s, _step_reason),
        _row(
            "tokens_per_s", "tokens/s", "tokens_per_s", systems,
            lambda s: s.estimate.tokens_per_s_per_device * s.estimate.num_devices, _throughput_reason,
        ),
        _row(
            "tokens_per_s_per_device", "tokens/s per device", "tokens_per_s", systems,
            lambda s: s.estimate.tokens_per_s_per_device, _per_device_reason,
        ),
        _row("mfu", "MFU", "fraction", systems, lambda s: s.estimate.mfu, _mfu_reason),
        _row("cost_usd", "cost", "usd", systems, _cost, _cost_reason),
        _row(
            "compute_bound_s", "compute-bound work (GEMMs, attention)", "s", systems,
            lambda s: split(s).compute_bound_s, lambda s, f, r: _compute_reason(split(s), split(f), r),
        ),
        _row(
            "memory_bound_s", "memory-bound work (norms, activations, loss)", "s", systems,
            lambda s: split(s).memory_bound_s, lambda s, f, r: _memory_reason(s, f, r),
        ),
        _row(
            "bubble_s", "pipeline bubble", "s", systems,
            lambda s: _exposed(s.estimate, "pipeline bubble"), lambda s, f, r: _bubble_reason(s, f, r),
        ),
    ]  # fmt: skip
    for term in COMM_TERMS:
        key, label = term.replace(" ", "_") + "_exposed_s", f"{term.split()[0].upper()} comm, exposed"
        rows.append(_row(key, label, "s", systems, _exposed_of(term), _comm_reason_of(term)))
    rows.append(
        _row("optimizer_s", "optimizer", "s", systems, lambda s: _exposed(s.estimate, "optimizer"), _optimizer_reason)
    )
    return [row for row in rows if row.unit != "s" or row.key == "step_s" or any(v for v in row.values)]


def _exposed_of(term: str) -> Callable[[ComparedSystem], float | None]:
    def exposed(s: ComparedSystem) -> float | None:
        return _exposed(s.estimate, term)

    return exposed


def _comm_reason_of(term: str) -> Callable[[ComparedSystem, ComparedSystem, float | None], str]:
    def reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
        return _comm_reason(term, s, f, ratio)

    return reason


def _devices_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    return _lead(ratio, _moved([("devices", s.estimate.num_devices, f.estimate.num_devices, s.estimate.system)]))


def _step_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    deltas = []
    for name in ("forward", "backward", "recompute", "pipeline bubble", *COMM_TERMS, "optimizer"):
        delta = _exposed(s.estimate, name) - _exposed(f.estimate, name)
        if abs(delta) > _SAME * f.estimate.step_s:
            deltas.append((abs(delta), f"{name} {'+' if delta > 0 else '-'}{format_seconds(abs(delta))}"))
    parts = [text for _, text in sorted(deltas, reverse=True)[:3]]
    return _lead(ratio, parts)


def _throughput_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    parts = _moved(
        [
            ("devices", s.estimate.num_devices, f.estimate.num_devices,
             f"{s.estimate.num_devices} devices vs {f.estimate.num_devices}"),
            ("step", f.estimate.step_s, s.estimate.step_s,
             f"step {format_seconds(s.estimate.step_s)} vs {format_seconds(f.estimate.step_s)}"),
        ]
    )  # fmt: skip
    return _lead(ratio, parts)


def _per_device_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    a, b = s.estimate, f.estimate
    parts = _moved([("step", b.step_s, a.step_s, f"step {format_seconds(a.step_s)} vs {format_seconds(b.step_s)}")])
    return _lead(ratio, parts)


def _mfu_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    """MFU = model FLOPs / (step x devices x peak): the peak and the step per device moved it."""
    a, b = s.estimate, f.estimate
    parts = _moved(
        [
            ("peak", b.peak_flop_per_s, a.peak_flop_per_s,
             f"peak {format_flop_per_s(a.peak_flop_per_s)} vs {format_flop_per_s(b.peak_flop_per_s)} "
             f"({b.peak_flop_per_s / a.peak_flop_per_s:.2f}x)"),
            ("device-seconds", b.step_s * b.num_devices, a.step_s * a.num_devices,
             f"device-seconds per step {a.step_s * a.num_devices:,.0f} vs {b.step_s * b.num_devices:,.0f} "
             f"({b.step_s * b.num_devices / (a.step_s * a.num_devices):.2f}x)"),
        ]
    )  # fmt: skip
    return _lead(ratio, parts)


def _price(s: ComparedSystem) -> float | None:
    totals = s.estimate.totals
    return totals.price_usd_per_hour if totals is not None else None


def _cost(s: ComparedSystem) -> float | None:
    totals = s.estimate.totals
    return totals.cost_usd if totals is not None else None


def _cost_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    if ratio is None:
        totals = s.estimate.totals
        if totals is not None and totals.cost_usd is None:
            return f"unknown: {totals.price_note}"
        return "unknown: no price or no token budget" if _cost(f) is not None else "no cost for the first"
    price_s, price_f = _price(s), _price(f)
    assert price_s is not None and price_f is not None and s.estimate.totals and f.estimate.totals
    time_s, time_f = s.estimate.totals.time_s, f.estimate.totals.time_s
    parts = _moved(
        [
            ("price", price_s, price_f, f"${price_s:,.2f}/h vs ${price_f:,.2f}/h per instance "
             f"({price_s / price_f:.2f}x)"),
            ("nodes", s.nodes, f.nodes, f"{s.nodes} instances vs {f.nodes} "
             f"({s.nodes / f.nodes:.2f}x)"),
            ("time", time_s, time_f, f"time {time_s / 86400:,.1f} vs {time_f / 86400:,.1f} days "
             f"({time_s / time_f:.2f}x)"),
        ]
    )  # fmt: skip
    return _lead(ratio, parts)


def _compute_reason(s: _Split, f: _Split, ratio: float | None) -> str:
    parts = _moved(
        [
            ("work", s.work_per_device, f.work_per_device,
             f"work per device {s.work_per_device / 1e15:,.1f} vs {f.work_per_device / 1e15:,.1f} PFLOP "
             f"({s.work_per_device / f.work_per_device:.2f}x)"),
            ("peak", s.peak, f.peak,
             f"peak {format_flop_per_s(s.peak)} vs {format_flop_per_s(f.peak)} ({f.peak / s.peak:.2f}x)"),
            ("fraction", s.fraction, f.fraction,
             f"achieved {s.fraction:.0%} vs {f.fraction:.0%} of peak ({f.fraction / s.fraction:.2f}x)"),
        ]
    )  # fmt: skip
    return _lead(ratio, parts)


def _memory_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    bw_s, bw_f = s.system.memory_bandwidth_bytes_per_s, f.system.memory_bandwidth_bytes_per_s
    parts = _moved(
        [("hbm", bw_s, bw_f, f"HBM {format_bytes_per_s(bw_s)} vs {format_bytes_per_s(bw_f)} ({bw_f / bw_s:.2f}x)")]
    )
    if ratio is not None:
        rest = ratio * bw_s / bw_f
        if abs(rest - 1) >= _SAME:
            parts.append(f"bytes per device and achieved bandwidth ({rest:.2f}x)")
    return _lead(ratio, parts)


def _bubble_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    a, b = s.estimate.layout, f.estimate.layout
    micro_s = s.estimate.job.global_batch // (a.dp * a.micro_batch)
    micro_f = f.estimate.job.global_batch // (b.dp * b.micro_batch)
    parts = _moved(
        [
            ("pp", a.pp, b.pp, f"pp {a.pp} vs {b.pp}"),
            ("vp", a.vp, b.vp, f"vp {a.vp} vs {b.vp}"),
            ("micro-batches", micro_s, micro_f, f"{micro_s} micro-batches vs {micro_f}"),
        ]
    )
    return _lead(ratio, parts, zero_first=_exposed(f.estimate, "pipeline bubble") == 0)


def _scaleup_each_way(system: System) -> float:
    """Scale-up bandwidth of one device, one direction, as the collective models price it: a NeuronLink
    torus's own links (a trn2.48xlarge's 4 x 128 GB/s, not the chip's datasheet figure that counts the
    UltraServer link), else the accelerator's."""
    torus = system.topology.torus
    if torus is None:
        return system.scaleup_bytes_per_s
    return torus.injection_links * torus.link_bytes_per_s / torus.ranks_per_chip


def _comm_reason(term: str, s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    a, b = s.estimate.layout, f.estimate.layout
    group = _SCALE_UP_GROUPS.get(term) or _NETWORK_GROUPS[term]
    degree_s, degree_f = getattr(a, group), getattr(b, group)
    pairs = [("degree", degree_s, degree_f, f"{group} {degree_s} vs {degree_f}")]
    if term in _SCALE_UP_GROUPS:
        bw_s, bw_f = _scaleup_each_way(s.system), _scaleup_each_way(f.system)
        link_s, link_f = s.system.topology.scaleup_link, f.system.topology.scaleup_link
        pairs.append(
            ("scale-up", bw_s, bw_f, f"{link_s} {format_bytes_per_s(bw_s)} vs {link_f} {format_bytes_per_s(bw_f)} "
             "per device each way")
        )  # fmt: skip
    else:
        net_s = s.system.network_bytes_per_s * 8 / s.system.devices_per_node
        net_f = f.system.network_bytes_per_s * 8 / f.system.devices_per_node
        pairs.append(
            ("network", net_s, net_f, f"network {format_bits_per_s(net_s)} vs {format_bits_per_s(net_f)} per device")
        )
    dom_s, dom_f = s.system.scaleup_devices, f.system.scaleup_devices
    pairs.append(("domain", dom_s, dom_f, f"scale-up domain {dom_s} vs {dom_f} devices"))
    parts = _moved(pairs)
    link_this, link_first = _link(s.estimate, term), _link(f.estimate, term)
    if link_first > 0 and link_this > 0 and abs(link_this / link_first - 1) >= _SAME:
        parts.append(f"link time {format_seconds(link_this)} vs {format_seconds(link_first)}")
    hidden_s = _exposed(s.estimate, term) / link_this if link_this > 0 else 0.0
    hidden_f = _exposed(f.estimate, term) / link_first if link_first > 0 else 0.0
    if abs(hidden_s - hidden_f) >= 0.01:
        parts.append(f"exposed {hidden_s:.0%} vs {hidden_f:.0%} of it")
    return _lead(ratio, parts, zero_first=_exposed(f.estimate, term) == 0)


def _optimizer_reason(s: ComparedSystem, f: ComparedSystem, ratio: float | None) -> str:
    bw_s, bw_f = s.system.memory_bandwidth_bytes_per_s, f.system.memory_bandwidth_bytes_per_s
    zero_s, zero_f = s.estimate.layout.zero, f.estimate.layout.zero
    dp_s, dp_f = s.estimate.layout.dp, f.estimate.layout.dp
    parts = _moved(
        [
            ("hbm", bw_s, bw_f, f"HBM {format_bytes_per_s(bw_s)} vs {format_bytes_per_s(bw_f)} ({bw_f / bw_s:.2f}x)"),
            ("shards", dp_s, dp_f, f"dp {dp_s} vs {dp_f}"),
            ("zero", zero_s, zero_f, f"ZeRO {zero_s} vs {zero_f}"),
        ]
    )
    if ratio is not None:
        rest = ratio * bw_s / bw_f
        if abs(rest - 1) >= _SAME:
            parts.append(f"optimizer work per device and the framework's achieved rate ({rest:.2f}x)")
    return _lead(ratio, parts)
