"""The conformal ranks and intervals: exact ranks on known residuals, and properties that always hold."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.intervals.conformal import cases_needed, check_level, log_bounds, ranks, spread

residual_lists = st.lists(st.floats(-2, 2, allow_nan=False), min_size=1, max_size=60)
levels = st.floats(0.05, 0.99)


def test_ranks_are_the_finite_sample_corrected_ones() -> None:
    # n = 9 at 80%: (n + 1)(1 - 0.8)/2 = 1 exactly (not 0.999... in floating point), (n + 1)(1.8)/2 = 9
    assert ranks(9, 0.8) == (1, 9, False)
    # n = 240 at 80%: floor(24.1) = 24, ceil(216.9) = 217
    assert ranks(240, 0.8) == (24, 217, False)
    # n = 20 at 90%: floor(1.05) = 1, ceil(19.95) = 20
    assert ranks(20, 0.9) == (1, 20, False)
    # too few for the level: clipped to the extremes, and said
    assert ranks(5, 0.8) == (1, 5, True)
    assert ranks(20, 0.95) == (1, 20, True)
    assert cases_needed(0.8) == 9
    assert cases_needed(0.9) == 19
    assert cases_needed(0.95) == 39


def test_bounds_on_a_known_list() -> None:
    residuals = [0.1 * k for k in range(-5, 6)] + [0.9, -0.9]  # 13 values; at 50%: floor(3.5) = 3, ceil(10.5) = 11
    assert ranks(13, 0.5) == (3, 11, False)
    q_lo, q_hi, clipped = log_bounds(residuals, 0.5)
    assert (q_lo, q_hi, clipped) == (pytest.approx(-0.4), pytest.approx(0.4), False)
    s = spread(residuals, 0.5, basis="b")
    interval = s.duration(10.0)
    assert interval.low == pytest.approx(10 * math.exp(-0.4))
    assert interval.high == pytest.approx(10 * math.exp(0.4))
    rate = s.rate(10.0)  # a rate's interval: the ends swapped
    assert rate.low == pytest.approx(10 * math.exp(-0.4)) and rate.high == pytest.approx(10 * math.exp(0.4))
    assert s.cases == 13 and s.note == ""
    assert "too few" in spread(residuals[:3], 0.8).note


@given(residual_lists, levels)
def test_an_interval_holds_the_prediction_when_residuals_straddle_zero(residuals: list[float], level: float) -> None:
    q_lo, q_hi, _ = log_bounds(residuals, level)
    s = spread(residuals, level)
    if q_lo <= 0 <= q_hi:
        assert s.duration(3.0).contains(3.0) and s.rate(3.0).contains(3.0)
    assert s.duration(3.0).low <= s.duration(3.0).high and s.rate(3.0).low <= s.rate(3.0).high


@given(residual_lists, levels, levels)
def test_a_higher_level_is_never_narrower(residuals: list[float], a: float, b: float) -> None:
    low, high = sorted((a, b))
    narrow, wide = log_bounds(residuals, low), log_bounds(residuals, high)
    assert wide[0] <= narrow[0] and narrow[1] <= wide[1]


@given(residual_lists, levels)
def test_a_duration_and_its_rate_are_inverse(residuals: list[float], level: float) -> None:
    s = spread(residuals, level)
    duration, rate = s.duration(2.0), s.rate(0.5)  # a step of 2 s is 0.5 steps/s
    assert rate.low == pytest.approx(1 / duration.high) and rate.high == pytest.approx(1 / duration.low)


@given(st.lists(st.floats(-1, 1, allow_nan=False), min_size=40, max_size=200))
def test_in_sample_coverage_is_at_least_the_level(residuals: list[float]) -> None:
    q_lo, q_hi, _ = log_bounds(residuals, 0.8)
    inside = sum(q_lo <= r <= q_hi for r in residuals) / len(residuals)
    assert inside >= 0.8 - 1 / len(residuals)


@pytest.mark.parametrize("level", [0, 1, -0.1, 1.5, math.nan, math.inf])
def test_a_level_outside_0_1_is_refused_naming_the_option(level: float) -> None:
    with pytest.raises(ClusterSimError, match=r"--level: .* \(valid: a number between 0 and 1, exclusive"):
        check_level(level)
    assert check_level(0.8) == 0.8
