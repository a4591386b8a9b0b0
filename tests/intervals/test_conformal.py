"""The conformal rank and intervals: exact ranks on known residuals, and properties that always hold."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.intervals.conformal import cases_needed, check_level, log_bound, rank, spread

residual_lists = st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=60)
levels = st.floats(0.05, 0.99)


def test_the_rank_is_the_finite_sample_corrected_one() -> None:
    assert rank(240, 0.8) == (193, False)  # ceil(241 * 0.8) = ceil(192.8)
    assert rank(89, 0.7) == (63, False)  # 90 * 0.7 is 62.99999999999999 in floating point: still 63
    assert rank(29, 0.1) == (3, False)  # 30 * 0.1 is 3.0000000000000004: still 3
    assert rank(9, 0.9) == (9, False)
    assert rank(8, 0.9) == (8, True)  # ceil(8.1) = 9 > 8: too few for 90%, clipped and said
    assert [cases_needed(level) for level in (0.5, 0.8, 0.9, 0.95, 0.99)] == [1, 4, 9, 19, 99]


def test_the_bound_on_a_known_list() -> None:
    residuals = [-0.5, 0.1, -0.2, 0.3, 0.05, -0.4, 0.6, 0.15, -0.25, 0.35]  # |r| sorted: .05 .1 .15 .2 .25 .3 .35 ...
    assert rank(10, 0.5) == (6, False)  # ceil(11 * 0.5) = 6
    q, clipped = log_bound(residuals, 0.5)
    assert (q, clipped) == (pytest.approx(0.3), False)
    s = spread(residuals, 0.5, basis="b")
    interval = s.duration(10.0)
    assert interval.low == pytest.approx(10 * math.exp(-0.3)) and interval.high == pytest.approx(10 * math.exp(0.3))
    rate = s.rate(10.0)
    assert rate.low == pytest.approx(interval.low) and rate.high == pytest.approx(interval.high)
    assert s.cases == 10 and s.note == "" and s.basis == "b"
    assert "too few for a 90% interval (it needs 9)" in spread(residuals[:3], 0.9).note


@given(residual_lists, levels)
def test_an_interval_always_holds_its_prediction(residuals: list[float], level: float) -> None:
    s = spread(residuals, level)
    assert s.duration(3.0).contains(3.0) and s.rate(3.0).contains(3.0)


@given(residual_lists, levels, levels)
def test_a_higher_level_is_never_narrower(residuals: list[float], a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert log_bound(residuals, low)[0] <= log_bound(residuals, high)[0]


@given(residual_lists, levels)
def test_a_duration_and_its_rate_are_inverse(residuals: list[float], level: float) -> None:
    s = spread(residuals, level)
    duration, rate = s.duration(2.0), s.rate(0.5)  # a step of 2 s is 0.5 steps/s
    assert rate.low == pytest.approx(1 / duration.high) and rate.high == pytest.approx(1 / duration.low)


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=10, max_size=200), levels)
def test_in_sample_coverage_is_at_least_the_level(residuals: list[float], level: float) -> None:
    q, clipped = log_bound(residuals, level)
    inside = sum(abs(r) <= q for r in residuals) / len(residuals)
    assert inside >= level or clipped


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, math.nan, math.inf])
def test_a_level_outside_0_1_is_refused_naming_the_option(level: float) -> None:
    with pytest.raises(ClusterSimError, match=r"--level: .* \(valid: a number between 0 and 1, exclusive"):
        check_level(level)
    assert check_level(0.8) == 0.8
