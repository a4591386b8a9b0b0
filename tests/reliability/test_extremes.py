"""Extreme inputs of the failure model: an interval longer than the work, a run that never finishes
(the expected time beyond a float), a vanishing failure rate; each an answer or a one-line refusal."""

import math

import pytest

from clustersim.errors import ClusterSimError
from clustersim.reliability.failures import expected_run, segments, young_interval_s
from clustersim.reliability.montecarlo import simulate_runs
from clustersim.reliability.plan import Policy, sensitivity

DAY = 86400.0


def test_an_interval_longer_than_the_work_is_one_segment_not_none():
    assert segments(10 * DAY, 1e300) == (0, 10 * DAY)
    run = expected_run(10 * DAY, interval_s=1e300, checkpoint_s=60, restart_s=600, mtbf_s=1e299)
    assert run.num_checkpoints == 1
    assert run.expected_time_s == pytest.approx(10 * DAY + 60)
    assert 0 < run.goodput < 1


def test_a_vanishing_failure_rate_is_the_failure_free_run():
    policy = Policy(work_s=30 * DAY, checkpoint_s=60, restart_s=1200, mtbf_s=3600 / 1.6e-296)
    run = policy.run()
    assert run.expected_time_s == pytest.approx(30 * DAY + 60)
    assert math.isfinite(policy.young_s) and math.isfinite(policy.daly_s)
    assert all(math.isfinite(row.run.expected_time_s) for row in sensitivity(policy))


def test_young_interval_does_not_overflow():
    assert young_interval_s(1e300, 1e300) == pytest.approx(math.sqrt(2) * 1e300)


@pytest.mark.parametrize(
    ("checkpoint_s", "restart_s", "mtbf_s", "field"),
    [
        (60, 1200, 0.22, "mtbf_s"),  # a 1 h segment against a 0.22 s MTBF: the segment's e^(L/M) overflows
        (1e300, 1200, 3.1 * 3600, "checkpoint_s"),  # the checkpoint is the segment
        (60, 1e300, 3.1 * 3600, "restart_s"),  # e^(R/M) overflows
        (60, 20 * DAY * 1e18, 3.1 * 3600, "restart_s"),
        (5000, 4000, 0.5, "checkpoint_s"),  # a segment of 1 h + 5,000 s beyond the restart, mostly checkpoint
        (60, 3660, 0.5, "restart_s"),  # a restart as long as the segment: the restart
    ],
)
def test_a_run_that_never_finishes_is_refused_naming_the_input_that_overflows(checkpoint_s, restart_s, mtbf_s, field):
    with pytest.raises(ClusterSimError, match="never finishes") as err:
        expected_run(30 * DAY, interval_s=3600, checkpoint_s=checkpoint_s, restart_s=restart_s, mtbf_s=mtbf_s)
    assert "MTBF" in str(err.value) and "restart" in str(err.value)
    inputs = {"checkpoint_s": checkpoint_s, "restart_s": restart_s, "mtbf_s": mtbf_s}
    assert err.value.field == field and err.value.value == inputs[field]


def test_sensitivity_names_the_scaled_input_that_never_finishes():
    # The baseline finishes (barely), twice the failure rate does not fit a float.
    policy = Policy(work_s=DAY, checkpoint_s=1, restart_s=500.0, mtbf_s=1.0, interval_s=1.0)
    policy.run()
    with pytest.raises(ClusterSimError, match="failure rate x2"):
        sensitivity(policy)


def test_a_given_interval_longer_than_the_work_prices_the_work_once():
    run = expected_run(30 * DAY, interval_s=1e300, checkpoint_s=60, restart_s=1200, mtbf_s=30 * DAY)
    assert run.num_checkpoints == 1 and math.isfinite(run.expected_time_s) and run.expected_time_s > 30 * DAY


def test_more_checkpoints_than_a_float_counts_are_refused():
    with pytest.raises(ClusterSimError, match=r"more than .* checkpoints") as err:
        segments(1e20, 1e-300)
    assert err.value.field == "interval_s"


def test_more_segments_than_a_c_long_counts_draw_their_failures_from_the_poisson_limit():
    """1e300 s of work in 2 h intervals is ~1.4e296 segments, past numpy's binomial (a C long of trials):
    failures come from the Poisson limit, and with a vanishing rate every run is failure-free."""
    spread = simulate_runs(1e300, interval_s=7200.0, checkpoint_s=1.0, restart_s=0.0, mtbf_s=1e305, num_runs=20)
    assert spread.failures.max() == 0 and spread.time_s.min() == pytest.approx(1e300 * 7201 / 7200, rel=1e-9)
    busy = simulate_runs(1e300, interval_s=7200.0, checkpoint_s=0.0, restart_s=0.0, mtbf_s=1e299, num_runs=200)
    assert 5 < busy.failures.mean() < 15  # Poisson with a mean of work / MTBF = 10
