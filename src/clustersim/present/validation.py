"""The validation report as rich tables (per file, summary, MAPE by source), lines of skipped cases, and
the cross-validation and profile tables of ``validate --cross-validate``.

``present`` and ``validation`` are sibling layers that do not import each other, so the report is
described here by the attributes the tables read (``ValidationReport`` of ``clustersim.validation``
has them). Each case's interval (from the residuals of every other source) is shown beside its
prediction, and per file and source the coverage (the share of measured values inside their interval)
and the median width of the intervals relative to the prediction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Protocol

from rich.console import RenderableType
from rich.markup import escape
from rich.table import Table

from clustersim.intervals import Interval

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
    @property
    def interval(self) -> Interval | None: ...


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
    @property
    def coverage(self) -> float | None: ...
    @property
    def median_width(self) -> float | None: ...


class SkippedCase(Protocol):
    """A case that was not scored (``clustersim.validation.scoring.Skipped``)."""

    @property
    def id(self) -> str: ...
    @property
    def reason(self) -> str: ...


class ChipGroup(Protocol):
    """The cases of one kind on one accelerator (``clustersim.validation.by_accelerator.AcceleratorGroup``)."""

    @property
    def kind(self) -> str: ...
    @property
    def accelerator(self) -> str: ...
    @property
    def cases(self) -> int: ...
    @property
    def mape(self) -> float: ...
    @property
    def left_out_cases(self) -> int: ...
    @property
    def left_out_mape(self) -> float | None: ...


class FeatureGroup(Protocol):
    """Training cases with one layout feature (``clustersim.validation.by_layout.LayoutGroup``)."""

    @property
    def feature(self) -> str: ...
    @property
    def cases(self) -> int: ...
    @property
    def mape(self) -> float | None: ...
    @property
    def left_out_cases(self) -> int: ...
    @property
    def left_out_mape(self) -> float | None: ...


class Report(Protocol):
    """A validation report (``clustersim.validation.scoring.ValidationReport``)."""

    @property
    def files(self) -> Sequence[ScoredFile]: ...
    @property
    def cases(self) -> Sequence[ScoredCase]: ...
    @property
    def skipped(self) -> Sequence[SkippedCase]: ...
    @property
    def level(self) -> float: ...
    def by_source(self) -> Sequence[tuple[str, str, int, float, ScoredCase]]: ...
    def fit_status(self, path: str, source: str) -> str: ...
    def interval_coverage(self, path: str, source: str | None = None) -> tuple[float, float] | None: ...
    def field_sources(self) -> Sequence[tuple[str, str, str, int, float, ScoredCase]]: ...
    def field_coverage(self, name: str, path: str, source: str) -> tuple[float, float] | None: ...
    @property
    def layout_groups(self) -> Sequence[FeatureGroup]: ...
    @property
    def accelerator_groups(self) -> Sequence[ChipGroup]: ...


class LeftOutSource(Protocol):
    """One source's MAPE with the shipped constants and left out (its cases' refit without it)."""

    @property
    def file(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def cases(self) -> int: ...
    @property
    def shipped_mape(self) -> float | None: ...
    @property
    def held_out_mape(self) -> float | None: ...


class SourceCrossValidation(LeftOutSource, Protocol):
    """One source's leave-one-source-out result (``clustersim.validation.crossval.SourceResult``)."""

    @property
    def fitted_cases(self) -> int: ...
    @property
    def in_sample_mape(self) -> float | None: ...
    @property
    def note(self) -> str: ...


class LatencyCrossValidation(LeftOutSource, Protocol):
    """One source's latency field left out (``clustersim.validation.crossval.LatencySource``)."""

    @property
    def field(self) -> str: ...


class NamedConstant(Protocol):
    """A fitted constant (``clustersim.validation.fit.Constant``)."""

    @property
    def name(self) -> str: ...


class ConstantProfile(Protocol):
    """The objective along one constant (``clustersim.validation.profile.Profile``)."""

    @property
    def group(self) -> str: ...
    @property
    def constant(self) -> NamedConstant: ...
    @property
    def value(self) -> float: ...
    @property
    def low(self) -> float: ...
    @property
    def high(self) -> float: ...
    @property
    def change(self) -> float: ...
    @property
    def flat(self) -> bool: ...
    @property
    def prior(self) -> bool: ...


def report_renderables(report: Report) -> list[RenderableType]:
    """Per-file case tables, a summary table and a table by source (``skipped_lines`` follow them)."""
    renderables: list[RenderableType] = []
    for file in report.files:
        rows = [c for c in report.cases if c.path == file.path]
        if rows:
            renderables.append(case_table(file.path, rows, report.level))
    renderables.append(summary_table(report.files, report.level))
    renderables.append(source_table(report.by_source(), report.fit_status, report.interval_coverage, report.level))
    latency = report.field_sources()
    if latency:
        renderables.append(latency_table(latency, report.field_coverage, report.level))
    if report.layout_groups:
        renderables.append(layout_table(report.layout_groups))
    if report.accelerator_groups:
        renderables.append(accelerator_table(report.accelerator_groups))
    return renderables


def layout_table(groups: Sequence[FeatureGroup]) -> Table:
    """Training cases by layout feature: cases and MAPE now, and the same cases' left-out MAPE."""
    table = Table(title="training by layout feature: MAPE now and left out (each case predicted without its source)")
    for column in ("feature", "cases", "MAPE %", "left-out cases", "left-out MAPE %"):
        table.add_column(column, justify="left" if column == "feature" else "right")
    for g in groups:
        left = "-" if g.left_out_mape is None else f"{100 * g.left_out_mape:.1f}"
        table.add_row(g.feature, str(g.cases), f"{100 * (g.mape or 0.0):.1f}", str(g.left_out_cases), left)
    return table


def accelerator_table(groups: Sequence[ChipGroup]) -> Table:
    """Cases by kind and accelerator: cases and MAPE now, and the same cases' left-out MAPE."""
    table = Table(title="by accelerator: MAPE now and left out (each case predicted without its source)")
    for column in ("kind", "accelerator", "cases", "MAPE %", "left-out cases", "left-out MAPE %"):
        table.add_column(column, justify="left" if column in ("kind", "accelerator") else "right")
    for g in groups:
        left = "-" if g.left_out_mape is None else f"{100 * g.left_out_mape:.1f}"
        table.add_row(g.kind, g.accelerator, str(g.cases), f"{100 * g.mape:.1f}", str(g.left_out_cases), left)
    return table


def latency_table(
    rows: Sequence[tuple[str, str, str, int, float, ScoredCase]],
    coverage: Callable[[str, str, str], tuple[float, float] | None] | None = None,
    level: float = 0.8,
) -> Table:
    """Per latency field (measured beside each case's primary field), file and source: cases, MAPE, worst and
    (given ``coverage``) the coverage and median width of that field's intervals."""
    table = Table(title="latency fields measured beside the primary one, by source")
    for column in (
        "field",
        "file",
        "source",
        "cases",
        "MAPE %",
        "worst",
        *(_interval_columns(level) if coverage else ()),
    ):
        table.add_column(column, overflow="fold")
    for name, path, source, count, mape, worst in rows:
        table.add_row(
            name,
            escape(path),
            escape(source),
            str(count),
            f"{100 * mape:.1f}",
            f"{escape(worst.id)} ({percent(worst.error)})",
            *(_interval_cells(coverage(name, path, source)) if coverage else ()),
        )
    return table


def case_table(path: str, rows: Sequence[ScoredCase], level: float = 0.8) -> Table:
    """One file's cases: id, field, predicted with its interval, measured, whether it fell inside, error."""
    table = Table(title=escape(path))
    for column in ("id", "field", "predicted", f"{level:.0%} interval", "measured", "inside", "error %"):
        table.add_column(column, overflow="fold", justify="left" if column in ("id", "field") else "right")
    for c in rows:
        interval = c.interval
        shown = "-" if interval is None else f"{interval.low:.4g}-{interval.high:.4g}"
        inside = "-" if interval is None else ("yes" if interval.contains(c.measured) else "no")
        table.add_row(escape(c.id), c.field, f"{c.predicted:.4g}", shown, f"{c.measured:.4g}", inside, percent(c.error))
    return table


def summary_table(files: Sequence[ScoredFile], level: float = 0.8) -> Table:
    """Per file: kind, cases scored, MAPE, worst case, Spearman, and the intervals' coverage and width."""
    table = Table(title="validation summary")
    for column in ("file", "kind", "cases", "MAPE %", "worst", "Spearman", *_interval_columns(level)):
        table.add_column(column, overflow="fold")
    for f in files:
        worst = (
            "-" if f.worst_id is None or f.worst_error is None else f"{escape(f.worst_id)} ({percent(f.worst_error)})"
        )
        mape = "-" if f.mape is None else f"{100 * f.mape:.1f}"
        rho = "-" if f.spearman is None else f"{f.spearman:.2f}"
        found = None if f.coverage is None or f.median_width is None else (f.coverage, f.median_width)
        table.add_row(escape(f.path), f.kind, str(f.cases), mape, worst, rho, *_interval_cells(found))
    return table


def source_table(
    by_source: Sequence[tuple[str, str, int, float, ScoredCase]],
    fit_status: Callable[[str, str], str] | None = None,
    coverage: Callable[[str, str], tuple[float, float] | None] | None = None,
    level: float = 0.8,
) -> Table:
    """Per file and source: cases, MAPE, worst case, (given ``fit_status``) whether the calibration was
    fitted on the source's cases (in-sample) or not (held-out), and (given ``coverage``) the intervals'
    coverage and median width."""
    table = Table(title="by source (the first word of each case's source)")
    columns = ("file", "source", "cases", "MAPE %", "worst", *(("fit",) if fit_status else ()))
    for column in (*columns, *(_interval_columns(level) if coverage else ())):
        table.add_column(column, overflow="fold")
    for path, source, count, mape, worst in by_source:
        status = (fit_status(path, source),) if fit_status else ()
        table.add_row(
            escape(path),
            escape(source),
            str(count),
            f"{100 * mape:.1f}",
            f"{escape(worst.id)} ({percent(worst.error)})",
            *status,
            *(_interval_cells(coverage(path, source)) if coverage else ()),
        )
    return table


def _interval_columns(level: float) -> tuple[str, str]:
    return f"coverage of {level:.0%} %", "median width %"


def _interval_cells(found: tuple[float, float] | None) -> tuple[str, str]:
    """Coverage and median relative width of the intervals, in percent (``-`` without intervals)."""
    if found is None:
        return "-", "-"
    return f"{100 * found[0]:.0f}", f"{100 * found[1]:.0f}"


def cross_validation_table(rows: Sequence[SourceCrossValidation]) -> Table:
    """Per file and source: MAPE with the shipped constants, refitted on every source (in-sample) and
    refitted without this source (left out), and a note."""
    table = Table(title="leave-one-source-out cross-validation (MAPE %)")
    for column in ("file", "source", "cases", "fitted", "shipped", "in-sample", "left out", "note"):
        table.add_column(column, overflow="fold", justify="left" if column in ("file", "source", "note") else "right")
    for r in rows:
        table.add_row(
            escape(r.file),
            escape(r.source),
            str(r.cases),
            str(r.fitted_cases),
            _mape(r.shipped_mape),
            _mape(r.in_sample_mape),
            _mape(r.held_out_mape),
            escape(r.note),
        )
    return table


def latency_cross_validation_table(rows: Sequence[LatencyCrossValidation]) -> Table:
    """Per latency field, file and source: the MAPE with the shipped constants and with those fitted without the
    source (left out), as the primary field's table gives them."""
    table = Table(title="leave-one-source-out cross-validation of the latency fields (MAPE %)")
    for column in ("field", "file", "source", "cases", "shipped", "left out"):
        table.add_column(column, overflow="fold", justify="left" if column in ("field", "file", "source") else "right")
    for r in rows:
        cells = (r.field, escape(r.file), escape(r.source), str(r.cases))
        table.add_row(*cells, _mape(r.shipped_mape), _mape(r.held_out_mape))
    return table


def profile_table(profiles: Sequence[tuple[str, ConstantProfile]]) -> Table:
    """Per constant of each in-sample fit: its value, the range tried, the largest change of the fit's
    objective over that range, and whether that is flat (the data cannot pin it) or a stated prior."""
    table = Table(title="profiles: the objective along each constant (flat: the data cannot pin it down)")
    for column in ("file", "constant", "value", "range tried", "objective change %", "flat", "prior"):
        table.add_column(column, overflow="fold")
    for path, p in profiles:
        table.add_row(
            escape(path),
            escape(p.constant.name),
            f"{p.value:.4g}",
            f"{p.low:.3g} - {p.high:.3g}",
            f"{100 * p.change:.2f}",
            "flat" if p.flat else "",
            "prior" if p.prior else "",
        )
    return table


def _mape(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}"


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
