"""A seeded Monte-Carlo simulation of whole runs with exponential failures, vectorized over runs.

The model is Daly's (``reliability.failures``): each segment of ``L = tau + delta`` seconds is tried until
an attempt survives; the first attempt is ``L`` long, every retry ``R + L`` (a restart, then the
segment again; a failure during either starts the retry over). Per run, drawn at once for all runs:

* failed first attempts: Binomial(segments, 1 - e^(-L/M));
* failed retries: NegativeBinomial(failed first attempts, e^(-(R+L)/M)) (failures before that many
  successes);
* each failed attempt loses a time drawn from the exponential truncated to the attempt's length,
  ``-M ln(1 - u (1 - e^(-x/M)))``;
* wall time = segments x L + failed first attempts x R (each ends in a successful retry) + the losses.

The last, shorter segment (when the work does not divide) is drawn the same way. The mean converges to
``expected_run``'s closed form; the spread is what a single run may see.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.reliability.failures import check_time_s, expected_run, segments

MAX_RUNS = 1_000_000
MAX_FAILURE_DRAWS = 5e7  # failures drawn over all runs (memory: ~16 bytes each)
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class RunSpread:
    """Wall times of ``len(time_s)`` simulated runs and their failures."""

    time_s: FloatArray
    failures: npt.NDArray[np.int64]
    work_s: float

    @property
    def mean_s(self) -> float:
        """Mean wall time."""
        return float(self.time_s.mean())

    @property
    def std_error_s(self) -> float:
        """Standard error of the mean (the spread taken on times scaled to their largest, so that times near the
        float range do not overflow its squares)."""
        if self.time_s.size < 2:
            return 0.0
        scale = float(np.max(np.abs(self.time_s))) or 1.0
        return float(scale * (self.time_s / scale).std(ddof=1) / np.sqrt(self.time_s.size))

    def percentile_s(self, q: float) -> float:
        """The ``q``-th percentile of the wall time."""
        return float(np.percentile(self.time_s, q))

    @property
    def goodput(self) -> FloatArray:
        """Each run's useful work over its wall time."""
        return self.work_s / self.time_s


BINOMIAL_MAX_TRIALS = 2**62  # numpy's binomial takes its trials as a C long


def _truncated_losses(
    rng: np.random.Generator, counts: npt.NDArray[np.int64], length_s: float, mtbf_s: float
) -> FloatArray:
    """Per run, the sum of ``counts[i]`` exponential draws truncated to ``[0, length_s)``."""
    total = int(counts.sum())
    if total == 0:
        return np.zeros(counts.size)
    u = rng.random(total)
    losses = -mtbf_s * np.log1p(-u * -np.expm1(-length_s / mtbf_s))
    runs = np.repeat(np.arange(counts.size), counts)
    return np.asarray(np.bincount(runs, weights=losses, minlength=counts.size), dtype=np.float64)


def _segments(
    rng: np.random.Generator, num_runs: int, count: int, length_s: float, mtbf_s: float, restart_s: float
) -> tuple[FloatArray, npt.NDArray[np.int64]]:
    """Wall time and failures of ``count`` segments of ``length_s``, for each run."""
    if count == 0:
        return np.zeros(num_runs), np.zeros(num_runs, dtype=np.int64)
    fails = -np.expm1(-length_s / mtbf_s)
    if count < BINOMIAL_MAX_TRIALS:
        first = rng.binomial(count, fails, size=num_runs).astype(np.int64)
    else:  # beyond a C long's trials: the Poisson limit (the draw guard keeps count x fails small)
        first = rng.poisson(float(count) * fails, size=num_runs).astype(np.int64)
    retry_survives = float(np.exp(-(restart_s + length_s) / mtbf_s))
    retries = np.zeros(num_runs, dtype=np.int64)
    failed = first > 0
    if failed.any():
        retries[failed] = rng.negative_binomial(first[failed], retry_survives)
    time = count * length_s + first * restart_s
    time = time + _truncated_losses(rng, first, length_s, mtbf_s)
    time = time + _truncated_losses(rng, retries, restart_s + length_s, mtbf_s)
    return time, first + retries


def simulate_runs(
    work_s: float,
    *,
    interval_s: float,
    checkpoint_s: float,
    restart_s: float,
    mtbf_s: float,
    num_runs: int = 10_000,
    seed: int = 0,
) -> RunSpread:
    """``num_runs`` runs of ``work_s`` of work checkpointed every ``interval_s`` (the same seed gives the
    same runs)."""
    if isinstance(num_runs, bool) or not isinstance(num_runs, int | np.integer) or not 1 <= num_runs <= MAX_RUNS:
        raise ClusterSimError(
            f"runs: must be a whole number from 1 to {MAX_RUNS:,}, got {num_runs!r}", field="runs", value=num_runs
        )
    check_time_s("checkpoint_s", checkpoint_s, positive=False)
    check_time_s("restart_s", restart_s, positive=False)
    check_time_s("mtbf_s", mtbf_s)
    full, rest = segments(work_s, interval_s)
    expected = expected_run(
        work_s, interval_s=interval_s, checkpoint_s=checkpoint_s, restart_s=restart_s, mtbf_s=mtbf_s
    ).expected_failures
    if not expected * num_runs <= MAX_FAILURE_DRAWS:
        raise ClusterSimError(
            f"runs: {num_runs:,} runs of ~{expected:,.3g} failures each is more than {MAX_FAILURE_DRAWS:,.0f} draws; "
            f"use fewer runs (the formula's mean does not need them)",
            field="runs",
            value=num_runs,
        )
    rng = np.random.default_rng(seed)
    time, failures = _segments(rng, num_runs, full, interval_s + checkpoint_s, mtbf_s, restart_s)
    if rest:
        extra_time, extra_failures = _segments(rng, num_runs, 1, rest + checkpoint_s, mtbf_s, restart_s)
        time, failures = time + extra_time, failures + extra_failures
    return RunSpread(time_s=time, failures=failures, work_s=work_s)
