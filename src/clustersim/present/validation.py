"""The validation report as rich tables (per file, summary, MAPE by source) and lines of skipped cases.

``present`` and ``validation`` are sibling layers that do not import each other, so the report is
described here by the attributes the tables read (``ValidationReport`` of ``clustersim.validation``
has them).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Protocol

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

SHOWN_SKIPPED_IDS = 3


class ScoredCase(Protocol):
    """A scored case (``clustersim.validation.scoring.CaseScore``)."""

    @property
    def id(self) -> str: ...
    @property
    def field(self) -> str: ...
    @property
    def predicted(self) -> float: ...
    @property
    def measured(self) -> float: ...
    @property
    def error(self) -> float: ...
    @property
    def path(self) -> str: ...


class ScoredFile(Protocol):
    """A file's scores (``clustersim.validation.scoring.FileScore``)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def cases(self) -> int: ...
    @property
    def mape(self) -> float | None: ...
    @property
    def worst_id(self) -> str | None: ...
    @property
    def worst_error(self) -> float | None: ...
    @property
    def spearman(self) -> float | None: ...


class SkippedCase(Protocol):
    """A case that was not scored (``clustersim.validation.scoring.Skipped``)."""

    @property
    def id(self) -> str: ...
    @property
    def reason(self) -> str: ...


class Report(Protocol):
    """A validation report (``clustersim.validation.scoring.ValidationReport``)."""

    @property
    def files(self) -> Sequence[ScoredFile]: ...
    @property
    def cases(self) -> Sequence[ScoredCase]: ...
    @property
    def skipped(self) -> Sequence[SkippedCase]: ...
    def by_source(self) -> Sequence[tuple[str, str, int, float, ScoredCase]]: ...


def report_renderables(report: Report) -> list[RenderableType]:
    """Per-file case tables, a summary table and a table by source (``skipped_lines`` follow them)."""
    renderables: list[RenderableType] = []
    for file in report.files:
        rows = [c for c in report.cases if c.path == file.path]
        if rows:
            renderables.append(case_table(file.path, rows))
    renderables.append(summary_table(report.files))
    renderables.append(source_table(report.by_source()))
    return renderables


def case_table(path: str, rows: Sequence[ScoredCase]) -> Table:
    """One file's cases: id, field, predicted, measured and error."""
    table = Table(title=escape(path))
    for column in ("id", "field", "predicted", "measured", "error %"):
        table.add_column(column, overflow="fold", justify="left" if column in ("id", "field") else "right")
    for c in rows:
        table.add_row(escape(c.id), c.field, f"{c.predicted:.4g}", f"{c.measured:.4g}", percent(c.error))
    return table


def summary_table(files: Sequence[ScoredFile]) -> Table:
    """Per file: kind, cases scored, MAPE, worst case and Spearman."""
    table = Table(title="validation summary")
    for column in ("file", "kind", "cases", "MAPE %", "worst", "Spearman"):
        table.add_column(column, overflow="fold")
    for f in files:
        worst = (
            "-" if f.worst_id is None or f.worst_error is None else f"{escape(f.worst_id)} ({percent(f.worst_error)})"
        )
        mape = "-" if f.mape is None else f"{100 * f.mape:.1f}"
        rho = "-" if f.spearman is None else f"{f.spearman:.2f}"
        table.add_row(escape(f.path), f.kind, str(f.cases), mape, worst, rho)
    return table


def source_table(by_source: Sequence[tuple[str, str, int, float, ScoredCase]]) -> Table:
    """Per file and source: cases, MAPE and worst case."""
    table = Table(title="by source (the first word of each case's source)")
    for column in ("file", "source", "cases", "MAPE %", "worst"):
        table.add_column(column, overflow="fold")
    for path, source, count, mape, worst in by_source:
        table.add_row(
            escape(path),
            escape(source),
            str(count),
            f"{100 * mape:.1f}",
            f"{escape(worst.id)} ({percent(worst.error)})",
        )
    return table


def skipped_lines(skipped: Sequence[SkippedCase]) -> list[str]:
    """Plain text, to print unwrapped and without markup: a count, then one line per reason (most
    common first) with the first few ids."""
    if not skipped:
        return []
    lines = [f"skipped {len(skipped)} case(s):"]
    by_reason: dict[str, list[str]] = {}
    for s in skipped:
        by_reason.setdefault(s.reason, []).append(s.id)
    for reason, count in Counter({r: len(ids) for r, ids in by_reason.items()}).most_common():
        ids = by_reason[reason]
        more = f", ... ({count - SHOWN_SKIPPED_IDS} more)" if count > SHOWN_SKIPPED_IDS else ""
        lines.append(f"  {count} x {reason}: {', '.join(ids[:SHOWN_SKIPPED_IDS])}{more}")
    return lines


def percent(fraction: float) -> str:
    """A signed percentage with one decimal, e.g. ``+10.0%``."""
    return f"{100 * fraction:+.1f}%"
