"""Simulating a collective and what it reports: time, nccl-tests busbw, link utilization, the
hottest links and the tier that bound the job.

By default a collective runs on calibrated links with NCCL's per-step latencies (``nccl``: what
nccl-tests would measure); ``ideal=True`` runs the datasheet links without latency (the link-bound
view). Utilization is reported against the datasheet capacities either way."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.network.analytic import CommCalibration
from clustersim.network.collectives import Algorithm, Op, busbw_factor
from clustersim.network.flowsim.collectives import CollectiveFlows, collective_flows
from clustersim.network.flowsim.engine import FlowTimes, route_flows, run
from clustersim.network.flowsim.failover import with_pxn
from clustersim.network.flowsim.nccl import LinkModel, bare, link_model
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
    links: str = "ideal"  # "calibrated" (achieved fractions, NCCL's latencies) or "ideal" (datasheet, none)
    ramp: str = "none"  # calibrated: "simulated" (NCCL's structure) or "fitted" (the fitted ramp was slower)
    structure_time_s: float = 0.0  # calibrated: the time NCCL's simulated structure gave
    fitted_time_s: float = 0.0  # calibrated: the analytic latency and fitted ramp over the simulated bandwidth
    bandwidth_s: float = 0.0  # the bandwidth term alone (a pipeline without its fill; ``bandwidth_time_s``)

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
            "links": self.links,
            "protocol": "simple",
            "ramp": self.ramp,
            "structure_time_s": self.structure_time_s,
            "fitted_time_s": self.fitted_time_s,
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
    ideal: bool = False,
    calibration: CommCalibration | None = None,
) -> CollectiveResult:
    """Simulate ``op`` of ``size_bytes`` per rank on the GPUs of ``hosts``.

    Calibrated (default): NCCL's structure on the achieved links (``nccl``), and the same flows without
    latency priced as the analytic model prices them (its latency, the fitted ramp over the simulated
    bandwidth); the slower of the two is the answer, ``ramp`` says which (the fitted ramp is a fitted
    piece: where NCCL on the network ramps slower than its simulated structure). ``ideal``: the
    datasheet links, no latency (the link-bound view)."""
    began = time.perf_counter()
    model = link_model(tree.spec, ideal=ideal, calibration=calibration)
    plan, links = nccl_plan(tree, hosts, op, size_bytes, algorithm, model, max_steps=max_steps, chunks=chunks)
    inc = route_flows(links, plan.flows, routing, seed)
    parts = 1 if model.ideal else 2
    times = run(links, plan.flows, inc, began=began, progress=progress_share(progress, 0, parts))
    result = summarize(links, hosts, plan, times, routing, size_bytes, datasheet=tree, links_label=model.links)
    if model.ideal:
        return result
    plain = bare(plan)
    bandwidth = run(links, plain.flows, inc, progress=progress_share(progress, 1, parts))
    bandwidth_s = bandwidth_time_s(plain, bandwidth, links.capacity_bytes_per_s)
    fitted = model.fitted_time_s(tree.spec, int(np.size(hosts)), plan, size_bytes, bandwidth_s)
    return slower_of(result, fitted, wall_s=time.perf_counter() - began)


def slower_of(result: CollectiveResult, fitted_s: float, *, wall_s: float | None = None) -> CollectiveResult:
    """``result`` (NCCL's simulated structure) or, where slower, the fitted price ``fitted_s``."""
    structure = result.time_s
    total = max(structure, fitted_s)
    ratio = structure / total
    return replace(
        result,
        time_s=total,
        busbw_bytes_per_s=result.busbw_bytes_per_s * ratio,
        algbw_bytes_per_s=result.algbw_bytes_per_s * ratio,
        ramp="fitted" if fitted_s > structure else "simulated",
        structure_time_s=structure,
        fitted_time_s=fitted_s,
        wall_s=result.wall_s if wall_s is None else wall_s,
    )


def progress_share(
    progress: Callable[[int, int], None] | None, k: int, parts: int
) -> Callable[[int, int], None] | None:
    """``progress`` for the ``k``-th of ``parts`` runs of the same flows."""
    if progress is None:
        return None
    report = progress

    def update(done: int, n: int) -> None:
        report(k * n + done, parts * n)

    return update


def nccl_plan(
    tree: FatTree,
    hosts: IntArray,
    op: Op,
    size_bytes: float,
    algorithm: Algorithm | None,
    model: LinkModel,
    *,
    max_steps: int = 4,
    chunks: int = 8,
) -> tuple[CollectiveFlows, FatTree]:
    """The flows of ``op`` with ``model``'s latencies (PXN where NICs are down), and the links they run on."""
    plan = collective_flows(tree, hosts, op, size_bytes, algorithm, max_steps=max_steps, chunks=chunks)
    links = model.tree(tree, plan.algorithm)
    return with_pxn(links, model.schedule(tree, hosts, plan)), links


def collective_time_s(plan: CollectiveFlows, times: FlowTimes, capacity: FloatArray) -> float:
    """The whole collective: NCCL's base latency, then each simulated step's duration times the steps
    it stands for (a pipeline: the simulated pieces, then the rest at the busiest resource's pace)."""
    if plan.pipelined:
        busy = capacity > 0
        period = float((times.resource_bytes[busy] / capacity[busy]).max()) / plan.num_steps
        return plan.base_latency_s + times.makespan_s + (plan.total_steps - plan.num_steps) * period
    ends = np.zeros(plan.num_steps)
    np.maximum.at(ends, plan.flows.group, times.end_s)
    durations = np.diff(np.concatenate([[0.0], np.maximum.accumulate(ends)]))
    return plan.base_latency_s + float(np.dot(durations, plan.step_weights))


def bandwidth_time_s(plan: CollectiveFlows, times: FlowTimes, capacity: FloatArray) -> float:
    """The collective's bandwidth term alone (``size / algbw``): a pipeline's every piece at its steady
    pace, without the fill; otherwise ``collective_time_s``."""
    if plan.pipelined:
        busy = capacity > 0
        return float((times.resource_bytes[busy] / capacity[busy]).max()) / plan.num_steps * plan.total_steps
    return collective_time_s(plan, times, capacity)


def summarize(
    tree: FatTree,
    hosts: IntArray,
    plan: CollectiveFlows,
    times: FlowTimes,
    routing: Routing,
    size_bytes: float,
    *,
    datasheet: FatTree | None = None,
    links_label: str = "ideal",
) -> CollectiveResult:
    """Fold a run on ``tree``'s links into a ``CollectiveResult`` (utilization against ``datasheet``'s
    capacities, default ``tree``'s)."""
    total = collective_time_s(plan, times, tree.capacity_bytes_per_s)
    num_ranks = int(hosts.size * tree.spec.gpus_per_host)
    algbw = size_bytes / total
    report = link_report(datasheet or tree, times, tree.capacity_bytes_per_s)
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
        links=links_label,
        ramp="none" if links_label == "ideal" else "simulated",
        structure_time_s=total,
        bandwidth_s=bandwidth_time_s(plan, times, tree.capacity_bytes_per_s),
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


def link_report(tree: FatTree, times: FlowTimes, ran_on: FloatArray | None = None) -> LinkReport:
    """The links' side of a run against ``tree``'s capacities, the run having been on ``ran_on``'s
    (default the same; calibrated links run below the datasheet): a sprayed bundle's load is spread
    over its live links."""
    links = np.arange(tree.num_links)
    cap = tree.capacity_bytes_per_s
    if ran_on is not None and ran_on is not cap:  # the peaks were taken against the capacities run on
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(cap > 0, ran_on / cap, 0.0)
        times = replace(times, peak_utilization=times.peak_utilization * scale)
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
    ideal: bool = False,
    calibration: CommCalibration | None = None,
) -> JobsResult:
    """``op`` of ``size_bytes`` per rank in every job (the hosts of each) at once, and each alone
    (calibrated links with NCCL's latencies, or ``ideal`` ones, as ``simulate_collective``)."""
    model = link_model(tree.spec, ideal=ideal, calibration=calibration)
    built = [nccl_plan(tree, h, op, size_bytes, algorithm, model, max_steps=max_steps, chunks=chunks) for h in jobs]
    plans = [p for p, _ in built]
    links_tree = built[0][1]
    parts = 1 if model.ideal else 2

    def together_and_alone(
        plans: list[CollectiveFlows], k: int
    ) -> tuple[list[CollectiveResult], list[CollectiveResult], LinkReport]:
        return _jobs_run(
            links_tree, tree, jobs, plans, routing, seed, size_bytes, model.links, progress_share(progress, k, parts)
        )

    together, alone, links = together_and_alone(plans, 0)
    if not model.ideal:  # the fitted price where slower, each job's from its bandwidth without latency
        together_bw, alone_bw, _ = together_and_alone([bare(p) for p in plans], 1)

        def fitted(h: IntArray, p: CollectiveFlows, bw: CollectiveResult) -> float:
            return model.fitted_time_s(tree.spec, int(np.size(h)), p, size_bytes, bw.bandwidth_s)

        together = [
            slower_of(r, fitted(h, p, b)) for r, h, p, b in zip(together, jobs, plans, together_bw, strict=True)
        ]
        alone = [slower_of(r, fitted(h, p, b)) for r, h, p, b in zip(alone, jobs, plans, alone_bw, strict=True)]
    return JobsResult(together, [r.time_s for r in alone], links)


def _jobs_run(
    tree: FatTree,
    datasheet: FatTree,
    jobs: list[IntArray],
    plans: list[CollectiveFlows],
    routing: Routing,
    seed: int,
    size_bytes: float,
    links_label: str,
    progress: Callable[[int, int], None] | None,
) -> tuple[list[CollectiveResult], list[CollectiveResult], LinkReport]:
    """Every job's ``plans`` alone and all at once on ``tree``'s links: (together, alone, the shared run's links)."""
    from clustersim.network.flowsim.groups import concatenate

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
            datasheet=datasheet,
            links_label=links_label,
        )
        for h, p, b in zip(jobs, plans, bounds[:-1], strict=True)
    ]
    flows = concatenate([p.flows for p in plans])
    inc = route_flows(tree, flows, routing, seed)
    times = run(tree, flows, inc, progress=offset(progress, total // 2, total))
    links = link_report(datasheet, times, tree.capacity_bytes_per_s)
    together = []
    for k, (hosts, plan) in enumerate(zip(jobs, plans, strict=True)):
        mine = slice(int(bounds[k]), int(bounds[k + 1]))
        part = job_times(times, inc, mine, tree.capacity_bytes_per_s)
        result = summarize(tree, hosts, plan, part, routing, size_bytes, datasheet=datasheet, links_label=links_label)
        together.append(replace(result, hottest_links=links.hottest_links, binding_tier=links.binding_tier))
    return together, alone, links


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
