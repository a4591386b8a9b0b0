"""A serving plan's records: one deployment (instance x nodes x layout), its priced row (throughput, latency,
cost and energy per token, interval, why it wins) and the plan, with their JSON (``plan.serving_search`` makes
them).

A deployment is ``nodes`` instances, each filled with replicas of ``tp x pp`` devices (``serve``'s layout on one
instance); the replicas share the load evenly, so ``nodes`` instances at a rate price as one at the rate over
``nodes``. Cost is the instances' price per hour over the output tokens they make; energy is every device of the
instances at board power (the catalogued TDP: an upper end while serving) over the same tokens.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clustersim.intervals import Interval, Spread
from clustersim.serving.engine import ServingSystem
from clustersim.serving.estimate import Request, ServingEstimate
from clustersim.serving.sim_report import Slo

SERVING_OBJECTIVES = ("cost", "time", "energy")
LATENCY = "mean end-to-end latency (TTFT + (output - 1) x TPOT)"  # what objective time ranks
TOKENS_PER_MILLION = 1e6
# ``max_rate`` finds the rate on the interpolated latency curve and reports the estimate at a whole batch, whose
# TPOT can sit a few parts per million above the bound it met (llama3.1-70b tp 8 on p5: 40.0002 ms for 40 ms)
MAX_RATE_TOLERANCE = 1e-3


@dataclass(frozen=True)
class ServingLoad:
    """What the deployment must serve: ``rate_per_s`` requests/s (Poisson), ``concurrency`` clients in a closed
    loop, or neither (the highest rate meeting ``slo``, ``serving.latency.max_rate``); ``slo`` bounds the mean
    TTFT, ITL (TPOT) and end-to-end latency of the closed forms."""

    rate_per_s: float | None = None
    concurrency: int | None = None
    slo: Slo | None = None

    @property
    def mode(self) -> str:
        """``rate``, ``concurrency`` or ``max_rate``."""
        return "rate" if self.rate_per_s is not None else "concurrency" if self.concurrency is not None else "max_rate"


@dataclass(frozen=True)
class Deployment:
    """``nodes`` instances of ``instance``, each with ``replicas_per_node`` replicas of ``tp x pp`` devices (or with
    ``nodes_per_replica`` > 1, replicas each spanning that many instances, a pipeline stage an instance), weights at
    ``precision``, served by ``engine``."""

    instance: str
    nodes: int
    tp: int
    pp: int
    replicas_per_node: int
    precision: str
    engine: str
    nodes_per_replica: int = 1

    @property
    def replicas(self) -> int:
        if self.nodes_per_replica > 1:
            return self.nodes // self.nodes_per_replica
        return self.nodes * self.replicas_per_node

    @property
    def layout(self) -> str:
        """The layout in words: ``4 x tp2 pp1`` (replicas of tp x pp devices, all nodes together), ``1 x tp8 pp2
        (2 nodes each)`` where a replica spans instances."""
        spans = f" ({self.nodes_per_replica} nodes each)" if self.nodes_per_replica > 1 else ""
        return f"{self.replicas} x tp{self.tp} pp{self.pp}{spans}"

    @property
    def name(self) -> str:
        return f"{self.nodes} x {self.instance} ({self.precision}, {self.engine}): {self.layout}"


@dataclass(frozen=True)
class SimulatedFigures:
    """The request-level simulator's figures for a row: TTFT and ITL (pooled over tokens) mean and p99, the share
    of requests meeting the SLO, and the simulated requests."""

    ttft_mean_s: float
    ttft_p99_s: float
    itl_mean_s: float
    itl_p99_s: float
    goodput_share: float | None
    output_tokens_per_s: float
    requests: int

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class ServingRow:
    """One priced deployment: its closed-form estimate, the price and power of its instances, its spread
    (``serve``'s interval of throughput), once ranked why it wins and its margin, once simulated the simulator's
    figures and the spread of their p99 TTFT."""

    deployment: Deployment
    system: ServingSystem
    request: Request
    estimate: ServingEstimate
    price_usd_per_hour: float | None  # all the nodes
    power_watts: float | None  # every device of the nodes at board power
    offer: str = "on_demand"  # the price offer of price_usd_per_hour
    spread: Spread | None = None
    latency_spread: Spread | None = None  # the TPOT's (a request's latency is mostly its output's steps)
    simulated_spread: Spread | None = None  # the simulated p99 TTFT's (published p99 TTFTs' residuals)
    why: str = ""
    margin: float | None = None  # the runner-up's objective over this row's, less one
    runner_up: str = ""
    simulated: SimulatedFigures | None = None

    @property
    def output_tokens_per_s(self) -> float:
        return self.estimate.output_tokens_per_s

    @property
    def latency_s(self) -> float:
        """Mean end-to-end latency of a request: TTFT and a TPOT per later token."""
        return self.estimate.ttft_s + (self.estimate.output_tokens - 1.0) * self.estimate.tpot_s

    @property
    def cost_usd_per_mtok(self) -> float | None:
        """USD per million output tokens at the offer's price (None: no price)."""
        if self.price_usd_per_hour is None:
            return None
        return self.price_usd_per_hour / 3600.0 / self.output_tokens_per_s * TOKENS_PER_MILLION

    @property
    def energy_j_per_token(self) -> float | None:
        """Joules per output token at board power (None: no catalogued power)."""
        return None if self.power_watts is None else self.power_watts / self.output_tokens_per_s

    def meets(self, slo: Slo | None, tolerance: float = 1e-9) -> bool:
        """Whether the closed form's mean TTFT, TPOT and end-to-end latency keep ``slo`` (within ``tolerance``,
        relative)."""
        if slo is None:
            return True
        bounds = ((slo.ttft_s, self.estimate.ttft_s), (slo.itl_s, self.estimate.tpot_s), (slo.e2e_s, self.latency_s))
        return all(bound is None or value <= bound * (1 + tolerance) for bound, value in bounds)

    def value(self, objective: str) -> float | None:
        """The figure ``objective`` minimizes (None: the row has no such figure)."""
        return {"cost": self.cost_usd_per_mtok, "time": self.latency_s, "energy": self.energy_j_per_token}[objective]

    @property
    def interval(self) -> dict[str, Interval]:
        """``serve``'s spread of throughput applied to the throughput and to what scales with its inverse, and the
        TPOT's to the mean latency (the throughput's where there is no TPOT spread)."""
        if self.spread is None:
            return {}
        found = {
            "output_tokens_per_s": self.spread.rate(self.output_tokens_per_s),
            "latency_s": (self.latency_spread or self.spread).duration(self.latency_s),
        }
        for key in ("cost_usd_per_mtok", "energy_j_per_token"):
            figure = getattr(self, key)
            if figure is not None:
                found[key] = self.spread.duration(figure)
        if self.simulated is not None and self.simulated_spread is not None:
            found["simulated_ttft_p99_s"] = self.simulated_spread.duration(self.simulated.ttft_p99_s)
        return found

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, units in the names (keys as the training plan's rows where they mean the same)."""
        d, e = self.deployment, self.estimate
        found = self.interval
        return {
            "instance": d.instance,
            "nodes": d.nodes,
            "devices": self.system.system.devices_per_node * d.nodes,
            "precision": d.precision,
            "engine": d.engine,
            "layout": d.layout,
            "layout_fields": {
                "tp": d.tp,
                "pp": d.pp,
                "replicas": d.replicas,
                "replicas_per_node": d.replicas_per_node,
                "nodes_per_replica": d.nodes_per_replica,
            },
            "batch": e.batch,
            "request_rate_per_s": e.request_rate_per_s,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ttft_s": e.ttft_s,
            "tpot_s": e.tpot_s,
            "latency_s": self.latency_s,
            "simulated": None if self.simulated is None else self.simulated.to_json(),
            "price_offer": self.offer,
            "cost_usd_per_hour": self.price_usd_per_hour,
            "cost_usd_per_mtok": self.cost_usd_per_mtok,
            "energy_j_per_token": self.energy_j_per_token,
            "interval": None
            if self.spread is None
            else {
                "level": self.spread.level,
                "basis": self.spread.basis,
                "note": self.spread.note,
                "latency_basis": (self.latency_spread or self.spread).basis,
                **(
                    {}
                    if self.simulated_spread is None
                    else {
                        "simulated_ttft_p99_basis": self.simulated_spread.basis,
                        "simulated_ttft_p99_note": self.simulated_spread.note,
                    }
                ),
                **{key: {"low": i.low, "high": i.high} for key, i in found.items()},
            },
            "why": self.why,
            "margin": self.margin,
            "runner_up": self.runner_up,
        }


@dataclass(frozen=True)
class ServingPlan:
    """The deployments that keep the SLO (best first), the cost-latency front and the top rows."""

    objective: str
    load: ServingLoad
    dataset: str
    input_tokens: float
    output_tokens: float
    rows: tuple[ServingRow, ...]
    pareto: tuple[ServingRow, ...]  # by latency, lowest first
    top: tuple[ServingRow, ...]  # the best row of each point (instance, nodes, precision), best first
    notes: tuple[str, ...]
    evaluated: int  # deployments priced by the closed forms
    elapsed_s: float
    points: int
    priced_s: float = 0.0  # of elapsed_s: enumerating and pricing by the closed forms (no ranking, no simulation)

    @property
    def layouts_per_s(self) -> float:
        """Deployments per second of the whole plan (enumerate, price, rank, intervals, simulate the top)."""
        return self.evaluated / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def priced_per_s(self) -> float:
        """Deployments the closed forms price per second."""
        return self.evaluated / self.priced_s if self.priced_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """``pareto``, ``top``, the search's own figures and the notes; ``mode: serving``."""
        slo = self.load.slo
        return {
            "mode": "serving",
            "objective": self.objective,
            "latency": LATENCY,
            "dataset": self.dataset,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "load": {
                "kind": self.load.mode,
                "rate_per_s": self.load.rate_per_s,
                "concurrency": self.load.concurrency,
                "slo": None if slo is None else slo.to_json(),
            },
            "pareto": [row.to_json() for row in self.pareto],
            "top": [row.to_json() for row in self.top],
            "evaluated": self.evaluated,
            "elapsed_s": self.elapsed_s,
            "layouts_per_s": self.layouts_per_s,
            "priced_s": self.priced_s,
            "priced_per_s": self.priced_per_s,
            "points": self.points,
            "priced": self.evaluated,
            "feasible": len(self.rows),
            "notes": list(self.notes),
        }


def margin_of(best: float, runner: float) -> float:
    """The runner-up's figure over the best's, less one (inf where the best's is 0)."""
    return runner / best - 1.0 if best > 0 else math.inf
