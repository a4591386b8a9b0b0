"""Fitting calibration constants to ground-truth cases: what a fit is, generically.

A ``FitSpec`` (one per case kind, in ``clustersim.validation.specs``) says which constants of which
calibration file are fitted and within which physical bounds, how the cases split into independent
groups (training: one per accelerator family, each fitting its own family's constants), how a
candidate calibration is applied when a case is predicted, and the objective:

* ``log-by-source``: the mean over sources of the mean ``|log(predicted / measured)|`` of their
  cases, so that every source weighs the same however many rows it has (training);
* ``log-by-case``: the mean ``|log(predicted / measured)|`` over the cases (collectives);
* ``relative-by-case``: the mean ``|predicted / measured - 1|`` over the cases, the MAPE (serving).

``fit`` minimizes it with ``clustersim.validation.optimize`` (log space, bounded, deterministic) over
every constant of the spec except those the calibration file marks ``prior`` (a value the data cannot
pin down, fixed with its stated source; see ``clustersim.validation.manifest``), and returns the
fitted calibration with, per group, the ids of the cases it was fitted on and the residual (the
objective at the fitted values): the manifest that ``--write`` records beside each constant.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import Case, primary_field, source_key
from clustersim.validation.optimize import Method, minimize
from clustersim.validation.scoring import Skipped

C = TypeVar("C")
Loss = Literal["log-by-source", "log-by-case", "relative-by-case"]
ALL = "all"  # the one group of a spec whose cases all fit the same constants


@dataclass(frozen=True)
class Constant:
    """One fitted number: ``key`` of the table ``table`` of the calibration file (``value`` for an
    entry holding one number), and its physical bounds (both positive: the search is in log space)."""

    table: str
    key: str
    low: float
    high: float

    @property
    def name(self) -> str:
        """``table.key``, or ``table`` for an entry holding one value."""
        return self.table if self.key == "value" else f"{self.table}.{self.key}"


@dataclass(frozen=True)
class Prepared(Generic[C]):
    """A case ready to fit: its measured primary field, source, group and a predictor of that field
    under any calibration (its inputs are built once)."""

    case: Case
    field: str
    measured: float
    source: str
    group: str
    predict: Callable[[C], float]


@dataclass(frozen=True)
class FitSpec(Generic[C]):
    """What is fitted for one case kind, and how (see the module's docstring)."""

    kind: str  # the case kind fitted
    package: str  # the calibration file: ``package`` / ``file_name``
    file_name: str
    env_var: str  # the variable naming the user's files over the packaged one
    loss: Loss
    method: Method
    max_iterations: int  # the default: compass sweeps or Nelder-Mead steps
    objective: str  # the objective in words (for notes and reports)
    current: Callable[[], C]  # the calibration the models use now (packaged values, user files over them)
    selects: Callable[[Case], bool]  # whether a case of the kind enters the fit
    prepare: Callable[[Case, str, Catalog, C], tuple[str, Callable[[C], float]]]  # -> group, predictor
    constants: Callable[[C, str, Sequence[Prepared[C]]], list[Constant]]  # a group's candidates to fit
    get: Callable[[C, Constant], float]
    replace: Callable[[C, Mapping[Constant, float]], C]
    fallback: Callable[[str], str | None]  # the group whose constants stand in for one with no cases
    # The value a constant takes where no case informs it, and why (None: no stated prior).
    prior: Callable[[C, Constant], tuple[float, str] | None] = lambda calibration, constant: None


@dataclass(frozen=True)
class GroupFit:
    """One group's fit: the constants fitted, those kept as priors, the cases, and the residual
    (the objective at the fitted values; ``start_residual`` at the starting ones)."""

    group: str
    constants: tuple[Constant, ...]
    priors: tuple[Constant, ...]
    case_ids: tuple[str, ...]
    start_residual: float
    residual: float
    evaluations: int
    iterations: int
    converged: bool


@dataclass(frozen=True)
class Fit(Generic[C]):
    """A fitted calibration and, per group, what it was fitted on."""

    spec: FitSpec[C]
    calibration: C
    groups: tuple[GroupFit, ...]

    def values(self) -> dict[Constant, float]:
        """Every fitted constant's value."""
        return {c: self.spec.get(self.calibration, c) for g in self.groups for c in g.constants}


def prepare_cases(
    spec: FitSpec[C], cases: Sequence[Case], catalog: Catalog, calibration: C, *, selected: bool = True
) -> tuple[list[Prepared[C]], list[Skipped]]:
    """The cases of ``spec.kind`` (those the spec selects for its fit, unless ``selected`` is False),
    ready to predict under any calibration; those that cannot be predicted (a refused layout, a
    missing field) are skipped with the reason, as ``validate`` skips them."""
    prepared: list[Prepared[C]] = []
    skipped: list[Skipped] = []
    for case in cases:
        if case.kind != spec.kind or (selected and not spec.selects(case)):
            continue
        try:
            field = primary_field(case)
            measured = case.measured[field]
            if measured == 0:
                raise ClusterSimError(f"measured {field} is 0: no relative error")
            group, predict = spec.prepare(case, field, catalog, calibration)
            predicted = predict(calibration)
        except ClusterSimError as exc:
            skipped.append(Skipped(case.id, str(exc)))
            continue
        if not math.isfinite(predicted) or predicted <= 0:
            skipped.append(Skipped(case.id, f"predicted {field} is {predicted}"))
            continue
        prepared.append(Prepared(case, field, measured, source_key(case.source), group, predict))
    return prepared, skipped


def loss(kind: Loss, cases: Sequence[Prepared[C]], calibration: C) -> float:
    """The objective ``kind`` over ``cases`` under ``calibration`` (inf where a case cannot be predicted)."""
    if not cases:
        return 0.0
    by_source: dict[str, list[float]] = {}
    for case in cases:
        try:
            predicted = case.predict(calibration)
        except ClusterSimError:
            return math.inf
        if not math.isfinite(predicted) or predicted <= 0:
            return math.inf
        ratio = predicted / case.measured
        error = abs(ratio - 1) if kind == "relative-by-case" else abs(math.log(ratio))
        by_source.setdefault(case.source if kind == "log-by-source" else ALL, []).append(error)
    return sum(sum(errors) / len(errors) for errors in by_source.values()) / len(by_source)


def groups_of(cases: Sequence[Prepared[C]]) -> dict[str, list[Prepared[C]]]:
    """The cases of each group, groups in first-seen order."""
    out: dict[str, list[Prepared[C]]] = {}
    for case in cases:
        out.setdefault(case.group, []).append(case)
    return out


def fit(
    spec: FitSpec[C],
    cases: Sequence[Prepared[C]],
    start: C,
    *,
    priors: Collection[tuple[str, str]] = (),
    max_iterations: int | None = None,
    only_groups: Collection[str] | None = None,
    digits: int | None = None,
    on_iteration: Callable[[int], None] | None = None,
) -> Fit[C]:
    """Fit each group of ``cases`` (those in ``only_groups`` when given; the others keep their values
    in ``start``) from ``start``, leaving out the constants whose ``(table, key)`` is in ``priors``.

    ``digits`` rounds the fitted values to that many significant digits (as a file would hold them);
    the residual is then the objective at the rounded values.
    """
    iterations = spec.max_iterations if max_iterations is None else max_iterations
    calibration = start
    results: list[GroupFit] = []
    for group, members in groups_of(cases).items():
        if only_groups is not None and group not in only_groups:
            continue
        candidates = spec.constants(calibration, group, members)
        fitted = [c for c in candidates if (c.table, c.key) not in priors]
        held = tuple(c for c in candidates if (c.table, c.key) in priors)
        by_name = {c.name: c for c in fitted}
        base = calibration

        def objective(
            values: Mapping[str, float],
            base: C = base,
            members: list[Prepared[C]] = members,
            by_name: dict[str, Constant] = by_name,
        ) -> float:
            trial = spec.replace(base, {by_name[name]: value for name, value in values.items()})
            return loss(spec.loss, members, trial)

        minimum = minimize(
            objective,
            {c.name: spec.get(base, c) for c in fitted},
            {c.name: (c.low, c.high) for c in fitted},
            method=spec.method,
            max_iterations=iterations,
            on_iteration=on_iteration,
        )
        values = minimum.values
        if digits is not None:
            values = {name: float(f"{value:.{digits}g}") for name, value in values.items()}
        calibration = spec.replace(base, {by_name[name]: value for name, value in values.items()})
        residual = loss(spec.loss, members, calibration)
        results.append(
            GroupFit(
                group,
                tuple(fitted),
                held,
                tuple(c.case.id for c in members),
                minimum.start_objective,
                residual,
                minimum.evaluations,
                minimum.iterations,
                minimum.converged,
            )
        )
    return Fit(spec, calibration, tuple(results))
