"""Simulating a collective and what it reports: time, nccl-tests busbw, link utilization, the
hottest links and the tier that bound the job."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.network.collectives import Algorithm, Op, busbw_factor
from clustersim.network.flowsim.collectives import CollectiveFlows, collective_flows
from clustersim.network.flowsim.engine import FlowTimes, route_flows, run
from clustersim.network.flowsim.failover import with_pxn
from clustersim.network.flowsim.routing import Incidence, Routing
from clustersim.network.flowsim.topology import TIER_NAMES, FatTree, FloatArray, IntArray, Tier
from clustersim.network.flowsim.work import offset

NETWORK_TIERS = (Tier.NIC_UP, Tier.NIC_DOWN, Tier.LEAF_UP, Tier.LEAF_DOWN, Tier.SPINE_UP, Tier.CORE_DOWN)
HOT_LINKS = 5


@dataclass(frozen=True, slots=True, eq=False)
class CollectiveResult:
    """One simulated collective. ``time_s`` covers every step: the simulated ones as they ran, the
    rest at the pace of the last simulated one (``extrapolated``)."""

    op: Op
    algorithm: Algorithm
    routing: Routing
    num_nodes: int
    num_ranks: int
    size_bytes: float
    time_s: float
    busbw_bytes_per_s: float
    algbw_bytes_per_s: float
    steps_simulated: int
    steps_total: int
    extrapolated: bool
    link_utilization: FloatArray  # per network link: time-averaged over the simulated window
    link_peak_utilization: FloatArray  # per network link: highest instantaneous load / capacity
    link_tier: npt.NDArray[np.int8]  # per network link
    tier_utilization: dict[str, float]  # mean time-averaged utilization of the links used, per tier
    hottest_links: list[tuple[str, float]]
    binding_tier: str
    flow_end_s: FloatArray
    num_flows: int
    num_events: int
    num_rounds: int
    wall_s: float

    @property
    def max_link_utilization(self) -> float:
        """Highest instantaneous utilization any network link reached."""
        return float(self.link_peak_utilization.max()) if self.link_peak_utilization.size else 0.0

    @property
    def events_per_s(self) -> float:
        return self.num_events / self.wall_s if self.wall_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (no wall-clock figures, so the same seed gives the same bytes)."""
        return {
            "op": self.op.value,
            "algorithm": self.algorithm.value,
            "routing": self.routing.value,
            "num_nodes": self.num_nodes,
            "num_ranks": self.num_ranks,
            "size_bytes": self.size_bytes,
            "time_s": self.time_s,
            "algbw_bytes_per_s": self.algbw_bytes_per_s,
            "busbw_bytes_per_s": self.busbw_bytes_per_s,
            "steps_simulated": self.steps_simulated,
            "steps_total": self.steps_total,
            "extrapolated": self.extrapolated,
            "max_link_utilization": self.max_link_utilization,
            "tier_utilization": self.tier_utilization,
            "hottest_links": [{"link": name, "utilization": u} for name, u in self.hottest_links],
            "binding_tier": self.binding_tier,
            "num_flows": self.num_flows,
            "num_events": self.num_events,
            "num_rounds": self.num_rounds,
        }


def simulate_collective(
    tree: FatTree,
    hosts: IntArray,
    op: Op,
    size_bytes: float,
    *,
    routing: Routing = Routing.SPRAY,
    algorithm: Algorithm | None = None,
    seed: int = 0,
    max_steps: int = 4,
    chunks: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> CollectiveResult:
    """Simulate ``op`` of ``size_bytes`` per rank on the GPUs of ``hosts``."""
    began = time.perf_counter()
    plan = with_pxn(tree, collective_flows(tree, hosts, op, size_bytes, algorithm, max_steps=max_steps, chunks=chunks))
    inc = route_flows(tree, plan.flows, routing, seed)
    times = run(tree, plan.flows, inc, began=began, progress=progress)
    return summarize(tree, hosts, plan, times, routing, size_bytes)


def collective_time_s(plan: CollectiveFlows, times: FlowTimes, capacity: FloatArray) -> float:
    """The whole collective: each simulated step's duration times the steps it stands for (a
    pipeline: the simulated pieces, then the rest at the busiest resource's pace)."""
    if plan.pipelined:
        busy = capacity > 0
        period = float((times.resource_bytes[busy] / capacity[busy]).max()) / plan.num_steps
        return times.makespan_s + (plan.total_steps - plan.num_steps) * period
    ends = np.zeros(plan.num_steps)
    np.maximum.at(ends, plan.flows.group, times.end_s)
    durations = np.diff(np.concatenate([[0.0], np.maximum.accumulate(ends)]))
    return float(np.dot(durations, plan.step_weights))


def summarize(
    tree: FatTree, hosts: IntArray, plan: CollectiveFlows, times: FlowTimes, routing: Routing, size_bytes: float
) -> CollectiveResult:
    """Fold a run into a ``CollectiveResult``."""
    total = collective_time_s(plan, times, tree.capacity_bytes_per_s)
    num_ranks = int(hosts.size * tree.spec.gpus_per_host)
    algbw = size_bytes / total
    report = link_report(tree, times)
    return CollectiveResult(
        op=plan.op,
        algorithm=plan.algorithm,
        routing=routing,
        num_nodes=int(hosts.size),
        num_ranks=num_ranks,
        size_bytes=float(size_bytes),
        time_s=total,
        busbw_bytes_per_s=algbw * busbw_factor(plan.op, num_ranks),
        algbw_bytes_per_s=algbw,
        steps_simulated=plan.num_steps,
        steps_total=plan.total_steps,
        extrapolated=plan.total_steps > plan.num_steps,
        link_utilization=report.utilization,
        link_peak_utilization=report.peak_utilization,
        link_tier=report.tier,
        tier_utilization=report.tier_utilization,
        hottest_links=report.hottest_links,
        binding_tier=report.binding_tier,
        flow_end_s=times.end_s,
        num_flows=plan.flows.num_flows,
        num_events=times.num_events,
        num_rounds=times.num_rounds,
        wall_s=times.wall_s,
    )


@dataclass(frozen=True, slots=True, eq=False)
class LinkReport:
    """What a run did to the network links: utilization (time-averaged over the run, and peak), per
    tier, the hottest links named, and the tier of the busiest resource."""

    utilization: FloatArray
    peak_utilization: FloatArray
    tier: npt.NDArray[np.int8]
    tier_utilization: dict[str, float]
    hottest_links: list[tuple[str, float]]
    binding_tier: str

    @property
    def max_link_utilization(self) -> float:
        return float(self.peak_utilization.max()) if self.peak_utilization.size else 0.0


def link_report(tree: FatTree, times: FlowTimes) -> LinkReport:
    """The links' side of a run: a sprayed bundle's load is spread over its live links."""
    links = np.arange(tree.num_links)
    cap = tree.capacity_bytes_per_s
    window = max(times.makespan_s, 1e-300)
    bundle = tree.bundle_of
    in_bundle = bundle >= 0
    live = ~tree.failed
    bundle_util = np.zeros(tree.num_links)
    bundle_peak = np.zeros(tree.num_links)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = np.where(cap[: tree.num_links] > 0, times.resource_bytes[: tree.num_links] / cap[: tree.num_links], 0.0)
        b_cap = cap[bundle[in_bundle]]
        bundle_util[in_bundle] = np.where(b_cap > 0, times.resource_bytes[bundle[in_bundle]] / b_cap, 0.0)
    bundle_peak[in_bundle] = times.peak_utilization[bundle[in_bundle]]
    util = np.where(live, (avg + bundle_util) / window, 0.0)
    peak = np.where(live, times.peak_utilization[links] + bundle_peak, 0.0)
    tier = tree.tier[: tree.num_links]
    tier_util: dict[str, float] = {}
    for t in NETWORK_TIERS:
        used = (tier == t) & (util > 0)
        if used.any():
            tier_util[TIER_NAMES[t]] = float(util[used].mean())
    hot = np.argsort(-util, kind="stable")[:HOT_LINKS]
    hottest = [(tree.link_name(int(i)), float(util[i])) for i in hot if util[i] > 0]
    return LinkReport(util, peak, tier, tier_util, hottest, _binding(times, tree, util))


def _binding(times: FlowTimes, tree: FatTree, util: FloatArray) -> str:
    """The tier of the busiest resource (time-averaged), scale-up ports included (named as the tree's
    scale-up link: nvlink, neuronlink)."""
    scaleup = np.arange(tree.scaleup0, tree.num_resources)
    cap = tree.capacity_bytes_per_s[scaleup]
    window = max(times.makespan_s, 1e-300)
    scaleup_util = times.resource_bytes[scaleup] / cap / window
    best_link = int(np.argmax(util)) if util.size else -1
    if scaleup_util.size and (best_link < 0 or scaleup_util.max() > util[best_link] * (1 + 1e-6)):
        return tree.spec.scaleup_link.lower()
    return TIER_NAMES[Tier(int(tree.tier[best_link]))] if best_link >= 0 else "none"


@dataclass(frozen=True, slots=True, eq=False)
class JobsResult:
    """Several jobs running one collective each on one fabric at once: each job's result as it ran
    with the others, and its time alone on the same hosts."""

    together: list[CollectiveResult]  # per job, its links' figures those of the shared run
    alone_time_s: list[float]
    links: LinkReport  # the shared run

    @property
    def slowdown(self) -> list[float]:
        return [r.time_s / a for r, a in zip(self.together, self.alone_time_s, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        """Per job: time together and alone, slowdown, busbw; the shared run's links."""
        jobs = [
            {
                "job": k,
                "time_s": r.time_s,
                "alone_time_s": alone,
                "slowdown": slow,
                "busbw_bytes_per_s": r.busbw_bytes_per_s,
                "alone_busbw_bytes_per_s": r.busbw_bytes_per_s * r.time_s / alone,
            }
            for k, (r, alone, slow) in enumerate(zip(self.together, self.alone_time_s, self.slowdown, strict=True))
        ]
        return {
            "jobs": jobs,
            "max_slowdown": max(self.slowdown),
            "max_link_utilization": self.links.max_link_utilization,
            "tier_utilization": self.links.tier_utilization,
            "hottest_links": [{"link": name, "utilization": u} for name, u in self.links.hottest_links],
            "binding_tier": self.links.binding_tier,
        }


def simulate_jobs(
    tree: FatTree,
    jobs: list[IntArray],
    op: Op,
    size_bytes: float,
    *,
    routing: Routing = Routing.SPRAY,
    algorithm: Algorithm | None = None,
    seed: int = 0,
    max_steps: int = 4,
    chunks: int = 8,
    progress: Callable[[int, int], None] | None = None,
) -> JobsResult:
    """``op`` of ``size_bytes`` per rank in every job (the hosts of each) at once, and each alone."""
    from clustersim.network.flowsim.groups import concatenate

    plans = [
        with_pxn(tree, collective_flows(tree, h, op, size_bytes, algorithm, max_steps=max_steps, chunks=chunks))
        for h in jobs
    ]
    bounds = np.cumsum([0] + [p.flows.num_flows for p in plans])
    total = 2 * int(bounds[-1])  # each job alone, then all at once: the flows progress counts
    alone = [
        summarize(
            tree,
            h,
            p,
            run(tree, p.flows, route_flows(tree, p.flows, routing, seed), progress=offset(progress, int(b), total)),
            routing,
            size_bytes,
        )
        for h, p, b in zip(jobs, plans, bounds[:-1], strict=True)
    ]
    flows = concatenate([p.flows for p in plans])
    inc = route_flows(tree, flows, routing, seed)
    times = run(tree, flows, inc, progress=offset(progress, total // 2, total))
    links = link_report(tree, times)
    together = []
    for k, (hosts, plan) in enumerate(zip(jobs, plans, strict=True)):
        mine = slice(int(bounds[k]), int(bounds[k + 1]))
        part = job_times(times, inc, mine, tree.capacity_bytes_per_s)
        result = summarize(tree, hosts, plan, part, routing, size_bytes)
        together.append(replace(result, hottest_links=links.hottest_links, binding_tier=links.binding_tier))
    return JobsResult(together, [r.time_s for r in alone], links)


def job_times(times: FlowTimes, inc: Incidence, mine: slice, capacity: FloatArray) -> FlowTimes:
    """The part of a shared run that flows ``mine`` account for: their times, and the bytes of every
    job on the resources they use (so a pipelined collective goes at the shared resources' pace)."""
    entries = (inc.flow >= mine.start) & (inc.flow < mine.stop)
    used = np.zeros(capacity.size, dtype=bool)
    used[inc.resource[entries]] = True
    resource_bytes = np.where(used, times.resource_bytes, 0.0)
    return replace(
        times,
        start_s=times.start_s[mine],
        tx_end_s=times.tx_end_s[mine],
        end_s=times.end_s[mine],
        resource_bytes=resource_bytes,
    )
