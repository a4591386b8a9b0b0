"""Burst credits at their edges: saves that cannot burst, a bucket that never drains, a gap that refills
exactly one save, and the credit bookkeeping of every save."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.storage.burst import BurstSave, CreditBucket, save, sequence, steady

# PERSISTENT_2-125 on 24,000 GiB: 3 GB/s baseline, 12 GB/s burst, a 30-minute bucket of 9 GB/s of credit.
BUCKET = CreditBucket(
    capacity_bytes=9e9 * 1800, baseline_bytes_per_s=3e9, burst_rate_bytes_per_s=12e9, base_rate_bytes_per_s=3e9
)
# The clients bind the save at 6 GB/s with or without credits: the burst buys nothing, though it is above
# the 3 GB/s baseline (a spend of 3 GB/s).
CLIENT_BOUND = CreditBucket(
    capacity_bytes=3e9 * 1800, baseline_bytes_per_s=3e9, burst_rate_bytes_per_s=6e9, base_rate_bytes_per_s=6e9
)
# A save whose burst figure (6 GB/s) stays under the file system's 12 GB/s baseline: faster than its 3 GB/s
# base rate, yet it spends no credit.
UNDER_BASELINE = CreditBucket(
    capacity_bytes=1e12, baseline_bytes_per_s=12e9, burst_rate_bytes_per_s=6e9, base_rate_bytes_per_s=3e9
)
# A burst one byte per second above the baseline: the smallest spend that still draws credit.
ONE_BYTE = CreditBucket(
    capacity_bytes=5.0, baseline_bytes_per_s=3e9, burst_rate_bytes_per_s=3e9 + 1, base_rate_bytes_per_s=1e9
)

rates = st.floats(1e6, 1e12)
EXAMPLES = settings(max_examples=50, deadline=None, derandomize=True)  # the same draws on every run


@EXAMPLES
@given(baseline=rates, burst=rates)
def test_spend_is_the_burst_above_the_baseline_and_never_negative(baseline, burst):
    """Credits drain at burst - baseline per second, and not at all when the burst is at or under it."""
    bucket = CreditBucket(1e12, baseline, burst, 1e6)
    assert bucket.spend_bytes_per_s == max(0.0, burst - baseline)
    assert CreditBucket(1e12, baseline, baseline, 1e6).spend_bytes_per_s == 0.0  # burst == baseline
    assert CreditBucket(1e12, baseline + 1e6, baseline, 1e6).spend_bytes_per_s == 0.0


def test_a_burst_no_faster_than_the_base_rate_leaves_the_bucket_alone():
    """Burst rate == base rate: bytes/rate, every byte counted as burst, no credit spent (though spend > 0)."""
    assert CLIENT_BOUND.spend_bytes_per_s == 3e9
    one = save(CLIENT_BOUND, 1.2e12, credit_bytes=5e11)
    # 1.2 TB at 6 GB/s = 200 s; the 500 GB of credit is what it was.
    assert one == BurstSave(
        num_bytes=1.2e12, time_s=200.0, burst_bytes=1.2e12, credit_before_bytes=5e11, credit_after_bytes=5e11
    )
    assert one.burst_fraction == 1.0
    assert save(CLIENT_BOUND, 1.2e12, credit_bytes=0.0).time_s == one.time_s  # credits cannot matter here


def test_a_burst_under_the_baseline_runs_at_the_burst_figure_for_free():
    """Spend == 0 with burst > base: the save runs at its burst figure throughout, from any bucket."""
    assert UNDER_BASELINE.spend_bytes_per_s == 0.0
    for credit in (0.0, 4e11, UNDER_BASELINE.capacity_bytes):
        # 1.2 TB at 6 GB/s = 200 s, never the 400 s of the base rate.
        assert save(UNDER_BASELINE, 1.2e12, credit) == BurstSave(1.2e12, 200.0, 1.2e12, credit, credit)


@EXAMPLES
@given(
    base=rates,
    burst_over_base=st.floats(0.1, 1.0),
    baseline=rates,
    size=st.floats(1e6, 1e14),
    credit_share=st.floats(0.0, 1.0),
)
def test_a_save_that_cannot_burst_takes_bytes_over_rate_and_keeps_its_credit(
    base, burst_over_base, baseline, size, credit_share
):
    """No-burst branch (burst <= base, or no spend): time = bytes/rate and the bucket is untouched."""
    bucket = CreditBucket(1e13, baseline, base * burst_over_base, base)
    credit = bucket.capacity_bytes * credit_share
    one = save(bucket, size, credit)
    assert one.time_s == size / bucket.burst_rate_bytes_per_s
    assert one.num_bytes == one.burst_bytes == size
    assert one.credit_before_bytes == one.credit_after_bytes == credit


def test_one_byte_per_second_of_spend_still_draws_credit():
    """Spend == 1 B/s is a real spend: one second at the burst rate costs one byte of credit."""
    assert ONE_BYTE.spend_bytes_per_s == 1.0
    one = save(ONE_BYTE, 3e9 + 1, credit_bytes=5.0)  # exactly one second at the burst rate
    assert one.time_s == 1.0 and one.burst_bytes == 3e9 + 1
    assert one.credit_before_bytes == 5.0 and one.credit_after_bytes == 4.0
    # Back to back (no gap), the 5-byte bucket empties after five saves; then each runs at 1 GB/s (3 s + 1 ns).
    saves = sequence(ONE_BYTE, 3e9 + 1, 0.0, 7)
    assert [s.credit_before_bytes for s in saves] == [5.0, 4.0, 3.0, 2.0, 1.0, 0.0, 0.0]
    settled = steady(ONE_BYTE, 3e9 + 1, 0.0)
    assert settled == saves[-1]
    assert settled.time_s == pytest.approx(3.000000001) and settled.burst_bytes == 0.0


def test_a_burst_save_reports_the_credit_it_started_with():
    """Bookkeeping across the burst branch: 90 GB of credit lasts 10 s at 12 GB/s, the rest is at 3 GB/s."""
    short = save(BUCKET, 1.2e12, credit_bytes=90e9)
    assert short.credit_before_bytes == 90e9
    # 10 s x 12 GB/s = 120 GB at burst, 1.08 TB / 3 GB/s = 360 s, and 9 GB/s x 10 s = 90 GB spent.
    assert short.time_s == pytest.approx(370.0) and short.burst_bytes == pytest.approx(120e9)
    assert short.credit_after_bytes == pytest.approx(0.0, abs=1e-3)


@EXAMPLES
@given(size=st.floats(1e9, 1e14), credit_share=st.floats(0.0, 1.0))
def test_every_burst_save_spends_exactly_its_burst_seconds(size, credit_share):
    """Credit after = credit before - spend x burst seconds; time = burst seconds + the rest at the base rate;
    and a save from an emptier bucket is never faster."""
    credit = BUCKET.capacity_bytes * credit_share
    one = save(BUCKET, size, credit)
    burst_s = one.burst_bytes / 12e9
    assert one.credit_before_bytes == credit
    ulps = 1e-12 * BUCKET.capacity_bytes  # rounding of the 16.2 TB bucket
    assert one.credit_after_bytes == pytest.approx(credit - 9e9 * burst_s, abs=ulps)
    assert one.credit_after_bytes >= -ulps
    assert one.time_s == pytest.approx(burst_s + (size - one.burst_bytes) / 3e9)
    assert save(BUCKET, size, 0.0).time_s >= one.time_s >= save(BUCKET, size, BUCKET.capacity_bytes).time_s


def test_an_empty_save_has_no_burst_fraction():
    """Zero bytes take zero seconds and report a burst fraction of 0, from either branch."""
    for bucket in (BUCKET, CLIENT_BOUND, UNDER_BASELINE):
        empty = save(bucket, 0.0, bucket.capacity_bytes)
        assert empty.time_s == 0.0 and empty.burst_fraction == 0.0


def test_steady_without_a_useful_burst_is_the_save_from_a_full_bucket():
    """Burst rate == base rate: steady reports the full bucket, untouched, even with no gap to refill it."""
    settled = steady(CLIENT_BOUND, 1.2e12, 0.0)
    full = CLIENT_BOUND.capacity_bytes
    assert settled == BurstSave(1.2e12, 200.0, 1.2e12, full, full)
    assert settled == sequence(CLIENT_BOUND, 1.2e12, 0.0, 3)[-1]


def test_a_gap_that_refills_exactly_one_save_keeps_the_bucket_full():
    """Boundary refill == spend: 300 s x 3 GB/s = 900 GB, what 1.2 TB at 12 GB/s spends (100 s x 9 GB/s)."""
    assert 3e9 * 300.0 == 9e9 * 1.2e12 / 12e9 == 9e11  # the two sides meet exactly in floating point
    settled = steady(BUCKET, 1.2e12, 300.0)
    assert settled.credit_before_bytes == BUCKET.capacity_bytes
    assert settled.credit_after_bytes == BUCKET.capacity_bytes - 9e11
    assert settled.time_s == pytest.approx(100.0)
    assert all(s.credit_before_bytes == BUCKET.capacity_bytes for s in sequence(BUCKET, 1.2e12, 300.0, 5))


def test_a_long_gap_keeps_the_bucket_full_not_at_one_gap_of_refill():
    """1,000 s refill 3 TB, more than the 900 GB a save spends, but less than the 16.2 TB bucket: full."""
    settled = steady(BUCKET, 1.2e12, 1000.0)
    assert settled.credit_before_bytes == BUCKET.capacity_bytes
    assert settled == sequence(BUCKET, 1.2e12, 1000.0, 4)[-1]


@EXAMPLES
@given(
    baseline=st.floats(1e8, 1e10),
    spend_ratio=st.floats(0.05, 4.0),
    base_ratio=st.floats(0.2, 1.0),
    size=st.floats(1e9, 1e13),
    buckets_per_save=st.floats(0.3, 8.0),
    refill_share=st.one_of(st.floats(0.0, 0.5), st.floats(1.001, 20.0)),  # clear of the boundary, tested above
)
def test_steady_is_the_limit_of_the_sequence(baseline, spend_ratio, base_ratio, size, buckets_per_save, refill_share):
    """The settled save (time, burst bytes, credit before and after) is where repeated saves end up."""
    burst = baseline * (1.0 + spend_ratio)
    spend = burst - baseline
    spent = spend * size / burst  # credit one save spends at full burst
    bucket = CreditBucket(spent * buckets_per_save, baseline, burst, baseline * base_ratio)
    idle = refill_share * spent / baseline
    # Each save nets at least half its spending until the bucket is empty (or none: the gap refills it all).
    saves = sequence(bucket, size, idle, int(2 * buckets_per_save) + 4)
    last, settled = saves[-1], steady(bucket, size, idle)
    tol = 1e-9 * bucket.capacity_bytes
    assert settled.credit_before_bytes == pytest.approx(last.credit_before_bytes, rel=1e-9, abs=tol)
    assert settled.credit_after_bytes == pytest.approx(last.credit_after_bytes, rel=1e-9, abs=tol)
    assert settled.burst_bytes == pytest.approx(last.burst_bytes, rel=1e-9)
    assert settled.time_s == pytest.approx(last.time_s, rel=1e-9)
