"""The figures a buyer compares instances on, per instance and per device, each with its ratio to the
first instance and the reason for the ratio: which catalogued factor moved it.

Every figure is a product of factors read from the catalog (devices per instance, a device's dense
peak, memory, bandwidth, price), so a ratio splits into the ratios of its factors: "2.00x: 16 chips vs
8" rather than a bare "2.00x". A factor the catalog lacks (no FP4 rate, no price) leaves the figure
unknown for that instance, never zero.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.kinds import Dtype, Kind
from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator, Domain, Instance, Vendor
from clustersim.units import format_bits_per_s, format_bytes, format_bytes_per_s, format_flop_per_s

_PFLOP = 1e15
_SAME = 0.005  # ratios within half a percent are "the same"


@dataclass(frozen=True, slots=True)
class Factor:
    """One catalogued quantity a figure multiplies (``power`` 1) or divides by (``power`` -1)."""

    name: str
    value: float
    text: str
    power: int = 1


@dataclass(frozen=True, slots=True)
class Missing:
    """Why a figure is unknown for an instance: the catalogued factor it lacks."""

    reason: str


Factors = tuple[Factor, ...] | Missing


@dataclass(frozen=True, slots=True)
class InstanceFigure:
    """One figure across instances: the value of each (None: unknown), its ratio to the first and why."""

    key: str
    label: str
    unit: str
    values: tuple[float | None, ...]
    texts: tuple[str, ...]
    ratios: tuple[float | None, ...]
    reasons: tuple[str, ...]

    def as_json(self, ids: Sequence[str]) -> dict[str, Any]:
        """Values in SI units (dollars for prices), keyed by instance id; ratios and reasons to the first."""
        return {
            "figure": self.key,
            "label": self.label,
            "unit": self.unit,
            "values": dict(zip(ids, self.values, strict=True)),
            "ratios_to_first": dict(zip(ids, self.ratios, strict=True)),
            "reasons": dict(zip(ids, self.reasons, strict=True)),
        }


@dataclass(frozen=True, slots=True)
class _Spec:
    key: str
    label: str
    unit: str
    factors: Callable[[_Machine], Factors]
    show: Callable[[float], str]


@dataclass(frozen=True, slots=True)
class _Machine:
    """An instance with the entries its figures come from."""

    instance: Instance
    device: Accelerator
    domain_devices: int
    domain_text: str
    domain: Domain | None

    @property
    def devices(self) -> Factor:
        n = int(self.instance.num_accelerators.value)
        noun = "GPUs" if self.device.vendor is Vendor.NVIDIA else "chips"
        return Factor("devices", n, f"{n} {noun}")

    def peak(self, dtype: Dtype) -> Factor | Missing:
        figure = self.device.dense_flop_per_s.get(dtype)
        if figure is None:
            return Missing(f"no dense {dtype.value} figure for {self.device.id}")
        return Factor(f"{dtype.value} per device", figure.value, f"{format_flop_per_s(figure.value)} {dtype.value}")

    def price(self, offer: str) -> Factor | Missing:
        price = getattr(self.instance, offer)
        words = offer.replace("_", "-") if offer == "on_demand" else "Capacity Block"
        if price is None:
            return Missing(f"no published {words} price")
        if price.usd_per_hour is None:
            return Missing(f"no {words} offer")
        return Factor(offer, price.usd_per_hour, f"${price.usd_per_hour:,.2f}/h")


def _machine(catalog: Catalog, instance: Instance) -> _Machine:
    device = catalog.accelerator(instance.accelerator)
    per_node = int(instance.num_accelerators.value)
    size, text, domain = per_node, "one instance", None
    if instance.intra_node.domain is not None:
        domain = catalog.typed(instance.intra_node.domain, Domain)
        size = int(domain.num_accelerators.value)
        if size > per_node:
            text = f"{domain.id} over {size // per_node} instances"
    return _Machine(instance, device, size, text, domain)


def _per(*factors: Factor | Missing) -> Factors:
    """The factors, or the first one missing."""
    missing = [f for f in factors if isinstance(f, Missing)]
    return missing[0] if missing else tuple(f for f in factors if isinstance(f, Factor))


def _inverse(factor: Factor | Missing, what: str = "") -> Factor | Missing:
    if isinstance(factor, Missing):
        return factor
    return Factor(factor.name, factor.value, f"{what}{factor.text}", power=-1)


def _scaleup(m: _Machine) -> Factors:
    """The chip's scale-up bandwidth each way, no more than its share of the instance's domain: a
    Trainium2 has 1.28 TB/s of NeuronLink, of which a trn2.48xlarge (no UltraServer ring) joins 1,024 GB/s."""
    figure = m.device.scaleup_bandwidth_per_direction_bytes_per_s
    if figure is None:
        return Missing(f"no scale-up bandwidth for {m.device.id}")
    value, where = figure.value, ""
    if m.domain is not None:
        share = m.domain.aggregate_bandwidth_bidirectional_bytes_per_s.value / m.domain.num_accelerators.value / 2
        if share < value * (1 - _SAME):
            value, where = share, f" in {m.domain.id}"
    return (Factor("scale-up per device", value, f"{format_bytes_per_s(value)} each way{where}"),)


def _network(m: _Machine) -> Factor:
    total = m.instance.network.total_bandwidth_bits_per_s.value
    return Factor("network", total, format_bits_per_s(total))


def _memory(m: _Machine) -> Factor:
    return Factor("memory per device", m.device.memory_bytes.value, format_bytes(m.device.memory_bytes.value))


def _hbm_bw(m: _Machine) -> Factor:
    value = m.device.memory_bandwidth_bytes_per_s.value
    return Factor("memory bandwidth per device", value, format_bytes_per_s(value))


def _fp4(m: _Machine) -> Factor | Missing:
    for dtype in (Dtype.FP4, Dtype.MXFP4):
        found = m.peak(dtype)
        if isinstance(found, Factor):
            return found
    return Missing(f"no dense FP4 figure for {m.device.id}")


def _dollars(v: float) -> str:
    return f"${v:,.2f}"


def _domain(m: _Machine) -> Factors:
    return (Factor("domain", m.domain_devices, f"{m.domain_devices} devices ({m.domain_text})"),)


def _count(v: float) -> str:
    return f"{v:,.0f}"


def _peak_of(dtype: Dtype, *, instance: bool) -> Callable[[_Machine], Factors]:
    def factors(m: _Machine) -> Factors:
        return _per(m.devices, m.peak(dtype)) if instance else _per(m.peak(dtype))

    return factors


def _price_of(offer: str, per: Dtype | None = None, *, per_device: bool = False) -> Callable[[_Machine], Factors]:
    """An offer's hourly price, per instance, per device, or per dense PFLOP/s of ``per``."""

    def factors(m: _Machine) -> Factors:
        if per is not None:
            return _per(m.price(offer), _inverse(m.devices, "per "), _inverse(m.peak(per), "per "))
        if per_device:
            return _per(m.price(offer), _inverse(m.devices, "per "))
        return _per(m.price(offer))

    return factors


def _specs() -> tuple[_Spec, ...]:
    flop, bw = format_flop_per_s, format_bytes_per_s
    specs = [
        _Spec("devices", "devices per instance", "count", lambda m: (m.devices,), _count),
        _Spec("bf16_flop_per_s", "dense BF16 per instance", "flop_per_s", _peak_of(Dtype.BF16, instance=True), flop),
        _Spec("fp8_flop_per_s", "dense FP8 per instance", "flop_per_s", _peak_of(Dtype.FP8, instance=True), flop),
        _Spec("fp4_flop_per_s", "dense FP4 per instance", "flop_per_s", lambda m: _per(m.devices, _fp4(m)), flop),
        _Spec(
            "bf16_flop_per_s_per_device", "dense BF16 per device", "flop_per_s",
            _peak_of(Dtype.BF16, instance=False), flop,
        ),
        _Spec("memory_bytes", "HBM per instance", "bytes", lambda m: (m.devices, _memory(m)), format_bytes),
        _Spec("memory_bytes_per_device", "HBM per device", "bytes", lambda m: (_memory(m),), format_bytes),
        _Spec("memory_bytes_per_s", "HBM bandwidth per instance", "bytes_per_s", lambda m: (m.devices, _hbm_bw(m)), bw),
        _Spec("memory_bytes_per_s_per_device", "HBM bandwidth per device", "bytes_per_s", lambda m: (_hbm_bw(m),), bw),
        _Spec("scaleup_bytes_per_s_per_device", "scale-up per device, each way", "bytes_per_s", _scaleup, bw),
        _Spec("scaleup_domain_devices", "scale-up domain", "count", _domain, lambda v: f"{v:,.0f} devices"),
        _Spec("network_bits_per_s", "network per instance", "bits_per_s", lambda m: (_network(m),), format_bits_per_s),
        _Spec(
            "network_bits_per_s_per_device", "network per device", "bits_per_s",
            lambda m: _per(_network(m), _inverse(m.devices, "per ")), format_bits_per_s,
        ),
    ]  # fmt: skip
    for offer, words in (("on_demand", "on-demand"), ("capacity_block", "Capacity Block")):
        specs += [
            _Spec(f"{offer}_usd_per_hour", f"{words} $/h per instance", "usd_per_hour", _price_of(offer), _dollars),
            _Spec(
                f"{offer}_usd_per_device_hour", f"{words} $ per device-hour", "usd_per_hour",
                _price_of(offer, per_device=True), _dollars,
            ),
            _Spec(
                f"{offer}_usd_per_bf16_pflop_hour", f"{words} $ per dense BF16 PFLOP-hour", "usd",
                _price_of(offer, Dtype.BF16), _dollars,
            ),
            _Spec(
                f"{offer}_usd_per_fp8_pflop_hour", f"{words} $ per dense FP8 PFLOP-hour", "usd",
                _price_of(offer, Dtype.FP8), _dollars,
            ),
        ]  # fmt: skip
    return tuple(specs)


def _value(factors: tuple[Factor, ...], key: str) -> float:
    value = math.prod(f.value**f.power for f in factors)
    return value * _PFLOP if key.endswith("pflop_hour") else value


def _reason(ratio: float | None, first: Factors, other: Factors) -> str:
    """Which factors differ, each with both values and its own ratio; "same" when none does; what is
    missing when a figure is unknown."""
    if isinstance(other, Missing):
        return other.reason
    if isinstance(first, Missing) or ratio is None:
        return f"no ratio: the first has {first.reason}" if isinstance(first, Missing) else ""
    moved = [(a, b) for a, b in zip(first, other, strict=True) if abs(b.value / a.value - 1) >= _SAME]
    if not moved:
        return "same"
    if len(moved) == 1:
        a, b = moved[0]
        return f"{ratio:.2f}x: {b.text} vs {a.text}"
    parts = [f"{b.text} vs {a.text} ({(b.value / a.value) ** a.power:.2f}x)" for a, b in moved]
    return f"{ratio:.2f}x: " + " x ".join(parts)


def compare_instances(catalog: Catalog, instances: Sequence[Instance]) -> list[InstanceFigure]:
    """The decision figures of ``instances`` side by side, ratios and reasons relative to the first."""
    machines = [_machine(catalog, i) for i in instances]
    rows = []
    for spec in _specs():
        factors = [spec.factors(m) for m in machines]
        values = tuple(None if isinstance(f, Missing) else _value(f, spec.key) for f in factors)
        first = values[0]
        ratios = tuple(None if v is None or not first else v / first for v in values)
        reasons = ("", *(_reason(r, factors[0], f) for r, f in zip(ratios[1:], factors[1:], strict=True)))
        texts = tuple("unknown" if v is None else spec.show(v) for v in values)
        rows.append(InstanceFigure(spec.key, spec.label, spec.unit, values, texts, ratios, reasons))
    return rows


def instances_of(entries: Sequence[Any]) -> list[Instance] | None:
    """``entries`` as instances when every one is an instance, else None."""
    if entries and all(getattr(e, "kind", None) is Kind.INSTANCE for e in entries):
        return [e for e in entries if isinstance(e, Instance)]
    return None
