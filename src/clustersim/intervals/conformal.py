"""Split conformal prediction over log residuals: the interval a list of left-out residuals gives.

A residual is ``r = ln(measured / predicted)`` of a duration (a step, a collective, the time per
output token). With ``n`` residuals sorted, an interval at ``level`` runs from the ``k_lo``-th to the
``k_hi``-th smallest, at the finite-sample-corrected ranks

    k_lo = floor((n + 1) (1 - level) / 2),   k_hi = ceil((n + 1) (1 + level) / 2)

(1-based), so that a new case exchangeable with the ``n`` falls below ``k_lo`` or above ``k_hi`` with
probability at most ``(1 - level) / 2`` each. Where ``n`` is too small for the level (``k_lo < 1`` or
``k_hi > n``) the ranks are clipped to the extremes and the interval says so: its coverage is then
below the level. A duration's interval is ``[p e^q_lo, p e^q_hi]``; a rate (tokens/s, busbw, MFU: the
inverse of a duration) swaps the ends, ``[p e^-q_hi, p e^-q_lo]``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.errors import ClusterSimError

DEFAULT_LEVEL = 0.8
_EPS = 1e-9  # (n + 1)(1 - level)/2 computed in floating point: 10 * 0.2 / 2 must be 1, not 0.999...


def check_level(level: float, option: str = "--level") -> float:
    """``level`` if it is a probability strictly between 0 and 1; else one error naming ``option``."""
    if not (isinstance(level, int | float) and math.isfinite(level) and 0 < level < 1):
        raise ClusterSimError(
            f"{option}: {level!r} is out of range (valid: a number between 0 and 1, exclusive, e.g. 0.8 for 80%)",
            field=option,
            value=level,
        )
    return float(level)


def ranks(n: int, level: float) -> tuple[int, int, bool]:
    """The 1-based ranks ``(k_lo, k_hi)`` of an interval at ``level`` over ``n`` residuals, clipped to
    ``1..n``, and whether they were clipped (``n`` too small for the level)."""
    if n < 1:
        raise ValueError("a conformal interval needs at least one residual")
    k_lo = math.floor((n + 1) * (1 - level) / 2 + _EPS)
    k_hi = math.ceil((n + 1) * (1 + level) / 2 - _EPS)
    clipped = k_lo < 1 or k_hi > n
    return max(k_lo, 1), min(k_hi, n), clipped


def cases_needed(level: float) -> int:
    """The fewest residuals whose interval at ``level`` needs no clipping."""
    n = 1
    while ranks(n, level)[2]:
        n += 1
    return n


def log_bounds(residuals: Sequence[float], level: float) -> tuple[float, float, bool]:
    """``(q_lo, q_hi, clipped)``: the residuals at the ranks of ``ranks``."""
    ordered = sorted(residuals)
    k_lo, k_hi, clipped = ranks(len(ordered), level)
    return ordered[k_lo - 1], ordered[k_hi - 1], clipped


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
    """The log-quantiles of a group of residuals at a level: turns any prediction of the same kind of
    job into an interval (``duration`` for times, ``rate`` for their inverses)."""

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
    q_lo, q_hi, clipped = log_bounds(residuals, level)
    if clipped:
        thin = (
            f"{len(residuals)} case(s) are too few for a {level:.0%} interval (it needs {cases_needed(level)}): "
            f"it spans their extremes and covers less than {level:.0%}"
        )
        note = f"{note}; {thin}" if note else thin
    return Spread(q_lo, q_hi, level, basis, len(residuals), note)
