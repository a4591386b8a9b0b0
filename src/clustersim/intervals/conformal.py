"""Split conformal prediction over log residuals: the interval a list of left-out residuals gives.

A residual is ``r = ln(measured / predicted)`` of a duration (a step, a collective, the time per
output token). The score is its size ``|r|``: with ``n`` residuals, an interval at ``level`` is
``[p e^-q, p e^q]`` where ``q`` is the ``k``-th smallest ``|r|`` at the finite-sample-corrected rank

    k = ceil((n + 1) level)

so that a new case exchangeable with the ``n`` falls outside with probability at most ``1 - level``.
Where ``n`` is too small for the level (``k > n``) the rank is clipped to the largest and the interval
says so: its coverage is then below the level. A rate (tokens/s, busbw, MFU: the inverse of a
duration) gets the same factor both ways, ``[p e^-q, p e^q]``.

Why the size of the residual, not its signed quantiles (``[p e^q_lo, p e^q_hi]`` at ranks
``floor((n + 1)(1 - level)/2)`` and ``ceil((n + 1)(1 + level)/2)``): the left-out residuals carry the
direction of the refits that made them (a collective source left out has its op family's constants
at their priors and is predicted 27% to 36% low; serving has two sources), a direction the shipped
constants, fitted on every source, do not share; signed quantiles moved a p5 all-reduce's busbw
interval wholly above its prediction. Measured on the cases they leave out (both the fit and the
residuals; ``benchmarks/calibrate_intervals.py``), 80% intervals from ``|r|`` covered 80% of the
training cases (signed: 76%) with a median half-width of 11% (signed: 16%), and 74% of the collective
cases (signed: 64%).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.errors import ClusterSimError

DEFAULT_LEVEL = 0.8
_EPS = 1e-9  # (n + 1) level in floating point: 90 * 0.7 is 62.99999999999999, and 3 * 0.1 is 0.30000000000000004


def check_level(level: float, option: str = "--level") -> float:
    """``level`` if it is a probability strictly between 0 and 1; else one error naming ``option``."""
    if not (isinstance(level, int | float) and math.isfinite(level) and 0 < level < 1):
        raise ClusterSimError(
            f"{option}: {level!r} is out of range (valid: a number between 0 and 1, exclusive, e.g. 0.8 for 80%)",
            field=option,
            value=level,
        )
    return float(level)


def rank(n: int, level: float) -> tuple[int, bool]:
    """The 1-based rank ``k`` of the ``|r|`` that bounds an interval at ``level`` over ``n`` residuals,
    clipped to ``n``, and whether it was clipped (``n`` too small for the level)."""
    if n < 1:
        raise ValueError("a conformal interval needs at least one residual")
    k = math.ceil(round((n + 1) * level, 9) - _EPS)
    return min(k, n), k > n


def cases_needed(level: float) -> int:
    """The fewest residuals whose interval at ``level`` needs no clipping."""
    n = 1
    while rank(n, level)[1]:
        n += 1
    return n


def log_bound(residuals: Sequence[float], level: float) -> tuple[float, bool]:
    """``(q, clipped)``: the ``|r|`` at the rank of ``rank``; the interval is ``[p e^-q, p e^q]``."""
    ordered = sorted(abs(r) for r in residuals)
    k, clipped = rank(len(ordered), level)
    return ordered[k - 1], clipped


@dataclass(frozen=True)
class Interval:
    """Where the measured value should fall with probability ``level``: ``low``..``high`` in the
    unit of the figure it belongs to; ``basis`` names the residuals it comes from, ``cases`` how many,
    ``note`` says in words where the evidence is borrowed or thin (empty otherwise)."""

    low: float
    high: float
    level: float
    basis: str = ""
    cases: int = 0
    note: str = ""

    def contains(self, value: float) -> bool:
        return self.low <= value <= self.high

    def to_json(self) -> dict[str, Any]:
        return {
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "basis": self.basis,
            "cases": self.cases,
            "note": self.note,
        }

    def short_json(self) -> dict[str, float]:
        """``{low, high, level}`` only."""
        return {"low": self.low, "high": self.high, "level": self.level}


@dataclass(frozen=True)
class Spread:
    """The log-bounds of a group of residuals at a level (``q_lo = -q``, ``q_hi = q``): turns any
    prediction of the same kind of job into an interval (``duration`` for times, ``rate`` for their
    inverses)."""

    q_lo: float
    q_hi: float
    level: float
    basis: str = ""
    cases: int = 0
    note: str = ""

    def duration(self, predicted: float) -> Interval:
        """The interval of a duration (or anything proportional to one: days, cost, energy)."""
        return self._interval(predicted * math.exp(self.q_lo), predicted * math.exp(self.q_hi))

    def rate(self, predicted: float) -> Interval:
        """The interval of a rate (tokens/s, bandwidth, MFU): the duration's ends swapped."""
        return self._interval(predicted * math.exp(-self.q_hi), predicted * math.exp(-self.q_lo))

    def _interval(self, low: float, high: float) -> Interval:
        return Interval(low, high, self.level, self.basis, self.cases, self.note)


def spread(residuals: Sequence[float], level: float, *, basis: str = "", note: str = "") -> Spread:
    """The ``Spread`` of ``residuals`` at ``level``; a note says so where too few for the level."""
    q, clipped = log_bound(residuals, level)
    if clipped:
        thin = (
            f"{len(residuals)} case(s) are too few for a {level:.0%} interval (it needs {cases_needed(level)}): "
            f"it spans their extremes and covers less than {level:.0%}"
        )
        note = f"{note}; {thin}" if note else thin
    return Spread(-q, q, level, basis, len(residuals), note)
