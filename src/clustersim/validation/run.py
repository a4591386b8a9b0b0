"""Score the models against ground-truth files: one adapter per case kind, named in ``PREDICTORS``.

A predictor turns a typed case into a predicted value of its primary measured field; the report
gives per case the error (``predicted / measured - 1``), and per file the mean absolute error, the
worst case and the Spearman rank correlation within groups sharing a model and system. Kinds
without a predictor are skipped, never guessed. With no files, the ground truth bundled inside the
package is scored (``validate_bundled``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.intervals import DEFAULT_LEVEL, ResidualTable, check_level, load_residuals
from clustersim.intervals.residuals import MEASURED_LATENCY_FIELDS
from clustersim.validation.by_accelerator import accelerator_groups
from clustersim.validation.by_layout import layout_groups
from clustersim.validation.cases import Case, default_case_files, primary_field, read_cases, source_key
from clustersim.validation.collective import predict_collective_case
from clustersim.validation.inference import engine_fitted_case, predict_inference_case
from clustersim.validation.intervals import case_interval, training_layout
from clustersim.validation.manifest import fitted_on_by_kind
from clustersim.validation.scoring import CaseScore, Skipped, ValidationReport, group_key, score_file
from clustersim.validation.training import case_assumptions, predict_memory_case, predict_training_case

__all__ = [
    "PREDICTORS",
    "Predictor",
    "default_predictors",
    "primary_field",
    "read_cases",
    "validate_bundled",
    "validate_cases",
]

Predictor = Callable[[Case, str, Catalog], float]
"""``(case, primary field name, catalog) -> predicted value in that field's units``.

Raises ``ClusterSimError`` when it cannot predict the case; the case is then skipped with the message.
"""

PREDICTORS: dict[str, Predictor] = {
    "collective": predict_collective_case,
    "training": predict_training_case,
    "memory": predict_memory_case,
    "inference": predict_inference_case,
}
"""The adapter of each case kind."""

LATENCY_FIELDS: dict[str, tuple[str, ...]] = {"inference": tuple(MEASURED_LATENCY_FIELDS)}
"""Per case kind, the measured fields scored beside the primary one (each its own figures per file and
source: a latency error is not averaged into a throughput error)."""

ASSUMPTIONS: dict[str, Callable[[Case, Catalog], Mapping[str, Any]]] = {
    "training": case_assumptions,
    "memory": case_assumptions,
}
"""Per case kind, what the packaged predictor takes a case's null fields to be (field -> value), reported
with its score (empty for a predictor given in its place)."""


def default_predictors() -> dict[str, Predictor]:
    """A copy of ``PREDICTORS``: the predictor of each case kind."""
    return dict(PREDICTORS)


def validate_cases(
    paths: Sequence[str | Path],
    catalog: Catalog,
    predictors: Mapping[str, Predictor] | None = None,
    *,
    min_size_bytes: float | None = None,
    level: float = DEFAULT_LEVEL,
    residuals: ResidualTable | None = None,
) -> ValidationReport:
    """Score every case of every file; ``min_size_bytes`` skips smaller (or unsized) collective cases.
    Each case gets an interval at ``level`` from the residuals (None: the packaged ones) of every other
    source (``clustersim.validation.intervals.case_interval``).

    Files are named in the report as given.
    """
    files = [(str(path), Path(path)) for path in paths]
    return _validate(files, catalog, predictors, min_size_bytes, check_level(level), residuals)


def validate_bundled(
    catalog: Catalog,
    predictors: Mapping[str, Predictor] | None = None,
    *,
    min_size_bytes: float | None = None,
    level: float = DEFAULT_LEVEL,
    residuals: ResidualTable | None = None,
) -> ValidationReport:
    """Score the default ground-truth files (``default_case_files``: the bundled copy of the shared
    ground truth, then the project's own), named in the report as that function names them."""
    files = default_case_files()
    return _validate(files, catalog, predictors, min_size_bytes, check_level(level), residuals)


def _validate(
    files: Sequence[tuple[str, Path]],
    catalog: Catalog,
    predictors: Mapping[str, Predictor] | None,
    min_size_bytes: float | None,
    level: float = DEFAULT_LEVEL,
    residuals: ResidualTable | None = None,
) -> ValidationReport:
    if predictors is None:
        predictors = PREDICTORS
    report = ValidationReport(level=level)
    engine_fitted: set[str] = set()
    for name, path in files:
        cases = read_cases(path)
        engine_fitted |= {c.id for c in cases if c.kind == "inference" and engine_fitted_case(c)}
        scores: list[CaseScore] = []
        latency: list[CaseScore] = []
        for case in cases:
            outcome = _score_case(case, catalog, predictors, min_size_bytes, name)
            if isinstance(outcome, CaseScore):
                interval = case_interval(case, outcome.field, outcome.predicted, outcome.source, catalog,
                                         level=level, table=residuals)  # fmt: skip
                scores.append(dataclasses.replace(outcome, interval=interval))
                fields, unscored = _score_latency(case, outcome, catalog, predictors, level, residuals, name)
                latency += fields
                report.skipped.extend(unscored)
            else:
                report.skipped.append(outcome)
        report.cases.extend(scores)
        report.files.append(score_file(name, (c.kind for c in cases), scores))
        report.field_cases.extend(latency)
        for field in dict.fromkeys(s.field for s in latency):
            of_field = [s for s in latency if s.field == field]
            report.field_files.append(
                dataclasses.replace(score_file(name, (s.kind for s in of_field), of_field), field=field)
            )
    table = load_residuals() if residuals is None else residuals
    report.layout_groups = layout_groups(report.cases, table)
    report.accelerator_groups = accelerator_groups(report.cases, table)
    report.fitted_on = fitted_on_by_kind()
    if engine_fitted:  # the Neuron engines' pair is fitted outside the calibration files' manifests
        report.fitted_on["inference"] = frozenset(report.fitted_on.get("inference") or ()) | engine_fitted
    return report


def _score_latency(
    case: Case,
    primary: CaseScore,
    catalog: Catalog,
    predictors: Mapping[str, Predictor],
    level: float,
    residuals: ResidualTable | None,
    path: str,
) -> tuple[list[CaseScore], list[Skipped]]:
    """The case's measured latency fields (``LATENCY_FIELDS``) other than its primary one, each scored
    by the same predictor with its interval from that field's residuals of the other sources; one it cannot
    predict is reported skipped, as ``case-id field`` with the reason (the primary score stands)."""
    out, skipped = [], []
    for field in LATENCY_FIELDS.get(case.kind, ()):
        measured = case.measured.get(field)
        if field == primary.field or not measured:
            continue
        try:
            predicted = float(predictors[case.kind](case, field, catalog))
        except ClusterSimError as exc:
            reason = str(exc) if str(exc).startswith(f"{field}: ") else f"{field}: {exc}"
            skipped.append(Skipped(f"{case.id} {field}", reason, path))
            continue
        if math.isfinite(predicted):
            interval = case_interval(case, field, predicted, primary.source, catalog, level=level, table=residuals)
            out.append(dataclasses.replace(primary, predicted=predicted, measured=measured,
                                           error=predicted / measured - 1, field=field, interval=interval))  # fmt: skip
    return out, skipped


def _score_case(
    case: Case, catalog: Catalog, predictors: Mapping[str, Predictor], min_size_bytes: float | None, path: str
) -> CaseScore | Skipped:
    predictor = predictors.get(case.kind)
    if predictor is None:
        return Skipped(case.id, f"no model for kind '{case.kind}' yet", path)
    if min_size_bytes is not None and case.kind == "collective" and (case.size_bytes or 0) < min_size_bytes:
        size = "no size" if case.size_bytes is None else f"size {case.size_bytes:,.0f} bytes"
        return Skipped(case.id, f"{size}, below --min-size ({min_size_bytes:,.0f} bytes)", path)
    try:
        name = primary_field(case)
        measured = case.measured[name]
        if measured == 0:
            raise ClusterSimError(f"measured {name} is 0: no relative error")
        predicted = float(predictor(case, name, catalog))
        packaged = predictor is PREDICTORS.get(case.kind) and case.kind in ASSUMPTIONS
        assumed = dict(ASSUMPTIONS[case.kind](case, catalog)) if packaged else {}
        layout = training_layout(case, catalog) if packaged and case.kind == "training" else ()
    except ClusterSimError as exc:
        return Skipped(case.id, str(exc), path)
    if not math.isfinite(predicted):
        return Skipped(case.id, f"predicted {name} is {predicted}", path)
    error = predicted / measured - 1
    return CaseScore(
        case.id, case.kind, predicted, measured, error, name, group_key(case), path, source_key(case.source), assumed,
        layout=layout, accelerator=case.system.accelerator if case.system and case.system.accelerator else "",
    )  # fmt: skip
