"""The training job (what to train) and its totals: time, device-hours, cost and energy of a token budget."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.system import System

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
        if self.global_batch < 1:
            raise ClusterSimError(f"global batch must be at least 1 sequence, got {self.global_batch}")
        if self.seq_len < 1:
            raise ClusterSimError(f"sequence length must be at least 1 token, got {self.seq_len}")
        if self.precision not in PRECISIONS:
            valid = ", ".join(p.value for p in PRECISIONS)
            raise ClusterSimError(f"precision {self.precision.value!r} is not a training precision (valid: {valid})")
        if self.tokens is not None and self.tokens <= 0:
            raise ClusterSimError(f"tokens must be positive, got {self.tokens}")

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
