"""Job totals with checkpoints and failures: the expected run scales time, hours, energy and cost, and
the file system's price is added (``training.job.with_failures``)."""

import math

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.reliability.failures import (
    DETECT_REPLACE_S,
    RATES,
    WARMUP_S,
    daly_interval_s,
    expected_run,
    job_mtbf_s,
)
from clustersim.storage.checkpoint import SaveMode, plan_checkpoint
from clustersim.storage.fsx import parse_storage
from clustersim.system import system_for_instance
from clustersim.training.job import Resilience, TrainingJob, job_totals, with_failures
from clustersim.workload import zoo

CATALOG = load_catalog(use_env=False)
SYSTEM = system_for_instance(CATALOG, "p5.48xlarge", 64)
MODEL = zoo.load_model("llama3-70b", use_env=False)
FS = parse_storage(CATALOG, "fsx:PERSISTENT_2-1000:24000GiB")
JOB = TrainingJob(global_batch=512, seq_len=8192, tokens=1e12)
STEP_S = 10.0


def resilience(mode=SaveMode.SYNC, interval_s=None):
    timing = plan_checkpoint(
        MODEL, FS, instance=SYSTEM.instance, num_nodes=64, devices_per_node=8, mode=mode,
        nvme=CATALOG.get("instance-nvme"), host_copy_bytes_per_s=SYSTEM.host_copy_bytes_per_s,
    )  # fmt: skip
    return Resilience(
        checkpoint=timing, rate=RATES["llama3"], interval_s=interval_s,
        storage_usd_per_hour=FS.price_usd_per_hour, storage_name=FS.describe(),
    )  # fmt: skip


def test_totals_scale_with_the_expected_run():
    base = job_totals(SYSTEM, JOB, STEP_S, "on_demand")
    res = resilience()
    out = with_failures(base, SYSTEM, res)
    timing = res.checkpoint
    restart = DETECT_REPLACE_S + timing.load.time_s + WARMUP_S
    mtbf = job_mtbf_s(RATES["llama3"], num_devices=512, num_nodes=64)
    run = out.failures.run
    assert run.mtbf_s == pytest.approx(mtbf) and out.failures.restart_s == pytest.approx(restart)
    assert run.checkpoint_s == pytest.approx(timing.save.time_s)  # synchronous: the whole save stalls
    expected = expected_run(base.time_s, interval_s=run.interval_s, checkpoint_s=run.checkpoint_s,
                            restart_s=restart, mtbf_s=mtbf)  # fmt: skip
    scale = expected.expected_time_s / base.time_s
    assert out.time_s == pytest.approx(expected.expected_time_s) and scale > 1
    assert out.device_hours == pytest.approx(base.device_hours * scale)
    # Energy: work and rework at board power, checkpoint stalls and restarts at the idle prior (11.5%).
    waits = expected.checkpoint_total_s + expected.restart_total_s
    rework = expected.expected_time_s - base.time_s - waits
    # a restart attempt per failure, cut short by the next failure within it: M (1 - e^(-R/M)) each
    assert expected.restart_total_s == pytest.approx(expected.expected_failures * mtbf * -math.expm1(-restart / mtbf))
    assert expected.restart_total_s < expected.expected_failures * restart
    assert out.energy_kwh == pytest.approx(base.energy_kwh * (base.time_s + rework + 0.115 * waits) / base.time_s)
    assert base.energy_kwh < out.energy_kwh < base.energy_kwh * scale
    storage = FS.price_usd_per_hour * out.time_s / 3600
    assert out.failures.storage_cost_usd == pytest.approx(storage)
    assert out.cost_usd == pytest.approx(base.cost_usd * scale + storage)
    payload = out.to_json()
    assert payload["goodput"] == pytest.approx(base.time_s / out.time_s)
    assert payload["checkpoint_interval_s"] == run.interval_s and payload["steps"] == base.steps


def test_given_interval_and_async_drain_excess():
    base = job_totals(SYSTEM, JOB, STEP_S, "on_demand")
    res = resilience(SaveMode.ASYNC, interval_s=1.0)  # a drain far longer than the interval
    out = with_failures(base, SYSTEM, res)
    timing = res.checkpoint
    assert out.failures.run.interval_s == 1.0
    assert out.failures.run.checkpoint_s == pytest.approx(timing.host_copy_s + timing.save.time_s - 1.0)


def test_auto_interval_waits_for_a_slow_drain():
    base = job_totals(SYSTEM, JOB, STEP_S, "on_demand")
    slow = parse_storage(CATALOG, "fsx:PERSISTENT_2-125:1200GiB")  # 150 MB/s: a drain of hours
    timing = plan_checkpoint(MODEL, slow, instance=SYSTEM.instance, num_nodes=64, devices_per_node=8,
                             mode=SaveMode.ASYNC, host_copy_bytes_per_s=SYSTEM.host_copy_bytes_per_s)  # fmt: skip
    out = with_failures(base, SYSTEM, Resilience(checkpoint=timing, rate=RATES["llama3"]))
    mtbf = job_mtbf_s(RATES["llama3"], num_devices=512, num_nodes=64)
    restart = out.failures.restart_s
    daly = daly_interval_s(timing.stall_s, mtbf)
    assert timing.drain_s > daly  # the drain cannot keep up with Daly's interval

    def at(tau):
        return expected_run(base.time_s, interval_s=tau, checkpoint_s=timing.stall_at(tau), restart_s=restart,
                            mtbf_s=mtbf).expected_time_s  # fmt: skip

    assert out.time_s == pytest.approx(min(at(daly), at(timing.drain_s)))
    assert out.failures.run.interval_s in (pytest.approx(daly), pytest.approx(timing.drain_s))
    assert out.failures.storage_cost_usd is None  # no price given
    assert out.cost_usd == pytest.approx(base.cost_usd * out.time_s / base.time_s, rel=1e-12)  # and none added


def test_burst_credits_shorten_the_stall_when_the_interval_refills_them():
    """PERSISTENT_2-125 on 24,000 GiB: 3 GB/s baseline, 12 GB/s burst. An hour of work refills 10.8 TB of
    credit, more than a 0.99 TB save spends (9 GB/s x 82 s), so every save runs at burst; ten seconds
    refill 30 GB, so saves settle near the baseline."""
    base = job_totals(SYSTEM, JOB, STEP_S, "on_demand")
    slow = parse_storage(CATALOG, "fsx:PERSISTENT_2-125:24000GiB")
    timing = plan_checkpoint(MODEL, slow, instance=SYSTEM.instance, num_nodes=64, devices_per_node=8)
    size = timing.checkpoint_bytes
    hourly = with_failures(base, SYSTEM, Resilience(checkpoint=timing, rate=RATES["llama3"], interval_s=3600.0))
    assert hourly.failures.run.checkpoint_s == pytest.approx(size / 12e9)
    often = with_failures(base, SYSTEM, Resilience(checkpoint=timing, rate=RATES["llama3"], interval_s=10.0))
    burst_s = 3e9 * 10 / 9e9
    assert often.failures.run.checkpoint_s == pytest.approx(burst_s + (size - 12e9 * burst_s) / 3e9)
    auto = with_failures(base, SYSTEM, Resilience(checkpoint=timing, rate=RATES["llama3"]))
    assert auto.failures.run.checkpoint_s < timing.save.time_s  # the chosen interval leaves credits to burst


def test_the_auto_interval_is_dalys_for_the_stall_that_interval_leaves():
    """With burst credits the stall depends on the interval: the chosen interval is Daly's optimum for
    the stall it leaves (a fixed point), shorter than Daly's for a save at the baseline."""
    base = job_totals(SYSTEM, JOB, STEP_S, "on_demand")
    slow = parse_storage(CATALOG, "fsx:PERSISTENT_2-125:24000GiB")
    timing = plan_checkpoint(MODEL, slow, instance=SYSTEM.instance, num_nodes=64, devices_per_node=8)
    auto = with_failures(base, SYSTEM, Resilience(checkpoint=timing, rate=RATES["llama3"]))
    mtbf = job_mtbf_s(RATES["llama3"], num_devices=512, num_nodes=64)
    tau = auto.failures.run.interval_s
    assert tau == pytest.approx(daly_interval_s(timing.stall_at(tau), mtbf), rel=1e-6)
    assert tau < 0.9 * daly_interval_s(timing.stall_s, mtbf)
