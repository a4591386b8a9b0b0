"""Flatten catalog entries into rows (field, value with unit, source) and compare entries side by side."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from clustersim.catalog.figures import Choices, Fact, Figure, Flag, Price
from clustersim.catalog.schema import Entry

_SKIP = {"id", "name", "aliases", "description", "notes", "preliminary"}


@dataclass(frozen=True, slots=True)
class FieldRow:
    """One field of an entry: dotted path, SI value, display text, and where the number comes from."""

    path: str
    value: float | str | bool | None
    text: str
    unit: str | None = None
    basis: str | None = None
    source: str | None = None
    provenance: str | None = None
    confidence: str | None = None
    note: str | None = None

    def as_json(self) -> dict[str, Any]:
        """The row as a JSON-ready dict (numbers in SI units)."""
        return {k: getattr(self, k) for k in self.__slots__}


def _sourced(path: str, value: float | str | bool | None, text: str, item: Any, unit: str | None = None) -> FieldRow:
    basis = getattr(item, "basis", None)
    return FieldRow(
        path=path,
        value=value,
        text=text,
        unit=unit,
        basis=basis.value if basis is not None else None,
        source=item.source,
        provenance=item.provenance.value,
        confidence=item.confidence.value,
        note=item.note,
    )


def _walk(path: str, item: Any) -> list[FieldRow]:
    if item is None:
        return []
    if isinstance(item, Figure):
        text = item.describe() + (" per TiB" if path.endswith("_per_tib") else "")
        return [_sourced(path, item.value, text, item, item.dimension.value)]
    if isinstance(item, Price):
        if item.usd_per_hour is None:
            text = f"not offered ({item.region}, {item.as_of})"
        else:
            text = f"${item.usd_per_hour:,.2f}/h ({item.region}, {item.as_of})"
        return [_sourced(path, item.usd_per_hour, text, item, "usd_per_hour")]
    if isinstance(item, Flag):
        return [_sourced(path, item.value, "yes" if item.value else "no", item)]
    if isinstance(item, Fact):
        return [_sourced(path, item.text, item.text, item)]
    if isinstance(item, Choices):
        text = ", ".join(f"{v:g}" for v in item.values)
        return [_sourced(path, text, text, item)]
    if isinstance(item, BaseModel):
        rows: list[FieldRow] = []
        for name, value in item:
            if path or name not in _SKIP:
                rows.extend(_walk(f"{path}.{name}" if path else name, value))
        return rows
    if isinstance(item, dict):
        return [row for key, value in item.items() for row in _walk(f"{path}.{key}", value)]
    if isinstance(item, tuple):
        if all(isinstance(v, str) for v in item):
            return [FieldRow(path, ", ".join(item), ", ".join(item))] if item else []
        return [row for i, value in enumerate(item) for row in _walk(f"{path}[{i}]", value)]
    text = item.value if hasattr(item, "value") and not isinstance(item, bool) else str(item)
    return [FieldRow(path, item if isinstance(item, bool) else str(text), str(text))]


def describe(entry: Entry) -> list[FieldRow]:
    """Every field of ``entry`` (nested ones as dotted paths), in schema order."""
    return _walk("", entry)


@dataclass(frozen=True, slots=True)
class ComparedRow:
    """One field across several entries, with each number's ratio to the first entry's."""

    path: str
    unit: str | None
    texts: tuple[str, ...]
    values: tuple[float | None, ...]  # the numbers (None where the field is not a number or absent)
    ratios: tuple[float | None, ...]
    raw: tuple[float | str | bool | None, ...] = ()  # each entry's value: a number, a text or a flag

    def as_json(self, ids: Sequence[str]) -> dict[str, Any]:
        """The row as a JSON-ready dict keyed by entry id: numbers in SI units, other fields (vendor,
        family, memory type, link) as their text, flags as booleans; null where an entry lacks the field."""
        raw = self.raw or self.values
        return {
            "field": self.path,
            "unit": self.unit,
            "values": dict(zip(ids, raw, strict=True)),
            "ratios_to_first": dict(zip(ids, self.ratios, strict=True)),
        }


def compare(entries: Sequence[Entry]) -> list[ComparedRow]:
    """Fields of ``entries`` side by side, in first-seen order; ratios only for numbers."""
    tables = [{row.path: row for row in describe(entry)} for entry in entries]
    paths = list(dict.fromkeys(path for table in tables for path in table))
    rows = []
    for path in paths:
        cells = [table.get(path) for table in tables]
        values = tuple(_number(cell) for cell in cells)
        first = values[0]
        ratios = tuple(
            v / first if v is not None and first is not None and first > 0 and math.isfinite(v) else None
            for v in values
        )
        unit = next((c.unit for c in cells if c is not None and c.unit), None)
        texts = tuple(cell.text if cell is not None else "-" for cell in cells)
        raw = tuple(cell.value if cell is not None else None for cell in cells)
        rows.append(ComparedRow(path, unit, texts, values, ratios, raw))
    return rows


def _number(cell: FieldRow | None) -> float | None:
    if cell is None or isinstance(cell.value, bool) or not isinstance(cell.value, int | float):
        return None
    return float(cell.value)


_HEADLINE_FIELDS = {
    "accelerator": ("form_factor", "memory_bytes", "memory_bandwidth_bytes_per_s", "dense_flop_per_s.bf16"),
    "link": ("per_device_bandwidth_per_direction_bytes_per_s", "num_links_per_device"),
    "switch": ("num_ports", "bandwidth_bidirectional_bytes_per_s"),
    "domain": ("num_accelerators", "aggregate_bandwidth_bidirectional_bytes_per_s"),
    "network": ("max_card_bandwidth_bits_per_s", "latency_s"),
    "instance": ("accelerator", "num_accelerators", "network.total_bandwidth_bits_per_s", "on_demand"),
    "storage": ("network_baseline_bytes_per_s_per_tib", "disk_baseline_write_bytes_per_s_per_tib"),
    "cluster": ("oversubscription", "generations[0].max_accelerators"),
}
_HEADLINE_LABELS = {
    "dense_flop_per_s.bf16": "BF16 dense",
    "memory_bytes": "mem",
    "memory_bandwidth_bytes_per_s": "mem bw",
    "per_device_bandwidth_per_direction_bytes_per_s": "per device, each way",
    "num_links_per_device": "links",
    "num_ports": "ports",
    "bandwidth_bidirectional_bytes_per_s": "bidir",
    "num_accelerators": "devices",
    "aggregate_bandwidth_bidirectional_bytes_per_s": "aggregate",
    "max_card_bandwidth_bits_per_s": "card",
    "latency_s": "latency",
    "network.total_bandwidth_bits_per_s": "network",
    "on_demand": "on-demand",
    "network_baseline_bytes_per_s_per_tib": "network/TiB",
    "disk_baseline_write_bytes_per_s_per_tib": "disk write/TiB",
    "oversubscription": "oversubscription",
    "generations[0].max_accelerators": "max devices",
}


def headline(entry: Entry) -> str:
    """A few key figures of ``entry`` on one line, for listings."""
    rows = {row.path: row for row in describe(entry)}
    parts = [
        f"{_HEADLINE_LABELS.get(path, '')} {rows[path].text}".strip()
        for path in _HEADLINE_FIELDS[entry.kind.value]
        if path in rows
    ]
    return ", ".join(parts)
