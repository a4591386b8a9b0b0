"""Failure rates, Young/Daly intervals, the expected run, the Monte-Carlo check and the sensitivity table."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.reliability.failures import (
    RATES,
    daly_interval_s,
    expected_run,
    failure_rate,
    job_mtbf_s,
    segment_time_s,
    young_interval_s,
)
from clustersim.reliability.montecarlo import simulate_runs
from clustersim.reliability.plan import Policy, sensitivity

M = 3 * 3600.0  # a job MTBF of three hours
DAY = 86400.0


def test_llama3_rate_gives_the_papers_job_mtbf():
    mtbf = job_mtbf_s(RATES["llama3"], num_devices=16_384, num_nodes=2048)
    assert mtbf == pytest.approx(54 * 86400 / 419)  # one interruption every ~3.09 hours
    assert job_mtbf_s(RATES["llama3"], num_devices=8192, num_nodes=1024) == pytest.approx(2 * mtbf)
    # The same GPUs in 16-GPU nodes: the 151 host-side interruptions halve, the 268 GPU faults stay.
    assert job_mtbf_s(RATES["llama3"], num_devices=16_384, num_nodes=1024) == pytest.approx(
        54 * 86400 / (268 + 151 / 2)
    )


def test_rates_by_name_or_number_and_errors():
    rsc1 = failure_rate("RSC1")
    assert rsc1.per_device_hour == 0 and rsc1.per_node_hour == pytest.approx(6.5e-3 / 24)
    assert job_mtbf_s(rsc1, num_devices=8192, num_nodes=1024) == pytest.approx(86400 / (1024 * 6.5e-3))
    assert failure_rate("1e-5").per_device_hour == 1e-5
    with pytest.raises(UnknownNameError):
        failure_rate("often")
    with pytest.raises(ClusterSimError, match="not in \\(0, 1\\)"):
        failure_rate("0")
    with pytest.raises(ClusterSimError, match="devices must be at least 1"):
        job_mtbf_s(RATES["llama3"], num_devices=0, num_nodes=1)
    with pytest.raises(ClusterSimError, match="nodes must be at least 1"):
        job_mtbf_s(RATES["llama3"], num_devices=8, num_nodes=0)


def test_young_and_daly_closed_forms():
    assert young_interval_s(60, M) == pytest.approx(math.sqrt(2 * 60 * M))
    ratio = 60 / (2 * M)
    daly = math.sqrt(2 * 60 * M) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - 60
    assert daly_interval_s(60, M) == pytest.approx(daly)
    assert daly_interval_s(3 * M, M) == M  # a checkpoint longer than 2M: checkpoint every MTBF
    with pytest.raises(ClusterSimError, match="checkpoint_s"):
        young_interval_s(0, M)


def test_no_failures_limit_is_work_plus_checkpoints():
    run = expected_run(10 * 3600, interval_s=3600, checkpoint_s=30, restart_s=600, mtbf_s=1e15)
    assert run.expected_time_s == pytest.approx(10 * 3600 + 10 * 30)
    assert run.num_checkpoints == 10 and run.expected_failures == pytest.approx(0, abs=1e-6)
    partial = expected_run(10.5 * 3600, interval_s=3600, checkpoint_s=30, restart_s=0, mtbf_s=1e15)
    assert partial.num_checkpoints == 11


def test_one_segment_by_hand():
    # E = M e^(R/M) (e^(L/M) - 1) with L = M, R = 0: M (e - 1).
    assert segment_time_s(M, M, 0) == pytest.approx(M * (math.e - 1))


@settings(max_examples=15, deadline=None)
@given(checkpoint=st.floats(5, 600), mtbf_h=st.floats(0.5, 50))
def test_daly_interval_is_the_closed_form_optimum(checkpoint, mtbf_h):
    mtbf = mtbf_h * 3600
    work = 30 * DAY

    def time_at(tau):
        return expected_run(work, interval_s=tau, checkpoint_s=checkpoint, restart_s=600, mtbf_s=mtbf).expected_time_s

    best = min(time_at(t) for t in np.geomspace(checkpoint / 10, 10 * mtbf, 400))
    assert time_at(daly_interval_s(checkpoint, mtbf)) <= best * 1.001


def test_monte_carlo_mean_matches_the_formula():
    kw = {"interval_s": daly_interval_s(60, M), "checkpoint_s": 60, "restart_s": 1200, "mtbf_s": M}
    spread = simulate_runs(20 * DAY, num_runs=4000, seed=7, **kw)
    formula = expected_run(20 * DAY, **kw).expected_time_s
    assert abs(spread.mean_s - formula) < 4 * spread.std_error_s
    assert spread.percentile_s(5) < formula < spread.percentile_s(95)
    assert spread.failures.mean() == pytest.approx(formula / M, rel=0.05)


def test_monte_carlo_finds_the_young_daly_optimum():
    tau = daly_interval_s(60, M)
    means = {
        f: simulate_runs(
            20 * DAY, interval_s=tau * f, checkpoint_s=60, restart_s=1200, mtbf_s=M, num_runs=2000, seed=3
        ).mean_s
        for f in (0.25, 1.0, 4.0)
    }
    assert means[1.0] < means[0.25] and means[1.0] < means[4.0]


def test_same_seed_same_bytes_other_seed_differs():
    kw = {"interval_s": 3000.0, "checkpoint_s": 60, "restart_s": 900, "mtbf_s": M, "num_runs": 500}
    a = simulate_runs(5 * DAY, seed=11, **kw)
    b = simulate_runs(5 * DAY, seed=11, **kw)
    c = simulate_runs(5 * DAY, seed=12, **kw)
    assert a.time_s.tobytes() == b.time_s.tobytes() and a.failures.tobytes() == b.failures.tobytes()
    assert a.time_s.tobytes() != c.time_s.tobytes()


def test_runs_out_of_range_refused():
    with pytest.raises(ClusterSimError, match="runs: must be a whole number from 1"):
        simulate_runs(DAY, interval_s=3600, checkpoint_s=60, restart_s=600, mtbf_s=M, num_runs=0)


def test_sensitivity_each_doubling_costs_goodput():
    rows = sensitivity(Policy(work_s=30 * DAY, checkpoint_s=60, restart_s=1200, mtbf_s=M))
    assert len(rows) == 7 and rows[0].factor_name == "baseline"
    base = rows[0].run.goodput
    for row in rows[1:]:
        assert (row.run.goodput < base) == (row.factor == 2.0), (row.factor_name, row.factor)


def test_too_many_failure_draws_refused():
    with pytest.raises(ClusterSimError, match="use fewer runs") as err:
        simulate_runs(1e6 * DAY, interval_s=3600, checkpoint_s=60, restart_s=600, mtbf_s=M, num_runs=1000)
    assert err.value.field == "runs"
