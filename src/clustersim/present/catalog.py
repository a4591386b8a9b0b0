"""Catalog entries as rich renderables and JSON: the listing, one entry's fields with units and sources,
and entries side by side with ratios to the first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from clustersim.catalog.describe import compare, describe, headline
from clustersim.catalog.instance_figures import InstanceFigure
from clustersim.catalog.kinds import Kind
from clustersim.catalog.schema import Entry


def list_json(entries: Sequence[Entry]) -> list[dict[str, Any]]:
    """Each entry's id, kind, name, aliases, whether preliminary, and its key figures in words."""
    return [
        {
            "id": e.id,
            "kind": e.kind.value,
            "name": e.name,
            "aliases": list(e.aliases),
            "preliminary": e.preliminary,
            "summary": headline(e),
        }
        for e in entries
    ]


def list_table(entries: Sequence[Entry], kind: Kind | None) -> Table:
    """One row per entry with its key figures."""
    table = Table(title=f"clustersim catalog: {kind.value if kind else 'all'} ({len(entries)} entries)")
    for column in ("id", "kind", "name", "key figures"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        mark = " (preliminary)" if entry.preliminary else ""
        table.add_row(entry.id, entry.kind.value, entry.name + mark, headline(entry))
    return table


def show_json(entry: Entry, origin: str) -> dict[str, Any]:
    """The entry's kind, the file it came from, and every field (SI units, sources)."""
    return {"kind": entry.kind.value, "origin": origin, "entry": entry.model_dump(mode="json")}


def show_view(entry: Entry) -> list[RenderableType]:
    """Every field with its value, basis and source; then the aliases and the notes."""
    title = f"{entry.name} [{entry.kind.value} {entry.id}]" + (" (preliminary)" if entry.preliminary else "")
    table = Table(title=title, caption=entry.description)
    for column in ("field", "value", "basis", "source"):
        table.add_column(column, overflow="fold")
    for row in describe(entry):
        source = row.source or ""
        if row.confidence and row.confidence != "verified":
            source += f" [{row.confidence}]"
        if row.note:
            source += f"\nnote: {row.note}"
        table.add_row(row.path, row.text, row.basis or "", source)
    lines: list[RenderableType] = [table]
    if entry.aliases:
        lines.append(f"aliases: {', '.join(entry.aliases)}")
    lines += [Text.from_markup(f"note: {note}") for note in entry.notes]
    return lines


def compare_json(entries: Sequence[Entry], figures: Sequence[InstanceFigure] = ()) -> dict[str, Any]:
    """The ids and every field's values and ratios to the first; for instances, also the decision
    ``figures`` (per instance and per device, with the reason for each ratio)."""
    ids = [e.id for e in entries]
    data: dict[str, Any] = {"ids": ids, "fields": [row.as_json(ids) for row in compare(entries)]}
    if figures:
        data["figures"] = [figure.as_json(ids) for figure in figures]
    return data


def figures_table(ids: Sequence[str], figures: Sequence[InstanceFigure]) -> Table:
    """The decision figures side by side: each value, its ratio to the first and why."""
    table = Table(title=f"{' vs '.join(ids)}: what you buy (ratios to {ids[0]}, and why)")
    table.add_column("figure", overflow="fold")
    for entry_id in ids:
        table.add_column(entry_id, overflow="fold")
    for row in figures:
        cells = [row.texts[0]]
        for text, ratio, reason in zip(row.texts[1:], row.ratios[1:], row.reasons[1:], strict=True):
            if ratio is None:
                cells.append(f"{text} ({reason})" if reason else text)
            elif reason == "same":
                cells.append(f"{text} (=)")
            else:
                cells.append(f"{text} ({reason})")
        table.add_row(row.label, *cells)
    return table


def compare_table(entries: Sequence[Entry]) -> Table:
    """Fields side by side, each with its ratio to the first entry."""
    ids = [e.id for e in entries]
    table = Table(title=f"{' vs '.join(ids)} (ratios to {ids[0]})")
    table.add_column("field", overflow="fold")
    for entry_id in ids:
        table.add_column(entry_id, overflow="fold")
    for row in compare(entries):
        cells = [row.texts[0]]
        for text, ratio in zip(row.texts[1:], row.ratios[1:], strict=True):
            cells.append(text if ratio is None else f"{text} ({ratio_text(ratio)})")
        table.add_row(row.path, *cells)
    return table


def ratio_text(ratio: float) -> str:
    """``=`` within half a percent, else ``1.76x, +76%``."""
    if abs(ratio - 1) < 0.005:
        return "="
    return f"{ratio:.2f}x, {100 * (ratio - 1):+.0f}%"
