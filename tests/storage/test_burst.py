"""Burst credits: a full bucket, saves that drain it, and the steady state the formula gives."""

import itertools
import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.storage.burst import CreditBucket, refill, save, sequence, steady
from clustersim.storage.fsx import file_system

CATALOG = load_catalog(use_env=False)
# PERSISTENT_2-125 on 24,000 GiB: 3 GB/s baseline, 12 GB/s burst (disk 500 MB/s/TiB), 30 min prior.
BUCKET = CreditBucket(
    capacity_bytes=9e9 * 1800, baseline_bytes_per_s=3e9, burst_rate_bytes_per_s=12e9, base_rate_bytes_per_s=3e9
)


def test_a_save_runs_at_burst_until_the_credits_run_out():
    one = save(BUCKET, 1.2e12, credit_bytes=BUCKET.capacity_bytes)
    assert one.time_s == pytest.approx(100.0) and one.burst_fraction == 1.0
    assert one.credit_after_bytes == pytest.approx(BUCKET.capacity_bytes - 9e9 * 100)
    # 90 GB of credit: 10 s at 12 GB/s (120 GB), the other 1.08 TB at 3 GB/s (360 s).
    short = save(BUCKET, 1.2e12, credit_bytes=90e9)
    assert short.time_s == pytest.approx(10 + 360) and short.burst_bytes == pytest.approx(120e9)
    assert short.credit_after_bytes == pytest.approx(0.0, abs=1e-3)
    empty = save(BUCKET, 1.2e12, credit_bytes=0.0)
    assert empty.time_s == pytest.approx(400.0) and empty.burst_fraction == 0.0


def test_refill_accrues_the_baseline_up_to_the_bucket():
    assert refill(BUCKET, 0.0, 100.0) == pytest.approx(300e9)
    assert refill(BUCKET, BUCKET.capacity_bytes - 1.0, 100.0) == BUCKET.capacity_bytes


@settings(max_examples=40, deadline=None)
@given(size=st.floats(1e10, 2e13), idle=st.floats(0.0, 20_000.0))
def test_repeated_saves_drain_the_bucket_to_the_steady_state(size, idle):
    net = 9e9 * size / 12e9 - 3e9 * idle  # credits lost per save at full burst, net of the refill
    count = 3 if net <= 0 else math.ceil(BUCKET.capacity_bytes / net) + 3  # enough to empty the bucket
    assume(count <= 3000)
    saves = sequence(BUCKET, size, idle, count)
    times = [s.time_s for s in saves]
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(times))  # a draining bucket never speeds up
    assert times[0] == pytest.approx(save(BUCKET, size, BUCKET.capacity_bytes).time_s)
    assert size / 12e9 * (1 - 1e-9) <= times[-1] <= size / 3e9 * (1 + 1e-9)
    assert times[-1] == pytest.approx(steady(BUCKET, size, idle).time_s, rel=1e-6)


def test_no_bucket_where_the_tier_publishes_no_burst():
    from clustersim.storage.checkpoint import plan_checkpoint
    from clustersim.workload import zoo

    model = zoo.load_model("llama3-8b", use_env=False)
    p5 = CATALOG.instance("p5.48xlarge")
    fast = file_system(CATALOG, "PERSISTENT_2-1000", "24000GiB")
    timing = plan_checkpoint(model, fast, instance=p5, num_nodes=8, devices_per_node=8)
    assert timing.bucket is None and timing.save_time_at(600.0) == timing.save.time_s
    slow = file_system(CATALOG, "PERSISTENT_2-125", "24000GiB")
    timing = plan_checkpoint(model, slow, instance=p5, num_nodes=8, devices_per_node=8)
    assert timing.bucket is not None and timing.bucket.capacity_bytes == pytest.approx(9e9 * 1800)
    assert timing.stall_at(3600.0) == pytest.approx(timing.save_at_burst.time_s)  # refilled every hour
