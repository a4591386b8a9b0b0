"""Read ground-truth cases (JSON Lines, see ``shared/validation/README.md``) and score predictions.

A predictor per case kind turns a case into a predicted value of its primary measured field; the
report gives per case the error (``predicted / measured - 1``), and per file the mean absolute
error, the worst case and the Spearman rank correlation within groups sharing a model and system.
Kinds without a predictor are skipped, never guessed.
"""

from __future__ import annotations

import importlib
import json
import math
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError, validation_problems

KINDS = ("training", "inference", "collective", "memory")
PRIMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "training": ("step_time_s", "tokens_per_s_per_device", "model_tflops_per_device", "hw_tflops_per_device", "mfu"),
    "inference": ("output_tokens_per_s",),
    "collective": ("busbw_GBps", "algbw_GBps", "time_us"),
    "memory": ("total_GiB_per_device", "weights_and_optimizer_GiB_per_device", "activations_GiB_per_device"),
}
MIN_GROUP_CASES = 3

Predictor = Callable[[Mapping[str, Any], str, Catalog], float]
"""``(case as a plain dict, primary field name, catalog) -> predicted value in that field's units``.

Raises ``ClusterSimError`` when it cannot predict the case; the case is then skipped with the message.
"""


class Case(BaseModel):
    """One ground-truth case; unknown fields are ignored, null measured values dropped."""

    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)

    id: str
    kind: Literal["training", "inference", "collective", "memory"]
    source: str = ""
    notes: str | None = None
    measured: dict[str, float]
    model: dict[str, Any] | None = None
    system: dict[str, Any] | None = None
    parallel: dict[str, Any] | None = None
    precision: str | None = None
    workload: dict[str, Any] | None = None
    op: str | None = None
    size_bytes: int | None = None
    algorithm: str | None = None

    @field_validator("measured", mode="before")
    @classmethod
    def _drop_nulls(cls, value: Any) -> Any:
        return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


@dataclass(frozen=True)
class CaseScore:
    """A scored case; values in the units of ``field`` (the primary measured field)."""

    id: str
    kind: str
    predicted: float
    measured: float
    error: float  # predicted / measured - 1, a fraction
    field: str
    group: str  # cases sharing a model and system (collectives: op and system)
    path: str = ""
    source: str = ""  # the source's first word: its repository or first author


def source_key(source: str) -> str:
    """The first word of a case's ``source``: cases citing one repository or paper share it."""
    words = source.split()
    return words[0] if words else "(no source)"


def mape_by_source(cases: Iterable[CaseScore]) -> list[tuple[str, str, int, float, CaseScore]]:
    """Per file and source: (path, source, cases, MAPE as a fraction, worst case), in first-seen order."""
    groups: dict[tuple[str, str], list[CaseScore]] = {}
    for case in cases:
        groups.setdefault((case.path, case.source), []).append(case)
    return [
        (
            path,
            source,
            len(members),
            sum(abs(m.error) for m in members) / len(members),
            max(members, key=lambda m: abs(m.error)),
        )
        for (path, source), members in groups.items()
    ]


@dataclass(frozen=True)
class Skipped:
    """A case that was not scored, and why."""

    id: str
    reason: str
    path: str = ""


@dataclass(frozen=True)
class FileScore:
    """Scores of one file; ``mape``, ``worst_id`` and ``worst_error`` are None when nothing was scored.

    ``kind`` is the kind of the file's cases, ``"mixed"`` when they differ, ``"none"`` for an empty file.
    ``mape`` is a fraction; ``spearman`` is the mean over groups of at least three cases with
    non-constant predicted and measured values (None if there is no such group).
    """

    path: str
    kind: str
    cases: int
    mape: float | None
    worst_id: str | None
    worst_error: float | None
    spearman: float | None


@dataclass
class ValidationReport:
    """Per-file scores, per-case scores (in file order) and skipped cases."""

    files: list[FileScore] = field(default_factory=list)
    cases: list[CaseScore] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: a file with nothing scored has ``"mape": null`` and ``"worst": null``."""
        return {
            "files": [
                {
                    "path": f.path,
                    "kind": f.kind,
                    "cases": f.cases,
                    "mape": f.mape,
                    "worst": None if f.worst_id is None else {"id": f.worst_id, "error": f.worst_error},
                    "spearman": f.spearman,
                }
                for f in self.files
            ],
            "cases": [
                {"id": c.id, "kind": c.kind, "predicted": c.predicted, "measured": c.measured, "error": c.error}
                for c in self.cases
            ],
            "skipped": [{"id": s.id, "reason": s.reason} for s in self.skipped],
        }


def read_cases(path: str | Path) -> list[Case]:
    """The cases of a JSON Lines file; ``ClusterSimError`` naming the file and line for a bad line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ClusterSimError(f"{path}: no such ground-truth file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterSimError(f"{path}: cannot read: {exc}") from None
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ClusterSimError(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(raw, dict):
            raise ClusterSimError(f"{where}: a case must be a JSON object, got {type(raw).__name__}")
        missing = [key for key in ("id", "kind", "measured") if raw.get(key) is None]
        if missing:
            raise ClusterSimError(f"{where}: missing required field(s) {', '.join(missing)}")
        if raw["kind"] not in KINDS:
            raise ClusterSimError(f"{where}: unknown kind {raw['kind']!r} (valid: {', '.join(KINDS)})")
        try:
            case = Case.model_validate(raw)
        except ValidationError as exc:
            problems = validation_problems(exc.errors())
            raise ClusterSimError(f"{where}, case {raw['id']!r}: {problems}") from None
        if case.id in seen:
            raise ClusterSimError(f"{where}: duplicate id {case.id!r} (first on line {seen[case.id]})")
        seen[case.id] = number
        cases.append(case)
    return cases


def primary_field(case: Case) -> str:
    """The first measured field present in ``PRIMARY_FIELDS[case.kind]`` order."""
    for name in PRIMARY_FIELDS[case.kind]:
        if case.measured.get(name) is not None:
            return name
    wanted = ", ".join(PRIMARY_FIELDS[case.kind])
    raise ClusterSimError(f"case {case.id!r}: measured has none of {wanted} (has: {', '.join(case.measured)})")


def group_key(case: Case) -> str:
    """Cases with the same key share a model and system (collectives: an op and system)."""
    system = json.dumps(case.system, sort_keys=True)
    if case.kind == "collective":
        return f"{case.op} {system}"
    return f"{json.dumps(case.model, sort_keys=True)} {system}"


# Where each kind's predictor lives: (module, function). A module not installed yet is skipped.
PREDICTOR_MODULES: dict[str, tuple[str, str]] = {
    "collective": ("clustersim.validation.collective", "predict_collective_case"),
    "training": ("clustersim.validation.training", "predict_training_case"),
    "memory": ("clustersim.validation.training", "predict_memory_case"),
    "inference": ("clustersim.validation.inference", "predict_inference_case"),
}


def default_predictors() -> dict[str, Predictor]:
    """The predictors available in this installation, by case kind."""
    predictors: dict[str, Predictor] = {}
    for kind, (module_name, function) in PREDICTOR_MODULES.items():
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise  # the module exists but is broken: a bug, not a missing model
            continue
        predictors[kind] = getattr(module, function)
    return predictors


def rank_average(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """1-based ranks; tied values get the mean of their ranks."""
    _, inverse, counts = np.unique(np.asarray(values, dtype=float), return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse]


def spearman(predicted: Sequence[float], measured: Sequence[float]) -> float | None:
    """Spearman rank correlation (average ranks for ties); None if either side is constant or n < 2."""
    if len(predicted) != len(measured):
        raise ValueError("spearman needs sequences of equal length")
    if len(predicted) < 2:
        return None
    a, b = rank_average(predicted), rank_average(measured)
    a, b = a - a.mean(), b - b.mean()
    norm = math.sqrt(float(np.dot(a, a)) * float(np.dot(b, b)))
    if norm == 0.0:
        return None
    return max(-1.0, min(1.0, float(np.dot(a, b)) / norm))


def score_file(path: str, kinds: Iterable[str], scores: Sequence[CaseScore]) -> FileScore:
    """Summarize the scored cases of one file (``kinds``: the kinds of all its cases)."""
    counted = Counter(kinds)
    kind = next(iter(counted)) if len(counted) == 1 else ("none" if not counted else "mixed")
    if not scores:
        return FileScore(path, kind, 0, None, None, None, None)
    worst = max(scores, key=lambda s: abs(s.error))
    groups: dict[str, list[CaseScore]] = {}
    for score in scores:
        groups.setdefault(score.group, []).append(score)
    rhos = [
        rho
        for members in groups.values()
        if len(members) >= MIN_GROUP_CASES
        and (rho := spearman([m.predicted for m in members], [m.measured for m in members])) is not None
    ]
    mape = sum(abs(s.error) for s in scores) / len(scores)
    return FileScore(path, kind, len(scores), mape, worst.id, worst.error, sum(rhos) / len(rhos) if rhos else None)


def validate_cases(
    paths: Sequence[str | Path],
    catalog: Catalog,
    predictors: Mapping[str, Predictor] | None = None,
    *,
    min_size_bytes: float | None = None,
) -> ValidationReport:
    """Score every case of every file; ``min_size_bytes`` skips smaller (or unsized) collective cases."""
    if predictors is None:
        predictors = default_predictors()
    report = ValidationReport()
    for path in paths:
        cases = read_cases(path)
        scores: list[CaseScore] = []
        for case in cases:
            outcome = _score_case(case, catalog, predictors, min_size_bytes, str(path))
            if isinstance(outcome, CaseScore):
                scores.append(outcome)
            else:
                report.skipped.append(outcome)
        report.cases.extend(scores)
        report.files.append(score_file(str(path), (c.kind for c in cases), scores))
    return report


def _score_case(
    case: Case, catalog: Catalog, predictors: Mapping[str, Predictor], min_size_bytes: float | None, path: str
) -> CaseScore | Skipped:
    predictor = predictors.get(case.kind)
    if predictor is None:
        return Skipped(case.id, f"no model for kind '{case.kind}' yet", path)
    if min_size_bytes is not None and case.kind == "collective" and (case.size_bytes or 0) < min_size_bytes:
        return Skipped(case.id, f"size_bytes below the minimum of {min_size_bytes:.0f} bytes", path)
    try:
        name = primary_field(case)
        measured = case.measured[name]
        if measured == 0:
            raise ClusterSimError(f"measured {name} is 0: no relative error")
        predicted = float(predictor(case.model_dump(), name, catalog))
    except ClusterSimError as exc:
        return Skipped(case.id, str(exc), path)
    if not math.isfinite(predicted):
        return Skipped(case.id, f"predicted {name} is {predicted}", path)
    error = predicted / measured - 1
    return CaseScore(
        case.id, case.kind, predicted, measured, error, name, group_key(case), path, source_key(case.source)
    )
