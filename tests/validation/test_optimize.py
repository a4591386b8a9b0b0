"""The bounded log-space minimizer: finds minima, keeps to bounds, is deterministic, does no work at 0."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pytest

from clustersim.validation.optimize import METHODS, Method, minimize

TRUTH = {"a": 0.3, "b": 2.0e-4, "c": 5.0}
BOUNDS = {"a": (0.01, 1.0), "b": (1e-7, 1e-1), "c": (0.1, 100.0)}
START = {"a": 0.8, "b": 1e-5, "c": 1.0}


def bowl(values: Mapping[str, float]) -> float:
    """A bowl in log space with its bottom (0) at TRUTH."""
    return sum(math.log(values[k] / TRUTH[k]) ** 2 for k in values)


@pytest.mark.parametrize("method", METHODS)
def test_finds_the_bottom_of_a_bowl(method: Method) -> None:
    result = minimize(bowl, START, BOUNDS, method=method, max_iterations=500)
    assert result.converged
    assert result.objective < 1e-4 < result.start_objective
    for name, value in TRUTH.items():
        assert result.values[name] == pytest.approx(value, rel=0.02)


@pytest.mark.parametrize("method", METHODS)
def test_keeps_to_the_bounds(method: Method) -> None:
    result = minimize(bowl, START, {**BOUNDS, "a": (0.5, 1.0)}, method=method, max_iterations=500)
    assert result.values["a"] == pytest.approx(0.5)
    assert all(BOUNDS[k][0] <= v <= BOUNDS[k][1] for k, v in result.values.items() if k != "a")


@pytest.mark.parametrize("method", METHODS)
def test_the_same_inputs_give_the_same_answer(method: Method) -> None:
    first = minimize(bowl, START, BOUNDS, method=method, max_iterations=7)
    again = minimize(bowl, START, BOUNDS, method=method, max_iterations=7)
    assert first == again
    assert first.iterations == 7 and not first.converged


def test_no_iterations_return_the_start_as_given() -> None:
    outside = {**START, "a": 3.0}  # outside its bounds: untouched when nothing runs
    result = minimize(bowl, outside, BOUNDS, max_iterations=0)
    assert result.values == outside and result.evaluations == 1 and result.iterations == 0
    assert result.objective == result.start_objective == bowl(outside)


def test_values_the_search_never_moved_come_back_exactly() -> None:
    def only_a(values: Mapping[str, float]) -> float:
        return math.log(values["a"] / 0.3) ** 2

    start = {"a": 0.8, "b": 1.37e8}
    result = minimize(only_a, start, {"a": (0.1, 1.0), "b": (1e7, 1e11)}, max_iterations=100)
    assert result.values["b"] == 1.37e8  # exactly, not exp(log(1.37e8))
    assert result.values["a"] == pytest.approx(0.3, rel=0.01)


def test_a_zero_start_is_scored_as_given_then_moved_inside() -> None:
    def guarded(values: Mapping[str, float]) -> float:
        return math.inf if values["a"] == 0 else bowl(values)

    result = minimize(guarded, {**START, "a": 0.0}, BOUNDS, max_iterations=0)
    assert result.values["a"] == 0.0 and math.isinf(result.start_objective)
    moved = minimize(guarded, {**START, "a": 0.0}, BOUNDS, max_iterations=200)
    assert moved.values["a"] == pytest.approx(TRUTH["a"], rel=0.02)


def test_a_point_is_evaluated_once() -> None:
    calls: list[dict[str, float]] = []

    def counted(values: Mapping[str, float]) -> float:
        calls.append(dict(values))
        return bowl(values)

    result = minimize(counted, START, BOUNDS, max_iterations=50)
    assert result.evaluations == len(calls) == len({tuple(sorted(c.items())) for c in calls})


def test_an_objective_that_fails_somewhere_is_avoided_there() -> None:
    def cliff(values: Mapping[str, float]) -> float:
        return math.nan if values["a"] < 0.5 else bowl(values)

    result = minimize(cliff, START, BOUNDS, max_iterations=100)
    assert result.values["a"] >= 0.5 and math.isfinite(result.objective)


@pytest.mark.parametrize(
    ("start", "bounds", "message"),
    [
        ({"a": 0.5}, {"a": (0.0, 1.0)}, "bounds must be positive"),
        ({"a": 0.5}, {"a": (1.0, 0.5)}, "low <= high"),
        ({"a": -1.0}, {"a": (0.1, 1.0)}, "must be non-negative"),
    ],
)
def test_bad_bounds_and_starts_are_refused(
    start: dict[str, float], bounds: dict[str, tuple[float, float]], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        minimize(bowl, start, bounds)


def test_an_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown method"):
        minimize(bowl, START, BOUNDS, method="annealing")  # type: ignore[arg-type]
