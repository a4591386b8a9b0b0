"""A shipped calibration file checked against the bundled cases it was fitted on, by the fitting code.

``fitted_groups`` reads a spec's packaged file (``clustersim.validation.specs.SPECS``) and, for each
group whose fitted tables record a ``residual``, prepares the bundled cases listed in ``fitted_on``.
Tests then check that the recorded residual is the objective at the shipped constants (file and data
agree) and, with ``refit_one``, that the fit brings a perturbed constant back (the data pins it there);
never the constants' values themselves, which a refit changes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.registry import load_catalog
from clustersim.validation.cases import default_case_files, read_cases
from clustersim.validation.fit import Constant, Prepared, fit, loss, prepare_cases
from clustersim.validation.manifest import RESIDUAL_DIGITS, priors, read_manifest
from clustersim.validation.specs import SPECS

PERTURBATION = 1.3  # a fitted constant moves by this factor (up, or down where up leaves its bounds)
# Where the constant is scanned, as powers of the perturbation: a local search from the perturbed start may
# stop in a neighbouring basin of a piecewise objective (a MAPE), so the shipped value must then be the
# best of this line instead.
LINE_FACTORS = tuple(PERTURBATION ** (k / 4) for k in range(-8, 9))


@dataclass(frozen=True)
class FittedGroup:
    """One group of a kind's fit as its packaged file records it: the shipped calibration, the
    constants fitted (priors left out), the bundled cases of ``fitted_on`` that the spec prepares, the
    ids it lists but no such case gives, and each fitted table's ``fitted_on`` and ``residual``."""

    kind: str
    group: str
    shipped: Any
    constants: dict[str, Constant]  # by name
    held: frozenset[tuple[str, str]]  # the group's constants kept as priors
    cases: tuple[Prepared[Any], ...]
    missing: frozenset[str]
    fitted_on: dict[str, frozenset[str]]  # per fitted table
    residuals: dict[str, float | None]  # per fitted table

    def objective(self, calibration: Any) -> float:
        """The spec's objective over the group's fitted cases under ``calibration``."""
        return loss(SPECS[self.kind].loss, self.cases, calibration)


@dataclass(frozen=True)
class Refit:
    """One constant moved off its shipped value and fitted alone back: values and objectives."""

    shipped: float
    start: float
    fitted: float
    shipped_objective: float
    start_objective: float
    fitted_objective: float
    line_objectives: tuple[float, ...] = ()  # the objective along the line through shipped and start (LINE_FACTORS)

    def distance(self, value: float) -> float:
        """``|log(value / shipped)|``: how far a value is from the shipped one, as a factor."""
        return abs(math.log(value / self.shipped))


def fitted_groups(kind: str, shipped: Any) -> dict[str, FittedGroup]:
    """The groups of ``kind`` whose fitted tables in the packaged file record a residual."""
    spec = SPECS[kind]
    manifest = read_manifest(spec, use_env=False)
    held = priors(manifest)
    cases = [case for _, path in default_case_files() for case in read_cases(path)]  # the files the fits read
    prepared, _ = prepare_cases(spec, cases, load_catalog(use_env=False), shipped)
    out: dict[str, FittedGroup] = {}
    for group in dict.fromkeys(p.group for p in prepared):
        members = [p for p in prepared if p.group == group]
        candidates = spec.constants(shipped, group, members)
        constants = {c.name: c for c in candidates if (c.table, c.key) not in held}
        tables = sorted({c.table for c in constants.values()})
        recorded = {t: manifest[t] for t in tables if t in manifest}
        if not any(entry.residual is not None for entry in recorded.values()):
            continue
        ids = frozenset(i for entry in recorded.values() for i in entry.fitted_on)
        chosen = tuple(p for p in members if p.case.id in ids)
        out[group] = FittedGroup(
            kind,
            group,
            shipped,
            constants,
            frozenset((c.table, c.key) for c in candidates if (c.table, c.key) in held),
            chosen,
            ids - {p.case.id for p in chosen},
            {t: frozenset(recorded[t].fitted_on) if t in recorded else frozenset() for t in tables},
            {t: recorded[t].residual if t in recorded else None for t in tables},
        )
    return out


def check_recorded_residual(group: FittedGroup) -> None:
    """Every fitted table of the group lists the same cases and residual, each listed case is a bundled
    case the spec predicts, and the residual is the objective at the shipped constants (to its digits)."""
    where = f"{group.kind} {group.group}"
    assert not group.missing, f"{where}: fitted_on lists cases the bundled data does not give: {sorted(group.missing)}"
    assert len(set(group.fitted_on.values())) == 1, f"{where}: the fitted tables list different cases"
    assert len(set(group.residuals.values())) == 1, f"{where}: the fitted tables record different residuals"
    (recorded,) = set(group.residuals.values())
    assert recorded is not None
    objective = group.objective(group.shipped)
    assert abs(objective - recorded) <= rounding(recorded) * 1.01, (
        f"{where}: the objective at the shipped constants is {objective:.6g}, the file records {recorded} "
        "(the data or the model changed since the fit: refit and --write)"
    )


def check_brought_back(refit: Refit, name: str) -> None:
    """Moving the constant costs objective (the data pins it), and the fit from there wins back at least
    90% of that cost and moves the constant at least a quarter of the way back to the shipped value; or,
    where the search stops in a neighbouring basin, the shipped value is the best of the line around it."""
    cost = refit.start_objective - refit.shipped_objective
    assert cost > 1e-4 * refit.shipped_objective, (
        f"{name}: moved from {refit.shipped:.4g} to {refit.start:.4g}, the objective goes from "
        f"{refit.shipped_objective:.6g} to {refit.start_objective:.6g}: flat (a prior?) or the shipped value is no fit"
    )
    if refit.fitted_objective - refit.shipped_objective > 0.1 * cost and refit.line_objectives:
        # the search stopped in another basin: the shipped value must be the line's best (to its digits)
        best = min(refit.line_objectives)
        assert refit.shipped_objective <= best + rounding(refit.shipped_objective), (
            f"{name}: the fit stopped at {refit.fitted:.4g} ({refit.fitted_objective:.6g}) and the line through "
            f"the shipped {refit.shipped:.4g} ({refit.shipped_objective:.6g}) reaches {best:.6g}: no fit"
        )
        return
    assert refit.fitted_objective - refit.shipped_objective <= 0.1 * cost, (
        f"{name}: the fit got back to {refit.fitted_objective:.6g} from {refit.start_objective:.6g}, "
        f"not near the shipped {refit.shipped_objective:.6g}"
    )
    assert refit.distance(refit.fitted) <= 0.75 * refit.distance(refit.start), (
        f"{name}: fitted {refit.fitted:.4g} from {refit.start:.4g}, not back toward the shipped {refit.shipped:.4g}"
    )


def rounding(residual: float) -> float:
    """Half a unit of the last digit a file keeps of a residual (``RESIDUAL_DIGITS`` significant)."""
    return 0.5 * 10.0 ** (math.floor(math.log10(residual)) - RESIDUAL_DIGITS + 1)


def refit_one(group: FittedGroup, name: str, *, max_iterations: int = 6) -> Refit:
    """Move the constant ``name`` by ``PERTURBATION`` off its shipped value and fit it alone (the
    group's other constants held where they are) from there with the spec's own search."""
    spec = SPECS[group.kind]
    constant = group.constants[name]
    value = spec.get(group.shipped, constant)
    start = value * PERTURBATION if value * PERTURBATION <= constant.high else value / PERTURBATION
    perturbed = spec.replace(group.shipped, {constant: start})
    others = {(c.table, c.key) for c in group.constants.values() if c != constant} | group.held
    result = fit(spec, group.cases, perturbed, priors=others, max_iterations=max_iterations, only_groups={group.group})
    (fitted,) = result.groups
    inside = [value * f for f in LINE_FACTORS if constant.low <= value * f <= constant.high]
    return Refit(
        value,
        start,
        spec.get(result.calibration, constant),
        group.objective(group.shipped),
        fitted.start_residual,
        fitted.residual,
        tuple(group.objective(spec.replace(group.shipped, {constant: v})) for v in inside),
    )
