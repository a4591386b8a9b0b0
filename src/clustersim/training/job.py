"""The training job (what to train) and its totals: time, device-hours, cost and energy of a token budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.reliability.failures import (
    DETECT_REPLACE_S,
    IDLE_POWER_FRACTION,
    WARMUP_S,
    FailureRate,
    Goodput,
    job_mtbf_s,
)
from clustersim.reliability.plan import Policy
from clustersim.storage.checkpoint import CheckpointTiming
from clustersim.storage.dataload import DataLoading
from clustersim.system import System
from clustersim.units import MAX_SEQUENCE_TOKENS, MAX_SEQUENCES, MAX_TOKENS

# Tokens per optimizer step when a job does not say: 2^22 (about 4M), between GPT-3 175B's 3.2M (Brown et al.
# 2020, Table 2.1) and Llama 3 405B's first stage, 4M tokens as 1,024 sequences of 4,096 (later 8M and 16M;
# arXiv 2407.21783 section 3.4.1); on a larger cluster at least 1,024 tokens per device, as Llama 3 405B's
# 16M tokens per step on 16K H100 (same section; 16,384 GPUs: section 3.3.1, Table 4), so that every
# data-parallel replica keeps micro-batches for its pipeline.
DEFAULT_BATCH_TOKENS = 2**22
DEFAULT_BATCH_TOKENS_PER_DEVICE = 1024


def default_global_batch(seq_len: int, devices: int = 1) -> int:
    """Sequences per step when a job does not say: the power of two nearest ``tokens / seq_len`` (1,024 at
    4,096 tokens, 128 at 32,768), at least one, for ``DEFAULT_BATCH_TOKENS`` or, on ``devices`` many
    devices, ``DEFAULT_BATCH_TOKENS_PER_DEVICE`` each if that is more (2,048 sequences of 8,192 on 16,384)."""
    if seq_len < 1:
        raise ClusterSimError(
            f"sequence length must be at least 1 token, got {seq_len}", field="seq_len", value=seq_len
        )
    tokens = max(DEFAULT_BATCH_TOKENS, DEFAULT_BATCH_TOKENS_PER_DEVICE * devices)
    return max(1, 1 << max(0, round(math.log2(tokens / seq_len))))


PRECISIONS = (Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.FP4)  # fp4: NVFP4 / MXFP4 GEMMs (compute.precision)
PRICE_OFFERS = ("on_demand", "capacity_block")


@dataclass(frozen=True)
class TrainingJob:
    """What to train: sequences of ``seq_len`` tokens, ``global_batch`` sequences per step."""

    global_batch: int
    seq_len: int
    precision: Dtype = Dtype.BF16
    tokens: float | None = None  # training budget, tokens; None = one step only

    def __post_init__(self) -> None:
        for name, words, limit in (
            ("global_batch", "global batch, in sequences,", MAX_SEQUENCES),
            ("seq_len", "sequence length, in tokens,", MAX_SEQUENCE_TOKENS),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
                raise ClusterSimError(
                    f"{words} must be a whole number from 1 to {limit:,}, got {value!r}", field=name, value=value
                )
        if self.precision not in PRECISIONS:
            valid = ", ".join(p.value for p in PRECISIONS)
            raise ClusterSimError(
                f"precision {self.precision.value!r} is not a training precision (valid: {valid})",
                field="precision",
                value=self.precision.value,
            )
        if self.tokens is None:
            return
        if not (math.isfinite(self.tokens) and 0 < self.tokens <= MAX_TOKENS):
            raise ClusterSimError(
                f"tokens: must be a positive number up to {MAX_TOKENS:g}, got {self.tokens!r}", field="tokens"
            )
        if self.tokens < self.tokens_per_step:
            raise ClusterSimError(
                f"tokens: the budget, {self.tokens:,.0f} tokens, is less than one step of {self.global_batch:,} "
                f"sequences x {self.seq_len:,} tokens = {self.tokens_per_step:,} tokens; lower the global batch or "
                f"raise the budget",
                field="tokens",
                value=self.tokens,
            )

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step."""
        return self.global_batch * self.seq_len


@dataclass(frozen=True)
class JobTotals:
    """A token budget's steps, wall time, device-hours, energy at board power and cost at the instance price."""

    tokens: float
    steps: int
    time_s: float
    device_hours: float
    energy_kwh: float | None  # None: no board power in the catalog
    price_offer: str
    cost_usd: float | None  # None: no price (see price_note)
    price_usd_per_hour: float | None = None
    price_as_of: str | None = None
    price_region: str | None = None
    price_note: str | None = None
    failures: FailureTotals | None = None  # with a checkpoint policy: time, hours, energy and cost include them

    def to_json(self) -> dict[str, Any]:
        """Plain JSON; the price fields appear when there is a price, ``price_note`` when there is not."""
        out: dict[str, Any] = {
            "tokens": self.tokens,
            "steps": self.steps,
            "time_s": self.time_s,
            "device_hours": self.device_hours,
            "energy_kwh": self.energy_kwh,
            "price_offer": self.price_offer,
            "cost_usd": self.cost_usd,
        }
        if self.cost_usd is not None:
            out |= {
                "price_usd_per_hour": self.price_usd_per_hour,
                "price_as_of": self.price_as_of,
                "price_region": self.price_region,
            }
        else:
            out["price_note"] = self.price_note
        if self.failures is not None:
            out |= self.failures.to_json()
        return out


def _missing_price_note(system: System, offer: str) -> str:
    """Why ``system``'s instance has no cost at ``offer``, and the offer that has one (the option that asks for it)."""
    assert system.instance is not None
    note = f"no {offer.replace('_', ' ')} price for {system.instance.id}"
    for other in PRICE_OFFERS:
        price = system.price(other)
        if other != offer and price is not None and price.usd_per_hour is not None:
            note += f"; its {other.replace('_', ' ')} price is ${price.usd_per_hour:,.2f}/h (--price {other})"
            break
    return note


def job_totals(system: System, job: TrainingJob, step_s: float, offer: str) -> JobTotals | None:
    """The totals of ``job``'s token budget at ``step_s`` per step (None without a budget)."""
    if offer not in PRICE_OFFERS:
        raise ClusterSimError(f"unknown price offer {offer!r} (valid: {', '.join(PRICE_OFFERS)})")
    if job.tokens is None:
        return None
    steps = int(-(-job.tokens // job.tokens_per_step))
    seconds = steps * step_s
    power = system.power_watts
    price = system.price(offer)
    unpriced = JobTotals(
        tokens=job.tokens,
        steps=steps,
        time_s=seconds,
        device_hours=seconds / 3600 * system.num_devices,
        energy_kwh=None if power is None else power * system.num_devices * seconds / 3.6e6,
        price_offer=offer,
        cost_usd=None,
    )
    if price is None or price.usd_per_hour is None:
        note = _missing_price_note(system, offer) if system.instance else "no instance given: no price"
        return replace(unpriced, price_note=note)
    return replace(
        unpriced,
        cost_usd=price.usd_per_hour * system.num_nodes * seconds / 3600,
        price_usd_per_hour=price.usd_per_hour,
        price_as_of=price.as_of.isoformat(),
        price_region=price.region,
    )


@dataclass(frozen=True)
class Resilience:
    """A checkpoint policy and a failure model for a job: the checkpoint's timing on its storage, the
    failure rate, the interval (None: Young/Daly's optimum) and the storage's price per hour."""

    checkpoint: CheckpointTiming
    rate: FailureRate
    interval_s: float | None = None
    storage_usd_per_hour: float | None = None
    storage_name: str = ""
    data: DataLoading | None = None


@dataclass(frozen=True)
class FailureTotals:
    """What checkpoints and failures add to a job: the expected run and the storage's cost."""

    run: Goodput
    failure_free_time_s: float
    restart_s: float
    failure_rate: str
    storage: str
    storage_cost_usd: float | None
    data: DataLoading | None
    idle_power_fraction: float = IDLE_POWER_FRACTION
    tier: str = "fsx"  # where checkpoints are written first: fsx, or nvme (then drained to FSx)

    def to_json(self) -> dict[str, Any]:
        """The keys ``JobTotals.to_json`` adds."""
        out: dict[str, Any] = {
            "goodput": self.run.goodput,
            "checkpoint_interval_s": self.run.interval_s,
            "checkpoint_stall_s": self.run.checkpoint_s,
            "num_checkpoints": self.run.num_checkpoints,
            "expected_failures": self.run.expected_failures,
            "job_mtbf_s": self.run.mtbf_s,
            "restart_s": self.restart_s,
            "failure_free_time_s": self.failure_free_time_s,
            "failure_rate": self.failure_rate,
            "storage": self.storage,
            "storage_cost_usd": self.storage_cost_usd,
            "checkpoint_tier": self.tier,
            "rework_s": self.run.rework_s,
            "waiting_s": self.run.waiting_s,
            "idle_power_fraction": self.idle_power_fraction,
        }
        if self.data is not None:
            out |= {
                "data_need_bytes_per_s": self.data.need_bytes_per_s,
                "data_supply_bytes_per_s": self.data.supply_bytes_per_s,
                "data_bound": self.data.supply.bound,
            }
        return out


BURST_ITERATIONS = 4  # Daly's interval for the stall that interval's settled burst gives, refined


def _policy_run(
    work_s: float, timing: CheckpointTiming, restart_s: float, mtbf_s: float, interval_s: float | None
) -> Goodput:
    """The expected run; with no interval given, Daly's optimum for the stall (with the burst credits the
    interval leaves, refined a few times), or the drain time when a background drain would not keep up
    with it (whichever runs faster)."""
    if interval_s is not None:
        return Policy(work_s, timing.stall_at(interval_s), restart_s, mtbf_s, interval_s).run()
    daly = Policy(work_s, timing.stall_s, restart_s, mtbf_s).chosen_interval_s
    for _ in range(BURST_ITERATIONS if timing.bucket is not None else 0):
        daly = Policy(work_s, timing.stall_at(daly), restart_s, mtbf_s).chosen_interval_s
    candidates = [daly] + ([timing.drain_s] if timing.drain_s > daly else [])
    runs = [Policy(work_s, timing.stall_at(t), restart_s, mtbf_s, t).run() for t in candidates]
    return min(runs, key=lambda r: r.expected_time_s)


def with_failures(totals: JobTotals, system: System, resilience: Resilience) -> JobTotals:
    """``totals`` with checkpoint stalls and failure losses: the failure-free time becomes the expected
    wall time, device-hours and instance cost scale with it, the storage's cost is added, and energy
    counts work and rework at board power and the waits (checkpoint stalls, restarts) at the idle
    fraction of it (a prior, ``reliability/priors.toml``)."""
    timing = resilience.checkpoint
    work = totals.time_s
    mtbf = job_mtbf_s(resilience.rate, num_devices=system.num_devices, num_nodes=system.num_nodes)
    restart = DETECT_REPLACE_S + timing.load.time_s + WARMUP_S
    run = _policy_run(work, timing, restart, mtbf, resilience.interval_s)
    scale = run.expected_time_s / work
    hours = run.expected_time_s / 3600
    storage_cost = None if resilience.storage_usd_per_hour is None else resilience.storage_usd_per_hour * hours
    cost = totals.cost_usd
    if cost is not None:
        cost = cost * scale + (storage_cost or 0.0)
    failures = FailureTotals(
        run=run, failure_free_time_s=work, restart_s=restart, failure_rate=resilience.rate.name,
        storage=resilience.storage_name, storage_cost_usd=storage_cost, data=resilience.data,
        tier="nvme" if timing.mode.value == "nvme" else "fsx",
    )  # fmt: skip
    busy = work + run.rework_s + IDLE_POWER_FRACTION * run.waiting_s
    return replace(
        totals,
        time_s=run.expected_time_s,
        device_hours=totals.device_hours * scale,
        energy_kwh=None if totals.energy_kwh is None else totals.energy_kwh * busy / work,
        cost_usd=cost,
        failures=failures,
    )
