"""Burst credits of an FSx for Lustre file system: how much of a checkpoint runs at the burst rate, and
how repeated checkpoints drain the bucket.

AWS publishes the burst rates (``network_burst``, ``disk_burst``) and says burst uses a network I/O
credit mechanism that accrues while use is below the baseline, but not the bucket's size; the catalog's
``burst_credit_s`` is a stated prior (30 minutes at the burst rate from a full bucket, after EC2's "5 to
60 minutes" for the same mechanism). A credit is a byte above the file system's baseline:

* a full bucket holds ``(burst - baseline) x burst_credit_s`` bytes;
* a save runs at its burst rate ``r_b`` (every bound at the burst figures) while credits last, spending
  ``r_b - baseline`` per second, then at its baseline rate ``r_0``;
* between saves the file system accrues its baseline per idle second, up to the full bucket (training's
  own reads are not counted against it).

With ``S`` bytes per save, ``d = r_b - baseline`` and ``I`` idle seconds between saves, repeated saves
settle where each spends what the gap refills: ``t_burst = min(S / r_b, bucket / d, baseline x I / d)``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CreditBucket:
    """A file system's burst credits as one save sees them."""

    capacity_bytes: float  # a full bucket
    baseline_bytes_per_s: float  # the file system's aggregate baseline: the accrual rate when idle
    burst_rate_bytes_per_s: float  # the save's rate while credits last
    base_rate_bytes_per_s: float  # the save's rate without credits

    @property
    def spend_bytes_per_s(self) -> float:
        """Credits spent per second of a save at the burst rate (0: the burst never exceeds the baseline)."""
        return max(0.0, self.burst_rate_bytes_per_s - self.baseline_bytes_per_s)


@dataclass(frozen=True)
class BurstSave:
    """One save: its time, the bytes written at the burst rate, and the bucket before and after."""

    num_bytes: float
    time_s: float
    burst_bytes: float
    credit_before_bytes: float
    credit_after_bytes: float

    @property
    def burst_fraction(self) -> float:
        """Share of the checkpoint written at the burst rate."""
        return self.burst_bytes / self.num_bytes if self.num_bytes else 0.0


def save(bucket: CreditBucket, num_bytes: float, credit_bytes: float) -> BurstSave:
    """``num_bytes`` written starting with ``credit_bytes`` in the bucket."""
    burst_rate, base_rate, spend = bucket.burst_rate_bytes_per_s, bucket.base_rate_bytes_per_s, bucket.spend_bytes_per_s
    if spend <= 0.0 or burst_rate <= base_rate:
        return BurstSave(num_bytes, num_bytes / burst_rate, num_bytes, credit_bytes, credit_bytes)
    burst_s = min(num_bytes / burst_rate, credit_bytes / spend)
    burst_bytes = burst_rate * burst_s
    time_s = burst_s + (num_bytes - burst_bytes) / base_rate
    return BurstSave(num_bytes, time_s, burst_bytes, credit_bytes, credit_bytes - spend * burst_s)


def refill(bucket: CreditBucket, credit_bytes: float, idle_s: float) -> float:
    """The bucket after ``idle_s`` seconds without writes."""
    return min(bucket.capacity_bytes, credit_bytes + bucket.baseline_bytes_per_s * max(0.0, idle_s))


def sequence(bucket: CreditBucket, num_bytes: float, idle_s: float, count: int) -> list[BurstSave]:
    """``count`` saves ``idle_s`` apart, the first from a full bucket."""
    out: list[BurstSave] = []
    credit = bucket.capacity_bytes
    for _ in range(count):
        out.append(save(bucket, num_bytes, credit))
        credit = refill(bucket, out[-1].credit_after_bytes, idle_s)
    return out


def steady(bucket: CreditBucket, num_bytes: float, idle_s: float) -> BurstSave:
    """The save repeated ``idle_s`` apart settles to: each spends what the gap refills."""
    spend = bucket.spend_bytes_per_s
    if spend <= 0.0 or bucket.burst_rate_bytes_per_s <= bucket.base_rate_bytes_per_s:
        return save(bucket, num_bytes, bucket.capacity_bytes)
    refilled = bucket.baseline_bytes_per_s * max(0.0, idle_s)
    spent_at_full_burst = spend * num_bytes / bucket.burst_rate_bytes_per_s
    # A gap that refills a whole save's spending keeps the bucket full; otherwise each save empties it.
    credit = bucket.capacity_bytes if refilled >= spent_at_full_burst else min(bucket.capacity_bytes, refilled)
    return save(bucket, num_bytes, credit)
