"""The training job (what to train) and its totals: time, device-hours, cost and energy of a token budget."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.system import System
from clustersim.units import MAX_SEQUENCE_TOKENS, MAX_SEQUENCES, MAX_TOKENS

PRECISIONS = (Dtype.BF16, Dtype.FP16, Dtype.FP8)
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
            raise ClusterSimError(f"precision {self.precision.value!r} is not a training precision (valid: {valid})")
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
        return out


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
    note = f"no {offer.replace('_', ' ')} price for {system.instance.id}" if system.instance else None
    unpriced = JobTotals(
        tokens=job.tokens,
        steps=steps,
        time_s=seconds,
        device_hours=seconds / 3600 * system.num_devices,
        energy_kwh=None if power is None else power * system.num_devices * seconds / 3.6e6,
        price_offer=offer,
        cost_usd=None,
        price_note=note or "no instance given: no price",
    )
    if price is None or price.usd_per_hour is None:
        return unpriced
    return replace(
        unpriced,
        cost_usd=price.usd_per_hour * system.num_nodes * seconds / 3600,
        price_usd_per_hour=price.usd_per_hour,
        price_as_of=price.as_of.isoformat(),
        price_region=price.region,
        price_note=None,
    )
