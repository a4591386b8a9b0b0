"""``clustersim validate``: score the model against ground-truth cases (JSON Lines files)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from clustersim.catalog.registry import load_catalog
from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors
from clustersim.units import parse_bytes
from clustersim.validation.run import CaseScore, FileScore, Skipped, ValidationReport, mape_by_source, validate_cases

SHOWN_SKIPPED_IDS = 3


def validate_command(
    files: Annotated[
        list[Path], typer.Argument(help="Ground-truth files (JSON Lines), e.g. ../shared/validation/*.jsonl.")
    ],
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    min_size: Annotated[
        str | None,
        typer.Option("--min-size", help="Only score collective cases with size_bytes at least this, e.g. 64MiB."),
    ] = None,
) -> None:
    """Compare predictions with measured cases: error per case, MAPE, worst case and Spearman per file."""
    with user_errors():
        min_size_bytes = parse_bytes(min_size) if min_size is not None else None
        report = validate_cases(files, load_catalog(catalog or ()), min_size_bytes=min_size_bytes)
    if as_json:
        emit_json(report.to_json())
        return
    print_report(report, console)


def print_report(report: ValidationReport, console: Console) -> None:
    """Per-file case tables, a summary table and the skipped cases counted by reason."""
    for file in report.files:
        rows = [c for c in report.cases if c.path == file.path]
        if rows:
            console.print(_case_table(file.path, rows))
    console.print(_summary_table(report.files))
    console.print(_source_table(report.cases))
    _print_skipped(report.skipped, console)


def _case_table(path: str, rows: list[CaseScore]) -> Table:
    table = Table(title=escape(path))
    for column in ("id", "field", "predicted", "measured", "error %"):
        table.add_column(column, overflow="fold", justify="left" if column in ("id", "field") else "right")
    for c in rows:
        table.add_row(escape(c.id), c.field, f"{c.predicted:.4g}", f"{c.measured:.4g}", _percent(c.error))
    return table


def _summary_table(files: list[FileScore]) -> Table:
    table = Table(title="validation summary")
    for column in ("file", "kind", "cases", "MAPE %", "worst", "Spearman"):
        table.add_column(column, overflow="fold")
    for f in files:
        worst = (
            "-" if f.worst_id is None or f.worst_error is None else f"{escape(f.worst_id)} ({_percent(f.worst_error)})"
        )
        mape = "-" if f.mape is None else f"{100 * f.mape:.1f}"
        rho = "-" if f.spearman is None else f"{f.spearman:.2f}"
        table.add_row(escape(f.path), f.kind, str(f.cases), mape, worst, rho)
    return table


def _source_table(cases: list[CaseScore]) -> Table:
    table = Table(title="by source (the first word of each case's source)")
    for column in ("file", "source", "cases", "MAPE %", "worst"):
        table.add_column(column, overflow="fold")
    for path, source, count, mape, worst in mape_by_source(cases):
        table.add_row(
            escape(path),
            escape(source),
            str(count),
            f"{100 * mape:.1f}",
            f"{escape(worst.id)} ({_percent(worst.error)})",
        )
    return table


def _print_skipped(skipped: list[Skipped], console: Console) -> None:
    if not skipped:
        return
    console.print(f"skipped {len(skipped)} case(s):", highlight=False)
    by_reason: dict[str, list[str]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s.id)
    for reason, count in Counter({r: len(ids) for r, ids in by_reason.items()}).most_common():
        ids = by_reason[reason]
        more = f", ... ({count - SHOWN_SKIPPED_IDS} more)" if count > SHOWN_SKIPPED_IDS else ""
        line = f"  {count} x {reason}: {', '.join(ids[:SHOWN_SKIPPED_IDS])}{more}"
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _percent(fraction: float) -> str:
    return f"{100 * fraction:+.1f}%"
