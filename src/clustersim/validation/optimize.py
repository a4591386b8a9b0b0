"""A small, deterministic, bounded minimizer over named positive values, searched in log space.

Calibration constants are positive and their plausible ranges span decades (a GEMM size of 1e7 to
1e11 FLOPs, an overhead of 1e-7 to 1e-2 s), so the search moves ``log(value)`` and keeps every trial
inside ``[low, high]``. Two methods, numpy only, with no randomness:

* ``coordinate``: a compass search. Each iteration tries every value in turn a step up and a step
  down (a factor ``exp(step)``, 1.4 at the start) and keeps a trial that lowers the objective (by
  more than a relative ``MIN_IMPROVEMENT``, so that it does not crawl along a flat valley); an
  iteration that moves nothing halves the step, and the search stops once the step is below
  ``tolerance`` (a factor of 1.005 by default).
* ``nelder-mead``: the standard simplex (reflection 1, expansion 2, contraction 0.5, shrink 0.5) from
  an initial simplex of 0.2 in log per value; it stops when the simplex's objective values agree to
  ``1e-9`` and its vertices to ``tolerance``.

``max_iterations`` bounds the work: compass sweeps, or Nelder-Mead steps. Zero returns the start as
given. Every objective value is remembered by its point, so a revisited point costs nothing.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

Method = Literal["coordinate", "nelder-mead"]
METHODS: tuple[Method, ...] = ("coordinate", "nelder-mead")
Vector = npt.NDArray[np.float64]
INITIAL_STEP = math.log(1.4)
DEFAULT_TOLERANCE = math.log(1.005)
SIMPLEX_STEP = 0.2
FLAT_OBJECTIVE = 1e-9
MIN_IMPROVEMENT = 1e-4  # a compass move must lower the objective by this fraction (no crawling along flat valleys)


@dataclass(frozen=True)
class Minimum:
    """Where the search ended: the values, the objective there and at the start, and the work done."""

    values: dict[str, float]
    objective: float
    start_objective: float
    evaluations: int
    iterations: int
    converged: bool


def minimize(
    objective: Callable[[Mapping[str, float]], float],
    start: Mapping[str, float],
    bounds: Mapping[str, tuple[float, float]],
    *,
    method: Method = "coordinate",
    max_iterations: int = 40,
    tolerance: float = DEFAULT_TOLERANCE,
    on_iteration: Callable[[int], None] | None = None,
) -> Minimum:
    """Minimize ``objective`` over the values named in ``start`` (each within ``bounds[name]``, both
    ends positive). A start outside its bounds (zero included) is moved inside before the first step.
    ``on_iteration(i)`` is called after each iteration (for a progress bar)."""
    names = list(start)
    for name in names:
        low, high = bounds[name]
        if not 0 < low <= high:
            raise ValueError(f"{name}: bounds must be positive with low <= high, got ({low}, {high})")
        if not start[name] >= 0:
            raise ValueError(f"{name}: a start value must be non-negative, got {start[name]}")
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r} (valid: {', '.join(METHODS)})")
    search = _Search(objective, names, bounds)
    given = np.array([float(start[n]) for n in names])
    raw = np.log(np.where(given > 0, given, 1.0)) - np.where(given > 0, 0.0, np.inf)  # log(0) = -inf, no warning
    search.remember_start(raw, start)
    first = search.value(raw)
    if max_iterations <= 0 or not names:
        return Minimum(dict(start), first, first, search.evaluations, 0, False)
    x0 = search.clip(raw)
    run = _compass if method == "coordinate" else _nelder_mead
    x, iterations, converged = run(search, x0, max_iterations, tolerance, on_iteration)
    return Minimum(search.values(x), search.value(x), first, search.evaluations, iterations, converged)


class _Search:
    """The objective in log coordinates, clipped to the bounds and remembered per point."""

    def __init__(
        self,
        objective: Callable[[Mapping[str, float]], float],
        names: list[str],
        bounds: Mapping[str, tuple[float, float]],
    ) -> None:
        self.objective = objective
        self.names = names
        self.low = np.log([bounds[n][0] for n in names])
        self.high = np.log([bounds[n][1] for n in names])
        self.seen: dict[tuple[float, ...], float] = {}
        self.evaluations = 0
        self.start: dict[tuple[int, float], float] = {}  # (index, log value) -> the exact start value

    def remember_start(self, x: Vector, start: Mapping[str, float]) -> None:
        """Give back the start values exactly where the search leaves them (``exp(log(v))`` may not be v)."""
        self.start = {(i, float(v)): float(start[n]) for i, (n, v) in enumerate(zip(self.names, x, strict=True))}

    def clip(self, x: Vector) -> Vector:
        return np.clip(x, self.low, self.high)

    def values(self, x: Vector) -> dict[str, float]:
        return {
            name: self.start.get((i, float(v)), float(math.exp(v)))
            for i, (name, v) in enumerate(zip(self.names, x, strict=True))
        }

    def value(self, x: Vector) -> float:
        key = tuple(float(v) for v in x)
        if key not in self.seen:
            self.evaluations += 1
            result = float(self.objective(self.values(x)))
            self.seen[key] = result if math.isfinite(result) else math.inf
        return self.seen[key]


def _compass(
    search: _Search, x: Vector, max_iterations: int, tolerance: float, on_iteration: Callable[[int], None] | None
) -> tuple[Vector, int, bool]:
    best = search.value(x)
    step = INITIAL_STEP
    for iteration in range(1, max_iterations + 1):
        moved = False
        for i in range(len(x)):
            for sign in (1.0, -1.0):
                trial = x.copy()
                trial[i] = min(max(x[i] + sign * step, search.low[i]), search.high[i])
                if trial[i] == x[i]:
                    continue
                score = search.value(trial)
                if score < best - MIN_IMPROVEMENT * abs(best):
                    x, best, moved = trial, score, True
                    break
        if on_iteration is not None:
            on_iteration(iteration)
        if not moved:
            step /= 2
            if step < tolerance:
                return x, iteration, True
    return x, max_iterations, False


def _nelder_mead(
    search: _Search, x0: Vector, max_iterations: int, tolerance: float, on_iteration: Callable[[int], None] | None
) -> tuple[Vector, int, bool]:
    n = len(x0)
    simplex = [x0] + [search.clip(x0 + SIMPLEX_STEP * np.eye(n)[i]) for i in range(n)]
    scores = [search.value(x) for x in simplex]
    for iteration in range(1, max_iterations + 1):
        order = np.argsort(scores, kind="stable")
        simplex = [simplex[i] for i in order]
        scores = [scores[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = search.clip(centroid + (centroid - simplex[-1]))
        r = search.value(reflected)
        if r < scores[0]:
            expanded = search.clip(centroid + 2.0 * (centroid - simplex[-1]))
            e = search.value(expanded)
            simplex[-1], scores[-1] = (expanded, e) if e < r else (reflected, r)
        elif r < scores[-2]:
            simplex[-1], scores[-1] = reflected, r
        else:
            contracted = search.clip(centroid + 0.5 * (simplex[-1] - centroid))
            c = search.value(contracted)
            if c < scores[-1]:
                simplex[-1], scores[-1] = contracted, c
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                scores = [search.value(x) for x in simplex]
        if on_iteration is not None:
            on_iteration(iteration)
        spread = max(float(np.max(np.abs(x - simplex[0]))) for x in simplex)
        if max(scores) - min(scores) <= FLAT_OBJECTIVE and spread <= tolerance:
            return simplex[int(np.argmin(scores))], iteration, True
    return simplex[int(np.argmin(scores))], max_iterations, False
