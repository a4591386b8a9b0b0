"""A plan's records: the points it searches (``PlanPoint``), the constraints it keeps, each priced row with its
interval and why it wins, and the plan itself, with their JSON (``clustersim.plan.planner`` makes them)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.intervals import Interval, Spread
from clustersim.system import System
from clustersim.training.estimate import Estimate
from clustersim.training.job import TrainingJob

Resilient = Callable[[Estimate, System], Estimate]  # an estimate with checkpoints and failures in its totals


@dataclass(frozen=True)
class PlanPoint:
    """One system to plan on, with the job, framework, price offer and checkpoint policy that go with it.

    ``resilience`` turns an estimate's totals into the expected run with failures and checkpoints
    (``checkpoint`` names the policy in the output; None: failure-free totals only)."""

    system: System
    instance: str
    nodes: int
    job: TrainingJob
    software: SoftwareProfile
    efficiency: FamilyEfficiency | None = None
    offer: str = "on_demand"
    checkpoint: str = "none"
    resilience: Resilient | None = None

    @property
    def label(self) -> str:
        """The point in words: instance, nodes, framework, precision, batch, offer and checkpoint policy."""
        policy = "" if self.resilience is None else f", checkpoint {self.checkpoint}"
        return (
            f"{self.nodes} x {self.instance} ({self.software.name}, {self.job.precision.value}, batch "
            f"{self.job.global_batch}, {self.offer.replace('_', ' ')}{policy})"
        )


@dataclass(frozen=True)
class Constraints:
    """What a plan must keep: wall time (``deadline_s``), cost (``budget_usd``) and instances (``max_nodes``)."""

    deadline_s: float | None = None
    budget_usd: float | None = None
    max_nodes: int | None = None


@dataclass(frozen=True)
class PlanRow:
    """One priced layout on one point, with its interval and, once ranked, why it beats its runner-up."""

    point: PlanPoint
    estimate: Estimate
    spread: Spread | None
    why: str = ""
    margin: float | None = None  # the runner-up's objective over this row's, less one
    runner_up: str = ""
    memory_spread: Spread | None = None  # of its memory per device (published peak memory's residuals)

    @property
    def time_s(self) -> float:
        """Failure-free time of the token budget."""
        totals = self.estimate.totals
        assert totals is not None
        return totals.time_s if totals.failures is None else totals.failures.failure_free_time_s

    @property
    def goodput_time_s(self) -> float | None:
        """Expected wall time with failures and checkpoints (None without a checkpoint policy)."""
        totals = self.estimate.totals
        assert totals is not None
        return None if totals.failures is None else totals.time_s

    @property
    def wall_s(self) -> float:
        """The time the deadline and the front read: goodput-adjusted where a checkpoint policy is given."""
        goodput = self.goodput_time_s
        return self.time_s if goodput is None else goodput

    @property
    def cost_usd(self) -> float | None:
        """Instance cost at the offer's price over the wall time (with the storage's, under a policy); None
        where the system has no price (a cluster that is not a catalogued instance)."""
        totals = self.estimate.totals
        assert totals is not None
        return totals.cost_usd

    @property
    def energy_j(self) -> float | None:
        """Energy at board power over the wall time (waits at the idle fraction, under a policy); None where
        the catalog gives no board power."""
        totals = self.estimate.totals
        assert totals is not None
        return None if totals.energy_kwh is None else totals.energy_kwh * 3.6e6

    def value(self, objective: str, safe: bool = False) -> float:
        """The figure ``objective`` minimizes (rows without an energy are left out before energy is ranked);
        ``safe``: its interval's upper end (the figure if the model errs as its left-out runs did)."""
        figures = {"energy": self.energy_j, "cost": self.cost_usd, "time": self.time_s, "goodput": self.wall_s}
        figure = figures[objective]
        assert figure is not None
        return figure * math.exp(self.spread.q_hi) if safe and self.spread is not None else figure

    @property
    def interval(self) -> dict[str, Interval]:
        """Intervals of the wall time, cost and energy (empty without residuals of the kind)."""
        if self.spread is None:
            return {}
        found = {"time_s": self.spread.duration(self.wall_s)}
        if self.cost_usd is not None:
            found["cost_usd"] = self.spread.duration(self.cost_usd)
        if self.energy_j is not None:
            found["energy_j"] = self.spread.duration(self.energy_j)
        return found

    @property
    def memory_interval(self) -> Interval:
        """The interval of its memory per device (needs ``memory_spread``)."""
        assert self.memory_spread is not None
        return self.memory_spread.duration(self.estimate.memory.required_bytes)

    @property
    def name(self) -> str:
        """The row in words: its point and layout."""
        return f"{self.point.label}: {self.estimate.layout.describe()}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, units in the names."""
        found = self.interval
        point, estimate = self.point, self.estimate
        return {
            "instance": point.instance,
            "nodes": point.nodes,
            "devices": point.system.num_devices,
            "framework": point.software.name,
            "precision": point.job.precision.value,
            "global_batch": point.job.global_batch,
            "seq_len": point.job.seq_len,
            "price_offer": point.offer,
            "checkpoint": point.checkpoint if point.resilience is not None else None,
            "layout": estimate.layout.describe(),
            "layout_fields": estimate.layout.model_dump(mode="json"),
            "step_s": estimate.step_s,
            "mfu": estimate.mfu,
            "time_s": self.time_s,
            "goodput_time_s": self.goodput_time_s,
            "cost_usd": self.cost_usd,
            "energy_j": self.energy_j,
            "memory_required_bytes": estimate.memory.required_bytes,
            "memory_interval": None if self.memory_spread is None else self.memory_interval.to_json(),
            "interval": None
            if not found
            else {
                "level": self.spread.level if self.spread else None,
                "basis": self.spread.basis if self.spread else "",
                "note": self.spread.note if self.spread else "",
                **{key: {"low": i.low, "high": i.high} for key, i in found.items()},
            },
            "why": self.why,
            "margin": self.margin,
            "runner_up": self.runner_up,
        }


@dataclass(frozen=True)
class Plan:
    """The rows that keep every constraint (best first by the objective), the front and the top rows."""

    objective: str
    safe: bool  # ranked by the upper end of each row's interval
    rows: tuple[PlanRow, ...]
    pareto: tuple[PlanRow, ...]  # by wall time, fastest first
    top: tuple[PlanRow, ...]  # the best row of each point, best first
    notes: tuple[str, ...]
    evaluated: int  # layouts evaluated in the vectorized calls
    elapsed_s: float
    points: int
    priced: int  # rows priced, before the constraints

    @property
    def layouts_per_s(self) -> float:
        """Layouts evaluated per second of the whole plan (enumerate, check, evaluate, rank, price)."""
        return self.evaluated / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """``pareto``, ``top``, the search's own figures and the notes."""
        return {
            "objective": self.objective,
            "safe": self.safe,
            "pareto": [row.to_json() for row in self.pareto],
            "top": [row.to_json() for row in self.top],
            "evaluated": self.evaluated,
            "elapsed_s": self.elapsed_s,
            "layouts_per_s": self.layouts_per_s,
            "points": self.points,
            "priced": self.priced,
            "feasible": len(self.rows),
            "notes": list(self.notes),
        }
