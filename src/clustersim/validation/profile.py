"""Which constants the data pins down: the objective's profile around a fit, one constant at a time.

For each constant of each group (fitted or held as a prior), the group's objective is evaluated with
that constant alone moved to ``value x f`` for ``f`` in ``PROFILE_FACTORS`` (half to twice the value:
a 4x range, cut at the constant's bounds), everything else held. ``change`` is the largest relative
change of the objective over that range; under ``FLAT_CHANGE`` (0.5%) the data cannot tell the values
apart, and the constant should be a stated prior (``prior`` in its calibration file) rather than a
fitted one: a refit would move it anywhere along the flat range with no change in error.

Holding the others misses a ridge: two constants that trade off (a GEMM ceiling and the size at which
GEMMs reach half of it) each look pinned alone while together they slide. With ``refit_iterations``
the group's other fitted constants are refitted at every point (that many iterations): the profile
in the statistical sense, and the cost of a small fit per point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

from clustersim.validation.fit import Constant, Fit, GroupFit, Prepared, fit, groups_of, loss

C = TypeVar("C")
PROFILE_FACTORS = (0.5, 0.7071067811865476, 1.4142135623730951, 2.0)
FLAT_CHANGE = 0.005


@dataclass(frozen=True)
class Profile:
    """The objective along one constant: its value, the range tried (``low`` to ``high``, the value
    within it, cut at the bounds), the objective at the value and the largest relative change over
    the range; ``flat`` when that change is under ``FLAT_CHANGE``."""

    group: str
    constant: Constant
    value: float
    low: float
    high: float
    objective: float
    change: float
    flat: bool
    prior: bool  # held as a stated prior, not fitted


def profile(
    result: Fit[C],
    cases: Sequence[Prepared[C]],
    *,
    factors: Sequence[float] = PROFILE_FACTORS,
    flat_change: float = FLAT_CHANGE,
    refit_iterations: int = 0,
) -> list[Profile]:
    """The profile of every constant of every group of ``result`` (its fitted and prior constants),
    over the cases of ``cases`` in that group; ``refit_iterations`` > 0 refits the group's other
    fitted constants at every point."""
    spec = result.spec
    members = groups_of(cases)
    out: list[Profile] = []
    for group in result.groups:
        group_cases = members.get(group.group, [])
        at = loss(spec.loss, group_cases, result.calibration)
        for constant in (*group.constants, *group.priors):
            value = spec.get(result.calibration, constant)
            trials = sorted({min(max(value * f, constant.low), constant.high) for f in factors} - {value})
            changes = [abs(_at(result, group, group_cases, constant, trial, refit_iterations) - at) for trial in trials]
            change = max(changes, default=0.0) / at if at > 0 else 0.0
            out.append(
                Profile(
                    group.group,
                    constant,
                    value,
                    min(value, *trials),
                    max(value, *trials),
                    at,
                    change,
                    change < flat_change,
                    constant in group.priors,
                )
            )
    return out


def _at(
    result: Fit[C], group: GroupFit, cases: Sequence[Prepared[C]], constant: Constant, value: float, iterations: int
) -> float:
    """The group's objective with ``constant`` at ``value`` (the others refitted, given iterations)."""
    spec = result.spec
    moved = spec.replace(result.calibration, {constant: value})
    others = [c for c in group.constants if c != constant]
    if iterations <= 0 or not others:
        return loss(spec.loss, cases, moved)
    held = {(c.table, c.key) for c in (*group.constants, *group.priors) if c not in others}
    refit = fit(spec, cases, moved, priors=held, max_iterations=iterations, only_groups={group.group})
    return loss(spec.loss, cases, refit.calibration)
