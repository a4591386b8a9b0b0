"""The Monte-Carlo runs against Daly's closed form and the checkpoint policy's sensitivity table: means within
standard errors of ``expected_run``, failures counted per run, the last shorter segment, seeds, the limits on runs
and drawn failures, the interval chosen or given, and each input scaled one at a time."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.reliability import montecarlo
from clustersim.reliability.failures import daly_interval_s, expected_run, young_interval_s
from clustersim.reliability.montecarlo import MAX_RUNS, RunSpread, simulate_runs
from clustersim.reliability.plan import Policy, sensitivity

HOUR = 3600.0
DAY = 86400.0
M = 3 * HOUR  # a job MTBF of three hours
# Tolerance of the statistical checks, in standard errors of the mean: over 2,000+ runs the mean is normal to a
# good approximation and strays this far with probability ~7e-6; the seeds are fixed, so each check is deterministic.
Z = 4.5
NO_FAILURES = {"checkpoint_s": 30.0, "restart_s": 600.0, "mtbf_s": 1e30}  # a failure within a run: ~1e-25


def within(spread: RunSpread, run) -> None:
    """The simulated mean time and mean failures within ``Z`` standard errors of the closed form."""
    assert abs(spread.mean_s - run.expected_time_s) <= Z * spread.std_error_s
    counts = RunSpread(time_s=spread.failures.astype(np.float64), failures=spread.failures, work_s=spread.work_s)
    assert abs(counts.mean_s - run.expected_failures) <= Z * counts.std_error_s


# --- simulate_runs against the closed form -------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    intervals=st.floats(0.3, 12.0),  # the work in intervals; a fraction is the last, shorter segment
    interval=st.floats(0.05, 1.5),  # interval / MTBF
    checkpoint=st.floats(0.0, 0.2),  # checkpoint / MTBF
    restart=st.floats(0.0, 1.0),  # restart / MTBF
)
def test_the_mean_run_and_its_failures_converge_to_the_closed_form(intervals, interval, checkpoint, restart):
    """Over 2,000 runs the mean wall time and the mean failures per run lie within 4.5 standard errors of
    ``expected_run`` (time and time / MTBF), whole intervals or not."""
    kw = {"interval_s": interval * M, "checkpoint_s": checkpoint * M, "restart_s": restart * M, "mtbf_s": M}
    work = intervals * interval * M
    spread = simulate_runs(work, num_runs=2000, seed=5, **kw)
    within(spread, expected_run(work, **kw))


def test_one_segment_is_retried_until_an_attempt_survives():
    """A single segment of half the MTBF with a restart of a whole MTBF: one failed first attempt starts retries
    that fail about as often as not (e^(-1.5) survive), and the failures per run count every one of them."""
    kw = {"interval_s": 0.5 * M, "checkpoint_s": 0.0, "restart_s": M, "mtbf_s": M}
    spread = simulate_runs(0.5 * M, num_runs=4000, seed=9, **kw)
    run = expected_run(0.5 * M, **kw)
    assert run.expected_failures == pytest.approx(math.e * math.expm1(0.5))  # e^(R/M) (e^(L/M) - 1) = 1.76
    within(spread, run)
    assert spread.failures.max() > 1


def test_a_run_with_no_failures_possible_is_its_segments_exactly():
    """With an MTBF of 1e30 s no run fails: each takes segments x (interval + checkpoint) exactly, the last,
    shorter segment its work plus a checkpoint."""
    whole = simulate_runs(10 * HOUR, interval_s=HOUR, num_runs=50, seed=3, **NO_FAILURES)
    assert np.all(whole.time_s == 10 * (HOUR + 30.0)) and np.all(whole.failures == 0)
    partial = simulate_runs(10.5 * HOUR, interval_s=HOUR, num_runs=50, seed=3, **NO_FAILURES)
    assert np.all(partial.time_s == 10 * (HOUR + 30.0) + (HOUR / 2 + 30.0)) and np.all(partial.failures == 0)


def test_work_shorter_than_an_interval_is_one_shorter_segment_drawn_the_same_way():
    """Work of 0.8 MTBF under an interval of 4 MTBF is one segment of 0.8 MTBF plus a checkpoint: its failures are
    counted in integers, none negative, and the means match the closed form."""
    kw = {"interval_s": 4 * M, "checkpoint_s": 0.05 * M, "restart_s": 0.1 * M, "mtbf_s": M}
    spread = simulate_runs(0.8 * M, num_runs=3000, seed=2, **kw)
    assert spread.failures.dtype == np.int64
    assert spread.failures.min() == 0 and spread.failures.max() >= 2
    within(spread, expected_run(0.8 * M, **kw))


def test_each_failure_loses_time_within_its_attempt():
    """One segment of L = M/2 and restarts of R = M/5, one run per seed: no failure takes L exactly; one or more
    take more than L + R (the failed first attempt lost some time, then a restart) and less than L + f (R + L)
    (each failed attempt loses less than its length)."""
    length, restart = 0.5 * M, 0.2 * M
    single = 0
    for seed in range(40):
        spread = simulate_runs(length, interval_s=length, checkpoint_s=0.0, restart_s=restart, mtbf_s=M, num_runs=1,
                               seed=seed)  # fmt: skip
        time, failures = float(spread.time_s[0]), int(spread.failures[0])
        if failures == 0:
            assert time == length
        else:
            assert length + restart < time < length + failures * (restart + length), (seed, failures)
        single += failures == 1
    assert single >= 3  # the seeds do hold runs with exactly one failure


def test_the_model_has_no_unit_an_mtbf_under_a_second_included():
    """Every time multiplied by 2^-14 (an MTBF of 0.66 s) gives the same draws times 2^-14, exactly."""
    kw = {"interval_s": 0.4 * M, "checkpoint_s": 0.02 * M, "restart_s": 0.1 * M, "mtbf_s": M}
    scale = 2.0**-14
    runs = simulate_runs(5.5 * M, num_runs=500, seed=8, **kw)
    small = simulate_runs(5.5 * M * scale, num_runs=500, seed=8, **{k: v * scale for k, v in kw.items()})
    assert small.time_s.tobytes() == (runs.time_s * scale).tobytes()
    assert small.failures.tobytes() == runs.failures.tobytes() and runs.failures.sum() > 0


def test_defaults_are_ten_thousand_runs_from_seed_zero():
    """Without ``num_runs`` and ``seed``: 10,000 runs drawn from seed 0; the same seed gives the same draws,
    another seed other draws."""
    kw = {"interval_s": HOUR, "checkpoint_s": 30.0, "restart_s": 600.0, "mtbf_s": 30 * HOUR}
    default = simulate_runs(10 * HOUR, **kw)
    assert default.time_s.size == 10_000 and default.failures.size == 10_000
    same = simulate_runs(10 * HOUR, num_runs=10_000, seed=0, **kw)
    other = simulate_runs(10 * HOUR, num_runs=10_000, seed=1, **kw)
    assert default.time_s.tobytes() == same.time_s.tobytes() and default.failures.tobytes() == same.failures.tobytes()
    assert default.time_s.tobytes() != other.time_s.tobytes()


def test_percentiles_ordered_and_goodput_is_the_work_over_each_runs_time():
    """Percentiles rise from the fastest run to the slowest; each run's goodput is the work over its wall time,
    never above the failure-free run's."""
    kw = {"interval_s": 0.5 * M, "checkpoint_s": 60.0, "restart_s": 900.0, "mtbf_s": M}
    work = 20 * M
    spread = simulate_runs(work, num_runs=1000, seed=4, **kw)
    quantiles = [spread.percentile_s(q) for q in (0, 5, 50, 95, 100)]
    assert quantiles == sorted(quantiles) and quantiles[0] < quantiles[-1]
    assert quantiles[0] == spread.time_s.min() and quantiles[-1] == spread.time_s.max()
    assert spread.work_s == work
    np.testing.assert_array_equal(spread.goodput, work / spread.time_s)
    assert spread.goodput.max() <= work / (work + 40 * 60.0) and spread.goodput.min() > 0


def test_standard_error_of_the_mean():
    """The sample spread (n - 1) over sqrt(n); zero for a single run; finite for times near the float range."""

    def error(*times: float) -> float:
        return RunSpread(np.array(times), np.zeros(len(times), dtype=np.int64), 1.0).std_error_s

    assert error(5.0) == 0.0
    assert error(1.0, 3.0) == pytest.approx(1.0)  # sd sqrt(2), over sqrt(2)
    assert error(1.0, 2.0, 3.0) == pytest.approx(1 / math.sqrt(3))  # sd 1
    assert error(1e308, 1.7e308) == pytest.approx(0.35e308)


def test_runs_from_one_to_max_runs_both_included():
    """One run and ``MAX_RUNS`` runs are simulated; zero, one more than the limit, a negative count and a bool are
    refused naming the field ``runs``, the value and the range."""
    assert simulate_runs(HOUR, interval_s=HOUR, num_runs=1, **NO_FAILURES).time_s.size == 1
    assert simulate_runs(HOUR, interval_s=HOUR, num_runs=MAX_RUNS, **NO_FAILURES).time_s.size == MAX_RUNS
    for bad in (0, MAX_RUNS + 1, -3, True):
        with pytest.raises(ClusterSimError, match="runs: must be a whole number from 1 to 1,000,000") as err:
            simulate_runs(HOUR, interval_s=HOUR, num_runs=bad, **NO_FAILURES)
        assert err.value.field == "runs" and err.value.value is bad and f"got {bad!r}" in str(err.value)


def test_the_draw_limit_is_inclusive_and_names_the_runs(monkeypatch):
    """Runs whose expected failures reach the draw limit exactly are simulated; one run more is refused naming the
    field ``runs`` and the count (the limit lowered to 40 runs' worth so the check stays small)."""
    kw = {"interval_s": HOUR, "checkpoint_s": 60.0, "restart_s": 600.0, "mtbf_s": 5 * HOUR}
    expected = expected_run(DAY, **kw).expected_failures
    monkeypatch.setattr(montecarlo, "MAX_FAILURE_DRAWS", expected * 40)
    assert simulate_runs(DAY, num_runs=40, **kw).time_s.size == 40
    with pytest.raises(ClusterSimError, match="use fewer runs") as err:
        simulate_runs(DAY, num_runs=41, **kw)
    assert err.value.field == "runs" and err.value.value == 41 and "41 runs" in str(err.value)


def test_too_many_draws_under_the_real_limit_names_the_runs():
    """1,000 runs of a million days of work at a 3 h MTBF would draw ~8e7 failures each: refused with the count."""
    with pytest.raises(ClusterSimError, match="more than 50,000,000 draws") as err:
        simulate_runs(1e6 * DAY, interval_s=HOUR, checkpoint_s=60, restart_s=600, mtbf_s=M, num_runs=1000)
    assert err.value.field == "runs" and err.value.value == 1000 and "1,000 runs" in str(err.value)


@pytest.mark.parametrize(
    ("checkpoint_s", "restart_s", "mtbf_s"),
    [(-1.0, 600.0, M), (60.0, -1.0, M), (math.nan, 600.0, M), (60.0, 600.0, 0.0), (60.0, 600.0, -M)],
)
def test_negative_times_or_a_non_positive_mtbf_are_refused_before_any_draw(checkpoint_s, restart_s, mtbf_s):
    """A negative (or NaN) checkpoint or restart time, or an MTBF not above zero, is refused naming that input,
    its value and what is valid."""
    with pytest.raises(ClusterSimError) as err:
        simulate_runs(DAY, interval_s=HOUR, checkpoint_s=checkpoint_s, restart_s=restart_s, mtbf_s=mtbf_s)
    inputs = [("checkpoint_s", checkpoint_s, "zero or more"), ("restart_s", restart_s, "zero or more"),
              ("mtbf_s", mtbf_s, "positive")]  # fmt: skip
    name, value, rule = next((n, v, r) for n, v, r in inputs if not (v > 0 if r == "positive" else v >= 0))
    assert str(err.value) == f"{name}: must be a finite number, {rule}, got {value!r}"
    assert err.value.field == name and (err.value.value == value or math.isnan(value))


@pytest.mark.parametrize("runs", [10.5, "5", None])
def test_a_run_count_that_is_not_a_whole_number_is_refused(runs):
    """10.5, '5' or None runs: refused naming the field and the value, not a numpy or comparison error."""
    with pytest.raises(ClusterSimError, match=r"^runs: must be a whole number from 1 to 1,000,000, got ") as err:
        simulate_runs(DAY, interval_s=HOUR, checkpoint_s=60.0, restart_s=600.0, mtbf_s=M, num_runs=runs)
    assert err.value.field == "runs" and err.value.value == runs


# --- plan: the policy and the sensitivity table --------------------------------------------------------------------


def test_policy_takes_dalys_interval_unless_one_is_given_and_reports_youngs_beside_it():
    """No interval: Daly's optimum, Young's reported beside it; a given interval is kept, Daly's still reported."""
    chosen = Policy(work_s=30 * DAY, checkpoint_s=60.0, restart_s=1200.0, mtbf_s=M)
    assert chosen.chosen_interval_s == chosen.daly_s == daly_interval_s(60.0, M)
    assert chosen.young_s == young_interval_s(60.0, M) and chosen.young_s > chosen.daly_s
    assert chosen.run() == expected_run(30 * DAY, interval_s=chosen.daly_s, checkpoint_s=60.0, restart_s=1200.0,
                                        mtbf_s=M)  # fmt: skip
    fixed = Policy(work_s=30 * DAY, checkpoint_s=60.0, restart_s=1200.0, mtbf_s=M, interval_s=2 * HOUR)
    assert fixed.chosen_interval_s == fixed.run().interval_s == 2 * HOUR and fixed.daly_s == chosen.daly_s


@pytest.mark.parametrize("interval_s", [None, 2 * HOUR])
def test_sensitivity_scales_one_input_at_a_time(interval_s):
    """The baseline (factor 1), then each factor applied to the failure rate, the checkpoint time and the restart
    time in turn, the others kept; the interval chosen again by Daly's rule, or kept when given."""
    policy = Policy(work_s=30 * DAY, checkpoint_s=60.0, restart_s=1200.0, mtbf_s=M, interval_s=interval_s)
    rows = sensitivity(policy)
    names = ["failure rate", "checkpoint time", "restart time"]
    assert [(row.factor_name, row.factor) for row in rows] == [
        ("baseline", 1.0), *((name, factor) for factor in (0.5, 2.0) for name in names)
    ]  # fmt: skip
    assert rows[0].run == policy.run()
    for row in rows[1:]:
        run, factor = row.run, row.factor
        want = {
            "failure rate": (60.0, 1200.0, M / factor),
            "checkpoint time": (60.0 * factor, 1200.0, M),
            "restart time": (60.0, 1200.0 * factor, M),
        }[row.factor_name]
        assert (run.checkpoint_s, run.restart_s, run.mtbf_s) == want and run.work_s == 30 * DAY
        assert run.interval_s == (interval_s if interval_s is not None else daly_interval_s(want[0], want[2]))


@settings(max_examples=25, deadline=None, derandomize=True)
@given(
    work_d=st.floats(1, 60),
    checkpoint=st.floats(10, 600),
    restart=st.floats(0, 3600),
    mtbf_h=st.floats(1, 50),
    interval=st.none() | st.floats(600, 6 * HOUR),
)
def test_more_failures_or_slower_checkpoints_and_restarts_never_shorten_the_run(
    work_d, checkpoint, restart, mtbf_h, interval
):
    """Doubling the failure rate, the checkpoint or the restart time never shortens the expected run; halving never
    lengthens it (the interval chosen again or kept)."""
    rows = sensitivity(Policy(work_d * DAY, checkpoint, restart, mtbf_h * HOUR, interval))
    base = rows[0].run.expected_time_s
    for row in rows[1:]:
        if row.factor > 1:
            assert row.run.expected_time_s >= base, (row.factor_name, row.factor)
        else:
            assert row.run.expected_time_s <= base, (row.factor_name, row.factor)


@pytest.mark.parametrize(
    ("policy", "case", "field", "value"),
    [
        # the baseline finishes (barely); twice the failure rate does not fit a float, the 500 s restart against a
        # 0.5 s MTBF (e^1000) the term that overflows
        (
            Policy(work_s=DAY, checkpoint_s=1.0, restart_s=500.0, mtbf_s=1.0, interval_s=1.0),
            "failure rate x2",
            "restart_s",
            500.0,
        ),
        # a checkpoint far longer than the interval: doubling it overflows first (e^710 against e^709.5)
        (
            Policy(work_s=0.1, checkpoint_s=355.0, restart_s=0.0, mtbf_s=1.0, interval_s=0.1),
            "checkpoint time x2",
            "checkpoint_s",
            710.0,
        ),
    ],
)
def test_a_sensitivity_case_that_never_finishes_is_named_with_its_field_and_value(policy, case, field, value):
    """The baseline finishes, a scaled case does not: the error names the case, and keeps the field and the value
    of the error it re-raises (the scaled input's)."""
    assert math.isfinite(policy.run().expected_time_s)
    with pytest.raises(ClusterSimError, match=rf"never finishes.*\(with the {case}\)$") as err:
        sensitivity(policy)
    assert err.value.field == field and err.value.value == value
