"""The residuals of the project's own cases that no fit used: their prediction with the packaged
constants is already held out (``benchmarks/calibrate_intervals.py`` adds them to the cross-validated
residuals of the bundled ground truth)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from clustersim.catalog.registry import Catalog
from clustersim.intervals import Residual
from clustersim.intervals.residuals import KINDS as INTERVAL_KINDS
from clustersim.validation.cases import bundled_dir, read_cases, source_key
from clustersim.validation.intervals import CASE_FILES, Prediction, residuals_of
from clustersim.validation.run import validate_cases


def unfitted_residuals(paths: Sequence[Path], catalog: Catalog) -> tuple[list[Residual], list[tuple[str, str]]]:
    """The residuals of the cases of ``paths`` whose source no fit used (neither the case nor another
    of its source in a manifest's ``fitted_on``): their prediction with the packaged constants is then
    already held out (the project's own cases of new sources, held out until a fit uses them), and so the
    residuals of their measured latency fields; ``(id, reason)`` of the cases left out."""
    report = validate_cases(paths, catalog)
    cases = {c.id: c for path in paths for c in read_cases(path)}
    fitted_sources = _fitted_sources(report.fitted_on)
    held: list[Prediction] = []
    left: list[tuple[str, str]] = [(s.id, s.reason) for s in report.skipped]
    scores = [(s, True) for s in report.cases] + [(s, False) for s in report.field_cases]  # then the latencies
    for score, primary in scores:
        if score.kind not in INTERVAL_KINDS:
            if primary:
                left.append((score.id, f"{score.kind} figures have no intervals to size"))
            continue
        fitted = report.fitted_on.get(score.kind, frozenset())
        if fitted is None or score.id in fitted or score.source in fitted_sources.get(score.kind, set()):
            if primary:  # a case is listed once, by its primary figure
                left.append((score.id, f"its source, {score.source}, was fitted on: its prediction is not held out"))
            continue
        held.append(Prediction(score.id, score.kind, score.source, score.field, score.measured, score.predicted))
    rows, unreadable = residuals_of(held, cases, catalog)
    return rows, left + unreadable


def _fitted_sources(fitted_on: Mapping[str, frozenset[str] | None]) -> dict[str, set[str]]:
    """Per kind, the sources (``cases.source_key``) of the bundled cases the packaged constants were
    fitted on: another case of such a source is not held out, even where its own id was not fitted."""
    found: dict[str, set[str]] = {}
    for name in CASE_FILES:
        for case in read_cases(bundled_dir() / name):
            if case.id in (fitted_on.get(case.kind) or ()):
                found.setdefault(case.kind, set()).add(source_key(case.source))
    return found
