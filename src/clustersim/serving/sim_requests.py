"""The requests of a simulated serving run: their prompt and output lengths, and when they arrive.

Lengths are drawn per request from a request set (``clustersim.serving.datasets``), one side at a time:

* **percentiles given**: a quantile function through them, from the set's minimum (else its lowest
  percentile, flat below it) to its maximum (else the last two percentiles' line carried on to the 100th).
  Between two percentiles it is a power of the fraction of the way, ``v_i + (v_i+1 - v_i) f**power``, one
  power for every segment, chosen so that the curve's mean is the set's stated mean: a straight line
  (power 1) puts each segment's mean at its middle, and over OpenOrca's skewed prompts its mean is 233
  tokens against the 222 the set averages (power 1.49 meets it; the closed forms take 222, and near a
  server's highest rate 5% more prompt work moved the simulated TPOT by a quarter). Every stated percentile
  is kept; the power is held to [1/8, 8] where no power in between meets the mean;
* **only a mean** (and maybe extremes): the distribution of largest entropy with that mean on the set's
  range, a truncated exponential on [min or 1, max or unbounded] (ShareGPT's outputs: exponential, mean 203;
  a mean past the middle of a bounded range: a rising one);
* **a length stated** (``--input``/``--output``, the ``fixed`` generator): every request has it, except where
  it is a run's mean beside a request set (a ground-truth case's lengths, ``stated_means``): the set's shape
  (its percentiles scaled, or the exponential above) with that mean;
* the ``random`` generator: vLLM's integer-uniform range ``[floor(L (1 - r)), ceil(L (1 + r))]``.

Draws are rounded to whole tokens, at least one. Arrivals: Poisson at a rate, or a trace file
(``clustersim.serving.traces``); a closed loop makes its arrivals as requests finish
(``clustersim.serving.sim_scheduler``). Everything is seeded through a ``numpy.random.Generator``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.serving.datasets import DatasetKind, LengthStats, RequestDataset, Which, request_dataset

POWER_RANGE = (1.0 / 8.0, 8.0)  # the segment power of a quantile curve (module docstring)
IN_FLIGHT_POINTS = 4096  # of the midpoint rule over a length's quantile function (LengthSource.in_flight_mean)
QUANTILE_POINTS = 512  # lengths the closed forms carry per side (Request.input_tokens_quantiles)

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class LengthSource:
    """How one side's lengths are drawn: ``kind`` is fixed, quantiles, exponential or uniform."""

    kind: str
    mean_tokens: float  # the stated or parameter mean (quantiles: the stated mean, else the curve's)
    knots_q: tuple[float, ...] = ()  # quantiles: cumulative probabilities 0..1
    knots_tokens: tuple[float, ...] = ()  # quantiles: lengths at them
    segment_power: float = 1.0  # quantiles: the shape between knots (1: straight)
    low_tokens: float = 1.0  # exponential / uniform: the range
    high_tokens: float = math.inf
    rate_per_token: float = 0.0  # exponential: the decay (0: uniform on the range)

    def draw(self, rng: np.random.Generator, count: int) -> IntArray:
        """``count`` lengths in whole tokens, at least 1."""
        if self.kind == "fixed":
            values = np.full(count, self.mean_tokens)
        elif self.kind == "uniform":
            values = rng.integers(int(self.low_tokens), int(self.high_tokens) + 1, count).astype(np.float64)
        else:
            values = self._quantile(rng.random(count))
        return np.asarray(np.maximum(np.rint(values), 1), dtype=np.int64)

    def _quantile(self, u: FloatArray) -> FloatArray:
        """The continuous length at cumulative probability ``u`` (quantiles or exponential)."""
        if self.kind == "quantiles":
            return _through_knots(u, self.knots_q, self.knots_tokens, self.segment_power)
        return _truncated_exponential(u, self.low_tokens, self.high_tokens, self.rate_per_token)

    def in_flight_mean(self) -> float:
        """``E[L^2] / E[L]`` of the lengths drawn: the mean output of the requests in flight, each in flight for as
        long as its output (the inspection paradox), where ``E[L]`` is a request's."""
        if self.kind == "fixed":
            return self.mean_tokens
        if self.kind == "uniform":
            values = np.arange(int(self.low_tokens), int(self.high_tokens) + 1, dtype=np.float64)
        else:
            values = self.at_quantiles(IN_FLIGHT_POINTS)  # the midpoint rule
        return float(np.sum(values**2) / np.sum(values))

    def at_quantiles(self, points: int) -> FloatArray:
        """The lengths at ``points`` evenly spaced quantiles (midpoints), at least 1 token each."""
        u = (np.arange(points) + 0.5) / points
        if self.kind == "fixed":
            values = np.full(points, self.mean_tokens)
        elif self.kind == "uniform":
            values = np.floor(self.low_tokens + (self.high_tokens - self.low_tokens + 1.0) * u)
        else:
            values = self._quantile(u)
        return np.asarray(np.maximum(values, 1.0), dtype=np.float64)

    def describe(self) -> str:
        """How the lengths are drawn, in a phrase."""
        if self.kind == "fixed":
            return f"every request {self.mean_tokens:g} tokens"
        if self.kind == "quantiles":
            ends = f"{self.knots_tokens[0]:g}..{self.knots_tokens[-1]:g}"
            if self.segment_power == 1.0:
                return f"piecewise-linear through the set's percentiles, {ends}"
            return f"through the set's percentiles, {ends}, curved to the set's mean (power {self.segment_power:.2f})"
        if self.kind == "uniform":
            return f"integer-uniform {self.low_tokens:g}..{self.high_tokens:g}"
        if self.rate_per_token == 0.0:
            return f"uniform {self.low_tokens:g}..{self.high_tokens:g} (mean {self.mean_tokens:g})"
        top = "" if math.isinf(self.high_tokens) else f" up to {self.high_tokens:g}"
        return f"largest-entropy exponential from {self.low_tokens:g}{top}, mean {self.mean_tokens:g}"

    @property
    def max_tokens(self) -> float:
        """The longest length it can draw (inf: unbounded)."""
        if self.kind == "fixed":
            return self.mean_tokens
        if self.kind == "quantiles":
            return self.knots_tokens[-1]
        return self.high_tokens


def _through_knots(u: FloatArray, knots_q: tuple[float, ...], knots: tuple[float, ...], power: float) -> FloatArray:
    """The quantile function at ``u``: between knots, ``v_i + (v_i+1 - v_i) f**power``."""
    q, v = np.asarray(knots_q), np.asarray(knots)
    segment = np.clip(np.searchsorted(q, u, side="right") - 1, 0, len(q) - 2)
    width = q[segment + 1] - q[segment]
    fraction = np.clip((u - q[segment]) / np.where(width > 0, width, 1.0), 0.0, 1.0)
    return np.asarray(v[segment] + (v[segment + 1] - v[segment]) * fraction**power, dtype=np.float64)


def curve_mean(knots_q: Sequence[float], knots: Sequence[float], power: float = 1.0) -> float:
    """The mean of the quantile curve through the knots: a segment's mean is ``v_i + (v_i+1 - v_i) / (1 + power)``."""
    q, v = np.diff(np.asarray(knots_q)), np.asarray(knots, dtype=np.float64)
    return float(np.sum(q * (v[:-1] + np.diff(v) / (1.0 + power))))


def _power_for_mean(knots_q: Sequence[float], knots: Sequence[float], mean_tokens: float) -> float:
    """The segment power whose curve has ``mean_tokens``, held to ``POWER_RANGE``."""
    q, v = np.diff(np.asarray(knots_q)), np.asarray(knots, dtype=np.float64)
    floor, rise = float(np.sum(q * v[:-1])), float(np.sum(q * np.diff(v)))
    low, high = POWER_RANGE
    if rise <= 0.0 or mean_tokens <= floor:
        return high
    return float(min(max(rise / (mean_tokens - floor) - 1.0, low), high))


def _truncated_exponential(u: FloatArray, low: float, high: float, rate: float) -> FloatArray:
    """Inverse CDF of an exponential of ``rate`` from ``low``, cut at ``high`` (rate 0: uniform)."""
    if rate == 0.0:
        return low + u * (high - low)
    if rate < 0.0:  # a rising density: the falling one mirrored about the middle of the range
        return low + high - _truncated_exponential(1.0 - u, low, high, -rate)
    mass = 1.0 if math.isinf(high) else -math.expm1(-rate * (high - low))
    return low - np.log1p(-u * mass) / rate


def _exponential_rate(mean: float, low: float, high: float) -> float:
    """The decay whose exponential on [low, high] has ``mean``: negative (a rising density) where the mean is
    past the middle, 0 (uniform) at it; unbounded above, ``1 / (mean - low)``."""
    if math.isinf(high):
        return 1.0 / (mean - low)
    width = high - low
    target = min(max((mean - low) / width, 1e-9), 1.0 - 1e-9)

    def share(x: float) -> float:  # the mean's share of the range at decay x / width, falling from 1 to 0
        if abs(x) < 1e-6:
            return 0.5 - x / 12.0
        return 1.0 / x - (1.0 / math.expm1(x) if x < 700.0 else 0.0)

    lo, hi = -1e7, 1e7
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if share(mid) > target else (lo, mid)
    x = 0.5 * (lo + hi)
    return 0.0 if abs(x) < 1e-9 else x / width


def length_source(
    dataset: RequestDataset | None,
    which: Which,
    stated_tokens: float | None,
    mean_tokens: float,
    *,
    stated_is_mean: bool = False,
) -> LengthSource:
    """How ``which`` side's lengths are drawn for a run of ``dataset`` (None: none), the length stated
    beside it (None: not stated) and the run's mean ``mean_tokens`` (the closed forms' input). A stated
    length is every request's, or with ``stated_is_mean`` the mean of the set's lengths in that run."""
    if dataset is None or (stated_tokens is not None and dataset.kind is DatasetKind.DATASET and not stated_is_mean):
        return LengthSource("fixed", float(mean_tokens))
    if dataset.kind is DatasetKind.GENERATOR:
        ratio = dataset.range_ratio.value if dataset.range_ratio is not None else 0.0
        if ratio == 0.0:
            return LengthSource("fixed", float(mean_tokens))
        low = float(max(math.floor(mean_tokens * (1.0 - ratio)), 1))
        return LengthSource(
            "uniform", float(mean_tokens), low_tokens=low, high_tokens=math.ceil(mean_tokens * (1 + ratio))
        )
    stats: LengthStats = getattr(dataset, which)
    if stats.percentiles is not None:
        curve = _quantile_source(stats, mean_tokens)
        return curve if stated_tokens is None else _scaled(curve, float(stated_tokens))
    low = stats.min.value if stats.min is not None else 1.0
    high = stats.max.value if stats.max is not None else math.inf
    if not low < mean_tokens < high:
        return LengthSource("fixed", float(mean_tokens))
    rate = _exponential_rate(mean_tokens, low, high)
    return LengthSource("exponential", float(mean_tokens), low_tokens=low, high_tokens=high, rate_per_token=rate)


def _quantile_source(stats: LengthStats, mean_tokens: float) -> LengthSource:
    assert stats.percentiles is not None
    q = [p / 100.0 for p in stats.percentiles.values]
    v = [float(x) for x in stats.percentiles.values.values()]
    low = stats.min.value if stats.min is not None else v[0]
    if stats.max is not None:
        high = float(stats.max.value)
    elif len(v) > 1:
        high = v[-1] + (v[-1] - v[-2]) * (1.0 - q[-1]) / (q[-1] - q[-2])
    else:
        high = v[-1]
    knots_q, knots = (0.0, *q, 1.0), (float(low), *v, high)
    power = _power_for_mean(knots_q, knots, stats.mean.value) if stats.mean is not None else 1.0
    return LengthSource("quantiles", float(mean_tokens), knots_q, knots, segment_power=power)


def _scaled(curve: LengthSource, mean_tokens: float) -> LengthSource:
    """A quantile curve stretched to ``mean_tokens`` (its shape kept)."""
    factor = mean_tokens / curve_mean(curve.knots_q, curve.knots_tokens, curve.segment_power)
    knots = tuple(float(x) * factor for x in curve.knots_tokens)
    return LengthSource("quantiles", mean_tokens, curve.knots_q, knots, segment_power=curve.segment_power)


@dataclass(frozen=True)
class RequestLengthSampler:
    """Both sides of a run's requests, and the set they come from (None: the lengths given)."""

    input: LengthSource
    output: LengthSource
    dataset: str | None = None

    def draw(self, rng: np.random.Generator, count: int) -> tuple[IntArray, IntArray]:
        """Prompt and output lengths of ``count`` requests."""
        return self.input.draw(rng, count), self.output.draw(rng, count)


def request_sampler(
    dataset: str | None,
    input_tokens: float,
    output_tokens: float,
    *,
    stated: tuple[bool, bool] = (False, False),
    stated_means: bool = False,
) -> RequestLengthSampler:
    """The lengths of a run: ``dataset`` (None: every request at ``input_tokens``/``output_tokens``), its
    means ``input_tokens``/``output_tokens`` (``clustersim.serving.datasets.resolve_lengths``), and which of
    them were stated beside it (a stated length is every request's; with ``stated_means``, as a ground-truth
    case's lengths are, the run's mean of the set's lengths)."""
    found = None if dataset is None else request_dataset(dataset)
    return RequestLengthSampler(
        length_source(found, "input", input_tokens if stated[0] else None, input_tokens, stated_is_mean=stated_means),
        length_source(
            found, "output", output_tokens if stated[1] else None, output_tokens, stated_is_mean=stated_means
        ),
        None if found is None else found.name,
    )


def poisson_arrivals(rng: np.random.Generator, rate_per_s: float, count: int) -> FloatArray:
    """Arrival times (s, from 0) of ``count`` requests of a Poisson process at ``rate_per_s``."""
    if not rate_per_s > 0 or not math.isfinite(rate_per_s):
        raise ClusterSimError(f"rate: must be a positive number of requests/s, got {rate_per_s}", field="rate")
    gaps = rng.exponential(1.0 / rate_per_s, count)
    return np.asarray(np.cumsum(gaps) - gaps[0], dtype=np.float64)


def in_flight_output_tokens(sampler: RequestLengthSampler) -> float | None:
    """The mean output of a run's requests in flight, ``E[o^2] / E[o]`` (``Request.output_tokens_in_flight``);
    None where every request has the same output."""
    return None if sampler.output.kind == "fixed" else sampler.output.in_flight_mean()


def length_quantiles(source: LengthSource) -> tuple[float, ...] | None:
    """One side's lengths at ``QUANTILE_POINTS`` evenly spaced quantiles, scaled to the run's mean
    (``Request.input_tokens_quantiles``, ``output_tokens_quantiles``: the closed forms price a prompt's attention,
    which grows with its square, the wait behind long prompts, and the prompts after a request's first token
    over them); None where every request has the same length."""
    if source.kind == "fixed":
        return None
    values = source.at_quantiles(QUANTILE_POINTS)
    values = values * (source.mean_tokens / float(np.mean(values)))  # the midpoint rule's mean is near it
    return tuple(float(v) for v in values)


class RequestSpread(TypedDict):
    """The fields of ``Request`` that describe a run's spread of lengths (``request_spread``)."""

    output_tokens_in_flight: float | None
    input_tokens_quantiles: tuple[float, ...] | None
    output_tokens_quantiles: tuple[float, ...] | None


def request_spread(sampler: RequestLengthSampler) -> RequestSpread:
    """What the closed forms take of a run's spread of lengths (``Request(..., **request_spread(sampler))``): the
    mean output in flight and both sides' lengths at evenly spaced quantiles (None where all are the mean)."""
    return RequestSpread(
        output_tokens_in_flight=in_flight_output_tokens(sampler),
        input_tokens_quantiles=length_quantiles(sampler.input),
        output_tokens_quantiles=length_quantiles(sampler.output),
    )
