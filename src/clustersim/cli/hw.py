"""``clustersim hw``: browse the hardware catalog (list, show, compare)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from clustersim.catalog.describe import compare, describe, headline
from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.catalog.schema import Kind
from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors
from clustersim.errors import ClusterSimError

hw_app = typer.Typer(help="Browse the hardware catalog: accelerators, links, instances, storage.", no_args_is_help=True)


def _catalog(paths: list[Path] | None) -> Catalog:
    return load_catalog(paths or ())


@hw_app.command("list")
def hw_list(
    kind: Annotated[
        Kind | None, typer.Option("--kind", case_sensitive=False, help="Only entries of this kind.")
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """List catalog entries with a few key figures each."""
    with user_errors():
        entries = _catalog(catalog).list(kind)
    if as_json:
        emit_json(
            [
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
        )
        return
    table = Table(title=f"clustersim catalog: {kind.value if kind else 'all'} ({len(entries)} entries)")
    for column in ("id", "kind", "name", "key figures"):
        table.add_column(column, overflow="fold")
    for entry in entries:
        mark = " (preliminary)" if entry.preliminary else ""
        table.add_row(entry.id, entry.kind.value, entry.name + mark, headline(entry))
    console.print(table)


@hw_app.command("show")
def hw_show(
    name: Annotated[str, typer.Argument(help="Id or alias, e.g. h100-sxm, 'H100 SXM5', p5en.48xlarge.")],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Show every field of one entry with its unit and source."""
    with user_errors():
        cat = _catalog(catalog)
        entry = cat.get(name)
    if as_json:
        emit_json({"kind": entry.kind.value, "origin": cat.origins[entry.id], "entry": entry.model_dump(mode="json")})
        return
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
    console.print(table)
    if entry.aliases:
        console.print(f"aliases: {', '.join(entry.aliases)}")
    for note in entry.notes:
        console.print(f"note: {note}", highlight=False)


@hw_app.command("compare")
def hw_compare(
    names: Annotated[list[str], typer.Argument(help="Two or more ids or aliases; ratios are to the first.")],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Compare entries side by side, with each figure's ratio to the first entry."""
    with user_errors():
        if len(names) < 2:
            raise ClusterSimError(f"compare needs at least two entries, got {len(names)}: {', '.join(names)}")
        cat = _catalog(catalog)
        entries = [cat.get(name) for name in names]
        kinds = {e.kind for e in entries}
        if len(kinds) > 1:
            listed = ", ".join(f"{e.id} ({e.kind.value})" for e in entries)
            raise ClusterSimError(f"compare entries of one kind; got {listed}")
    rows = compare(entries)
    ids = [e.id for e in entries]
    if as_json:
        emit_json({"ids": ids, "fields": [row.as_json(ids) for row in rows]})
        return
    table = Table(title=f"{' vs '.join(ids)} (ratios to {ids[0]})")
    table.add_column("field", overflow="fold")
    for entry_id in ids:
        table.add_column(entry_id, overflow="fold")
    for row in rows:
        cells = [row.texts[0]]
        for text, ratio in zip(row.texts[1:], row.ratios[1:], strict=True):
            cells.append(text if ratio is None else f"{text} ({_ratio(ratio)})")
        table.add_row(row.path, *cells)
    console.print(table)


def _ratio(ratio: float) -> str:
    if abs(ratio - 1) < 0.005:
        return "="
    return f"{ratio:.2f}x, {100 * (ratio - 1):+.0f}%"
