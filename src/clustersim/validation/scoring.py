"""Scoring predictions against measurements: error per case, MAPE, worst case and Spearman per file.

Error = ``predicted / measured - 1`` (a fraction). Spearman is computed within groups of cases
that share a model and system (collectives: an op and system), with average ranks for ties.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustersim.intervals import DEFAULT_LEVEL, Interval
from clustersim.validation.by_accelerator import AcceleratorGroup
from clustersim.validation.by_layout import LayoutGroup
from clustersim.validation.cases import Case
from clustersim.validation.intervals import coverage

MIN_GROUP_CASES = 3
NO_MANIFEST = "no manifest"
NOT_FITTED = "no fitted constants"


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
    # the fields the case leaves null -> the values assumed for them (``field`` above shadows dataclasses.field)
    assumed: dict[str, Any] = dataclasses.field(default_factory=dict)
    interval: Interval | None = None  # from the residuals of every other source (validation.intervals)
    layout: tuple[str, ...] = ()  # a training case's layout features (clustersim.intervals.layout)
    accelerator: str = ""  # the case's system.accelerator as written (collectives and memory too)


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
    coverage: float | None = None  # share of cases whose measured value is inside its interval
    median_width: float | None = None  # median (high - low) / predicted of the intervals
    field: str | None = None  # a latency field's own figures (None: each case's primary field)


@dataclass
class ValidationReport:
    """Per-file scores, per-case scores (in file order) and skipped cases; ``fitted_on``: per case
    kind with fitted constants, the ids of the cases they were fitted on (None: no manifest says)."""

    files: list[FileScore] = field(default_factory=list)
    cases: list[CaseScore] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    fitted_on: dict[str, frozenset[str] | None] = field(default_factory=dict)
    level: float = DEFAULT_LEVEL  # of the cases' intervals
    # latency fields measured beside the primary one (run.LATENCY_FIELDS): per case, and per file and field
    field_cases: list[CaseScore] = field(default_factory=list)
    field_files: list[FileScore] = field(default_factory=list)
    layout_groups: list[LayoutGroup] = field(default_factory=list)  # training MAPE by layout feature
    accelerator_groups: list[AcceleratorGroup] = field(default_factory=list)  # MAPE by kind and accelerator

    def interval_coverage(self, path: str, source: str | None = None) -> tuple[float, float] | None:
        """Coverage and median relative width of the intervals of file ``path`` (and ``source``)."""
        members = [c for c in self.cases if c.path == path and (source is None or c.source == source)]
        return coverage([(c.measured, c.predicted, c.interval) for c in members])

    def field_coverage(self, name: str, path: str, source: str) -> tuple[float, float] | None:
        """Coverage and median relative width of latency field ``name``'s intervals in file ``path`` from ``source``."""
        members = [c for c in self.field_cases if c.field == name and c.path == path and c.source == source]
        return coverage([(c.measured, c.predicted, c.interval) for c in members])

    def by_source(self) -> list[tuple[str, str, int, float, CaseScore]]:
        """``mape_by_source`` of the scored cases."""
        return mape_by_source(self.cases)

    def fit_status(self, path: str, source: str) -> str:
        """Whether the cases of ``source`` in file ``path`` were fitted on: ``in-sample``, ``held-out``,
        ``in-sample k/n``, ``no manifest`` (the calibration does not say), or ``no fitted constants``."""
        members = [c for c in self.cases if c.path == path and c.source == source]
        kinds = {c.kind for c in members} & set(self.fitted_on)
        if not kinds:
            return NOT_FITTED
        known = [self.fitted_on[k] for k in kinds]
        if any(ids is None for ids in known):
            return NO_MANIFEST
        return fit_status([c.id for c in members], frozenset().union(*(ids for ids in known if ids is not None)))

    def field_sources(self) -> list[tuple[str, str, str, int, float, CaseScore]]:
        """Per latency field, file and source: (field, path, source, cases, MAPE as a fraction, worst case)."""
        fields = dict.fromkeys(c.field for c in self.field_cases)
        return [
            (name, *row) for name in fields for row in mape_by_source(c for c in self.field_cases if c.field == name)
        ]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: a file with nothing scored has ``"mape": null`` and ``"worst": null``; ``fields``,
        ``field_sources`` and ``field_cases`` score the latency fields measured beside the primary one."""
        return {
            "level": self.level,
            "files": [
                {
                    "path": f.path,
                    "kind": f.kind,
                    "cases": f.cases,
                    "mape": f.mape,
                    "worst": None if f.worst_id is None else {"id": f.worst_id, "error": f.worst_error},
                    "spearman": f.spearman,
                    "coverage": f.coverage,
                    "median_width": f.median_width,
                }
                for f in self.files
            ],
            "cases": [
                {
                    "id": c.id,
                    "kind": c.kind,
                    "predicted": c.predicted,
                    "measured": c.measured,
                    "error": c.error,
                    "assumed": dict(c.assumed),
                    "interval": None if c.interval is None else c.interval.short_json(),
                }
                for c in self.cases
            ],
            "skipped": [{"id": s.id, "reason": s.reason} for s in self.skipped],
            "fields": [
                {
                    "path": f.path,
                    "field": f.field,
                    "cases": f.cases,
                    "mape": f.mape,
                    "worst": None if f.worst_id is None else {"id": f.worst_id, "error": f.worst_error},
                    "spearman": f.spearman,
                    "coverage": f.coverage,
                    "median_width": f.median_width,
                }
                for f in self.field_files
            ],
            "field_sources": [
                {
                    "field": name,
                    "file": path,
                    "source": source,
                    "cases": count,
                    "mape": mape,
                    "worst": {"id": worst.id, "error": worst.error},
                    **_coverage_json(self.field_coverage(name, path, source)),
                }
                for name, path, source, count, mape, worst in self.field_sources()
            ],
            "field_cases": [
                {
                    "id": c.id,
                    "field": c.field,
                    "predicted": c.predicted,
                    "measured": c.measured,
                    "error": c.error,
                    "interval": None if c.interval is None else c.interval.short_json(),
                }
                for c in self.field_cases
            ],
            "layout_features": [g.to_json() for g in self.layout_groups],
            "accelerators": [g.to_json() for g in self.accelerator_groups],
            "sources": [
                {
                    "file": path,
                    "source": source,
                    "cases": count,
                    "mape": mape,
                    "worst": {"id": worst.id, "error": worst.error},
                    "fit": self.fit_status(path, source),
                    **_coverage_json(self.interval_coverage(path, source)),
                }
                for path, source, count, mape, worst in self.by_source()
            ],
        }


def _coverage_json(found: tuple[float, float] | None) -> dict[str, float | None]:
    return {"coverage": found[0] if found else None, "median_width": found[1] if found else None}


def fit_status(case_ids: Sequence[str], fitted: frozenset[str]) -> str:
    """``in-sample`` (every case was fitted on), ``held-out`` (none was) or ``in-sample k/n``."""
    count = sum(case_id in fitted for case_id in case_ids)
    if count == len(case_ids):
        return "in-sample"
    return "held-out" if count == 0 else f"in-sample {count}/{len(case_ids)}"


def group_key(case: Case) -> str:
    """Cases with the same key share a model and system (collectives: an op and system)."""
    system = json.dumps(case.system.model_dump(exclude_none=True) if case.system else None, sort_keys=True)
    if case.kind == "collective":
        return f"{case.op} {system}"
    model = case.model.model_dump(exclude_none=True) if case.model else None
    return f"{json.dumps(model, sort_keys=True)} {system}"


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
    rho = sum(rhos) / len(rhos) if rhos else None
    found = coverage([(s.measured, s.predicted, s.interval) for s in scores])
    return FileScore(path, kind, len(scores), mape, worst.id, worst.error, rho, *(found or (None, None)))
