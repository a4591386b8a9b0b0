"""What mutation testing of the request sets and their sampler (``serving.datasets``, ``serving.sim_requests``)
found unpinned: vLLM's integer-uniform range counted by hand, a fixed length's floor, the largest-entropy
exponential's decay checked against its closed-form mean, a quantile curve's top carried past its last
percentile, a curve stretched to a stated mean, and the arrivals' refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import ValidationError

from clustersim.errors import ClusterSimError
from clustersim.serving.datasets import LengthStats, RequestDataset, RequestLengths, request_dataset, resolve_lengths
from clustersim.serving.sim_requests import (
    LengthSource,
    _exponential_rate,
    _power_for_mean,
    _quantile_source,
    _scaled,
    _through_knots,
    _truncated_exponential,
    curve_mean,
    length_source,
    poisson_arrivals,
    request_sampler,
    request_spread,
)

UNIFORM = LengthSource("uniform", 10.0, low_tokens=8.0, high_tokens=12.0)


def test_vllms_integer_uniform_range_holds_both_ends():
    assert UNIFORM.at_quantiles(5).tolist() == [8.0, 9.0, 10.0, 11.0, 12.0]  # midpoints 0.1 ... 0.9 of 8..12
    assert UNIFORM.in_flight_mean() == pytest.approx((64 + 81 + 100 + 121 + 144) / 50)
    drawn = UNIFORM.draw(np.random.default_rng(0), 2000)
    assert (drawn.min(), drawn.max()) == (8, 12) and drawn.dtype == np.int64


def test_a_fixed_length_is_every_requests_and_never_under_one_token():
    fixed = LengthSource("fixed", 7.4)
    assert fixed.draw(np.random.default_rng(0), 3).tolist() == [7, 7, 7]
    assert fixed.at_quantiles(2).tolist() == [7.4, 7.4] and fixed.in_flight_mean() == 7.4
    assert LengthSource("fixed", 1.5).at_quantiles(2).tolist() == [1.5, 1.5]


def _exponential_mean(rate: float, low: float, high: float) -> float:
    """The mean of an exponential density of ``rate`` on [low, high] (either sign of the rate)."""
    width = high - low
    return low + 1.0 / rate - width / math.expm1(rate * width)


@pytest.mark.parametrize("mean", [20.0, 45.0, 55.0, 80.0, 99.0])
def test_the_decay_gives_the_stated_mean_on_the_range(mean):
    rate = _exponential_rate(mean, 1.0, 100.0)
    assert (rate > 0) == (mean < 50.5) and _exponential_mean(rate, 1.0, 100.0) == pytest.approx(mean, rel=1e-7)


def test_a_mean_at_the_middle_is_uniform_and_a_hair_past_it_rises():
    assert _exponential_rate(50.5, 1.0, 100.0) == 0.0
    assert _exponential_rate(50.5 + 5e-6, 1.0, 100.0) < 0.0 < _exponential_rate(50.5 - 5e-6, 1.0, 100.0)
    assert _exponential_rate(20.0, 1.0, math.inf) == 1.0 / 19.0


def test_a_rising_density_mirrors_the_falling_one_and_rate_zero_is_uniform():
    u = np.array([0.1, 0.5, 0.9])
    falling = _truncated_exponential(u, 10.0, 30.0, 0.2)
    assert _truncated_exponential(u, 10.0, 30.0, -0.2) == pytest.approx(40.0 - falling[::-1])
    assert _truncated_exponential(np.array([0.25]), 10.0, 30.0, 0.0).tolist() == [15.0]


def _stats(**fields: object) -> LengthStats:
    figure = {"provenance": "derived", "source": "a test's own numbers"}
    given = {k: {"value": v, **figure} for k, v in fields.items() if k != "percentiles"}
    if "percentiles" in fields:
        given["percentiles"] = {"values": fields["percentiles"], "source": "a test's own numbers"}
    return LengthStats.model_validate(given)


def test_a_quantile_curves_top_carries_its_last_percentiles_line_to_the_hundredth():
    """Percentiles 50: 100 and 90: 200 with no maximum: the line on to the 100th reaches 225; with no minimum
    the curve starts flat at the lowest percentile; with no mean it runs straight."""
    curve = _quantile_source(_stats(min=10, percentiles={50: 100, 90: 200}), 120.0)
    assert curve.knots_q == (0.0, 0.5, 0.9, 1.0) and curve.knots_tokens == (10.0, 100.0, 200.0, 225.0)
    assert curve.segment_power == 1.0 and curve.mean_tokens == 120.0
    assert _quantile_source(_stats(percentiles={50: 100, 90: 200}), 120.0).knots_tokens[0] == 100.0
    assert _quantile_source(_stats(percentiles={50: 100}), 100.0).knots_tokens == (100.0, 100.0, 100.0)
    curved = _quantile_source(_stats(min=10, percentiles={50: 100, 90: 200}, mean=90), 90.0)
    assert curve_mean(curved.knots_q, curved.knots_tokens, curved.segment_power) == pytest.approx(90.0)


def test_a_curve_is_stretched_to_a_stated_mean_and_its_straight_mean_is_each_segments_middle():
    assert curve_mean((0.0, 1.0), (0.0, 10.0)) == 5.0
    curve = _quantile_source(_stats(min=10, percentiles={50: 100, 90: 200}), 120.0)
    mean = curve_mean(curve.knots_q, curve.knots_tokens)
    stretched = _scaled(curve, 2.0 * mean)
    assert stretched.knots_tokens == pytest.approx(tuple(2.0 * k for k in curve.knots_tokens))
    assert stretched.mean_tokens == 2.0 * mean and stretched.knots_q == curve.knots_q


def test_generators_without_a_range_draw_one_length_and_a_mean_alone_its_exponential():
    fixed = length_source(request_dataset("fixed"), "input", None, 100.0)
    assert fixed == LengthSource("fixed", 100.0)
    ranged = request_dataset("random").model_copy(update={"range_ratio": None})
    assert length_source(ranged, "input", None, 100.0) == LengthSource("fixed", 100.0)
    sharegpt = length_source(request_dataset("sharegpt"), "input", None, 229.7)  # a mean and a maximum, no minimum
    assert sharegpt == LengthSource("exponential", 229.7, low_tokens=1.0, high_tokens=1024.0,
                                    rate_per_token=_exponential_rate(229.7, 1.0, 1024.0))  # fmt: skip
    assert length_source(request_dataset("sharegpt"), "input", None, 1024.0) == LengthSource("fixed", 1024.0)


def test_a_sampler_names_its_set_and_a_stated_length_beside_a_set_is_every_requests():
    sampler = request_sampler("sharegpt", 229.7, 203.1, stated=(True, False))
    assert sampler.dataset == "sharegpt" and sampler.input == LengthSource("fixed", 229.7)
    assert sampler.output.kind == "exponential"
    spread = request_spread(sampler)
    assert spread["output_tokens_in_flight"] == pytest.approx(sampler.output.in_flight_mean())
    assert spread["output_tokens_in_flight"] > 1.5 * 203.1  # an exponential's in-flight mean is about twice its own
    assert request_sampler(None, 10.0, 20.0).dataset is None


def test_arrivals_need_a_positive_finite_rate_and_start_at_zero():
    times = poisson_arrivals(np.random.default_rng(1), 0.5, 4)
    assert times[0] == 0.0 and np.all(np.diff(times) > 0) and times.dtype == np.float64
    for bad in (0.0, -1.0, math.inf):
        with pytest.raises(ClusterSimError) as found:
            poisson_arrivals(np.random.default_rng(1), bad, 4)
        assert str(found.value) == f"rate: must be a positive number of requests/s, got {bad}"
        assert found.value.field == "rate"


def _refused(build, words: str) -> None:
    with pytest.raises(ValidationError) as found:
        build()
    assert words in str(found.value)


def test_a_sides_figures_are_checked_at_their_edges_with_their_words():
    assert _stats(mean=1).mean.value == 1 and _stats(min=10, max=10).max.value == 10
    assert _stats(percentiles={50: 0}).percentiles.values == {50: 0} and _stats(percentiles={50: 0.5}) is not None
    _refused(lambda: _stats(mean=0.5), "mean: a mean length is at least 1 token, got 0.5")
    _refused(lambda: _stats(min=10, max=5), "min 10 is above max 5")
    _refused(lambda: _stats(min=10, percentiles={50: 5}), "percentile 50 5 is outside [min, max] = [10, inf]")
    _refused(lambda: _stats(max=100, mean=500, percentiles={50: 50}), "mean 500 is outside [min, max] = [0, 100]")
    _refused(lambda: _stats(percentiles={0: 5}), "percentiles are keyed by a percent between 1 and 99, got [0]")
    _refused(
        lambda: _stats(percentiles={50: 5, 90: 4}),
        "percentile lengths must be non-negative and non-decreasing with the percent",
    )


def test_a_sets_kind_decides_which_fields_it_may_carry():
    figure = {"value": 0.5, "provenance": "derived", "source": "a test's own numbers"}
    base = {"description": "abc", "used_by": "abc"}
    _refused(
        lambda: RequestDataset.model_validate({**base, "kind": "dataset", "range_ratio": figure}),
        "range_ratio: a generator's parameter; a dataset's spread is its percentiles",
    )
    _refused(
        lambda: RequestDataset.model_validate({**base, "kind": "generator", "samples": {**figure, "value": 5}}),
        "samples: a generator makes as many requests as asked; give samples for datasets only",
    )


def test_lengths_without_a_set_are_those_stated_else_the_defaults():
    assert resolve_lengths(None, 100, 50, defaults=(1.0, 2.0)) == RequestLengths(100.0, 50.0)
    assert resolve_lengths(None, None, None, defaults=(1.0, 2.0)) == RequestLengths(1.0, 2.0)
    with pytest.raises(ClusterSimError) as found:
        resolve_lengths("sharegpt", 10, None, defaults=(1.0, 2.0), fields=("input", "output"))
    assert str(found.value).startswith("input: the dataset 'sharegpt' sets the input length (mean 229.7 tokens)")
    assert (found.value.field, found.value.value) == ("input", 10)


def test_each_kind_of_length_says_how_it_is_drawn():
    straight = LengthSource("quantiles", 120.0, (0.0, 0.5, 1.0), (10.0, 100.0, 225.0))
    said = {
        LengthSource("fixed", 7.4): "every request 7.4 tokens",
        straight: "piecewise-linear through the set's percentiles, 10..225",
        LengthSource("quantiles", 90.0, (0.0, 0.5, 1.0), (10.0, 100.0, 225.0), segment_power=1.494): (
            "through the set's percentiles, 10..225, curved to the set's mean (power 1.49)"
        ),
        UNIFORM: "integer-uniform 8..12",
        LengthSource("exponential", 50.5, low_tokens=1.0, high_tokens=100.0): "uniform 1..100 (mean 50.5)",
        LengthSource("exponential", 229.7, low_tokens=1.0, high_tokens=1024.0, rate_per_token=0.004): (
            "largest-entropy exponential from 1 up to 1024, mean 229.7"
        ),
        LengthSource("exponential", 203.1, rate_per_token=0.005): "largest-entropy exponential from 1, mean 203.1",
    }
    assert {source: source.describe() for source in said} == said


def test_the_quantile_function_runs_through_its_knots_to_the_top():
    u = np.array([0.0, 0.1, 0.5, 0.75, 1.0])
    assert _through_knots(u, (0.0, 0.5, 1.0), (0.0, 10.0, 30.0), 1.0).tolist() == [0.0, 2.0, 10.0, 20.0, 30.0]
    assert _through_knots(u, (0.0, 0.5, 1.0), (0.0, 10.0, 30.0), 2.0) == pytest.approx([0.0, 0.4, 10.0, 15.0, 30.0])


def test_a_three_percentile_curve_extends_its_last_segments_line():
    curve = _quantile_source(_stats(min=10, percentiles={25: 50, 50: 100, 90: 200}), 100.0)
    assert curve.knots_tokens == (10.0, 50.0, 100.0, 200.0, 225.0)


def test_a_flat_or_unreachable_mean_holds_the_power_at_its_bounds():
    assert _power_for_mean((0.0, 0.5, 1.0), (5.0, 5.0, 5.0), 6.0) == 8.0  # no rise: the steepest
    assert _power_for_mean((0.0, 1.0), (0.0, 10.0), 0.0) == 8.0  # a mean at the floor
    assert _power_for_mean((0.0, 1.0), (0.0, 10.0), 2.5) == pytest.approx(3.0)  # 10 / (1 + p) = 2.5


def test_the_series_near_the_middle_gives_the_decay_to_first_order():
    """At a mean 5e-6 tokens past the middle of 1..100, share(x) = 0.5 - x / 12 gives x = -12 (target - 0.5)."""
    target = 0.5 + 5e-6 / 99.0
    assert _exponential_rate(50.5 + 5e-6, 1.0, 100.0) == pytest.approx(-12.0 * (target - 0.5) / 99.0, rel=1e-3)


def test_a_curved_set_is_stretched_on_its_own_curve():
    curved = _quantile_source(_stats(min=10, percentiles={50: 100, 90: 200}, mean=90), 90.0)
    assert curved.segment_power != 1.0
    stretched = _scaled(curved, 180.0)
    assert curve_mean(stretched.knots_q, stretched.knots_tokens, stretched.segment_power) == pytest.approx(180.0)


def _dataset(**sides: object) -> RequestDataset:
    return RequestDataset.model_validate({"kind": "dataset", "description": "abc", "used_by": "abc", "name": "t",
                                         **sides})  # fmt: skip


def test_a_mean_and_a_minimum_make_an_exponential_from_the_minimum_and_a_mean_there_is_fixed():
    figure = {"provenance": "derived", "source": "a test's own numbers"}
    found = _dataset(input={"mean": {"value": 50, **figure}, "min": {"value": 10, **figure}})
    assert length_source(found, "input", None, 50.0) == LengthSource(
        "exponential", 50.0, low_tokens=10.0, high_tokens=math.inf, rate_per_token=1.0 / 40.0
    )
    assert length_source(found, "input", None, 10.0) == LengthSource("fixed", 10.0)


def test_a_stated_length_beside_a_set_is_every_requests_unless_it_is_the_runs_mean():
    openorca = request_dataset("openorca")
    assert length_source(openorca, "input", 300.0, 300.0) == LengthSource("fixed", 300.0)
    scaled = length_source(openorca, "input", 300.0, 300.0, stated_is_mean=True)
    assert scaled.kind == "quantiles"
    assert curve_mean(scaled.knots_q, scaled.knots_tokens, scaled.segment_power) == pytest.approx(300.0)
    sampler = request_sampler("openorca", 200.0, 300.0, stated=(False, True), stated_means=True)
    assert sampler.output.kind != "fixed" and sampler.output.mean_tokens == 300.0


def test_vllms_random_generator_draws_each_length_of_its_range_alike():
    figure = {"value": 0.5, "provenance": "derived", "source": "a test's own numbers"}
    ranged = RequestDataset.model_validate({**request_dataset("random").model_dump(), "range_ratio": figure})
    assert length_source(ranged, "input", None, 100.0) == LengthSource(
        "uniform", 100.0, low_tokens=50.0, high_tokens=150.0
    )
    drawn = UNIFORM.draw(np.random.default_rng(2), 5000)
    counts = np.bincount(drawn, minlength=13)[8:13]
    assert np.all(np.abs(counts - 1000) < 120)  # a fifth each, not a rounded continuum's tenth at the ends
