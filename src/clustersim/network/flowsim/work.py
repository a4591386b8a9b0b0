"""The fabric simulator's work, estimated from the flows before any is simulated (``network.work``).

A run costs a fixed time per flow (routing it, solving its rate), a fixed time per event, and a scan of
every flow held at each event (``engine.run``): the last, flows x events, is the count ``--max-events``
bounds (flow-events). The events are not known before the run; a flow DAG of ``L`` levels (dependency
depth) made 1.6 to 8.4 events a level in the runs measured (ring, tree, NVLS tree, all-to-all, 16 to 256
nodes), so the estimate takes ``EVENTS_PER_LEVEL`` per level. Copies of a job side by side (``--jobs``)
can fall out of step, so their events add up while their flows share each event: ``J`` jobs cost
``J**2`` one job's flow-events, plus each job alone.

The rates were fitted on the reference machine (2 cores, 24 GiB, loaded by other work) to the CPU time of
``fabric simulate``'s runs (a 1 GiB all-reduce on p5 nodes, calibrated links, NCCL's pick of algorithm, NVLS
tree, and ring) over the estimate's own counts: ``benchmarks/bench_flowsim_speed.py --work`` (16 to 1,024
nodes alone, 4 to 64 jobs of 16 nodes, 8 of 64; 0.08 s to 52 s). No choice of the three rates brings all
eleven runs closer than a factor of 3.3 to each other (the model's form: the events of an NVLS tree and
of a ring cost differently); these are the rates of the smallest such spread, scaled so that none is
estimated short: the estimate is 1.0-3.4x those runs' times (the rates before, 25 us a flow, 1 ms an
event, 1e8 flow-events a second, gave 1.2-5.9x). Memory: 64 jobs of 16 nodes held 508k flows in 1.27
GB peak resident memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.collectives import collective_flows
from clustersim.network.flowsim.engine import Flows
from clustersim.network.flowsim.failover import with_pxn
from clustersim.network.flowsim.topology import FatTree, IntArray
from clustersim.network.work import WorkEstimate

FLOW_EVENTS_PER_S = 1.2e8  # flows held x events per second (fitted: see above)
SECONDS_PER_EVENT = 2.1e-3  # an estimated event's own cost, its re-solves' overhead
SECONDS_PER_FLOW = 1.25e-5  # a flow's own cost: built, routed, its rate solved
EVENTS_PER_LEVEL = 8  # events per level of the flow DAG (the most measured: 8.4, NVLS tree on 16 nodes)
BYTES_PER_FLOW = 2_500  # peak memory per flow held (its arrays, its routes when sprayed, the solver's)
DEFAULT_MAX_FLOW_EVENTS = 1e10  # the --jobs guard (jobs squared): 64 jobs of 16 nodes estimate 9e9, 52 s run
SAMPLE_NODES = 512  # a larger job's flows are counted from its first 512 nodes'
MAX_LEVELS = 1_000_000  # a DAG deeper than this is counted as this deep (the estimate is a bound then)

Progress = Callable[[int, int], None]


def dag_levels(flows: Flows) -> int:
    """The levels of ``flows``' dependency DAG: 1 when none waits on another (at most ``MAX_LEVELS``)."""
    n = flows.num_flows
    if n == 0:
        return 0
    waiting = np.diff(flows.dep_ptr)
    if not waiting.any():
        return 1
    waiter = np.repeat(np.arange(n, dtype=np.int64), waiting)
    dep = flows.dep_idx
    left = waiting.copy()  # Kahn's algorithm, a level at a time
    order = np.argsort(dep, kind="stable")
    ptr = np.searchsorted(dep[order], np.arange(n + 1))
    dependents = waiter[order]
    frontier = np.flatnonzero(left == 0)
    levels = 0
    while frontier.size and levels < MAX_LEVELS:
        levels += 1
        lens = ptr[frontier + 1] - ptr[frontier]
        idx = np.repeat(ptr[frontier] - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        freed = dependents[idx]
        if freed.size > n // 16:
            count = np.bincount(freed, minlength=n)
            left -= count
            frontier = np.flatnonzero((count > 0) & (left == 0))
        else:
            np.subtract.at(left, freed, 1)
            frontier = np.unique(freed[left[freed] == 0])
    return levels


def estimate_flows(flows: Flows, *, what: str, jobs: int = 1, runs: int = 1) -> WorkEstimate:
    """The work of ``runs`` simulations of ``flows`` (one job's), with ``jobs`` copies side by side
    (each also run alone, as ``simulate_jobs`` does)."""
    return estimate(flows.num_flows, dag_levels(flows), what=what, jobs=jobs, runs=runs)


def estimate(num_flows: float, levels: float, *, what: str, jobs: int = 1, runs: int = 1) -> WorkEstimate:
    """The work of ``runs`` simulations of one job's ``num_flows`` flows in a DAG of ``levels`` levels,
    ``jobs`` copies side by side (each also run alone)."""
    f = float(num_flows)
    events_one = EVENTS_PER_LEVEL * max(1.0, float(levels))
    if jobs == 1:
        flows, events, flow_events = f, events_one, f * events_one
    else:
        shared = (jobs * f) * (jobs * events_one)
        alone = jobs * f * events_one
        flows, events, flow_events = 2.0 * jobs * f, 2.0 * jobs * events_one, shared + alone
    flows, events, flow_events = flows * runs, events * runs, flow_events * runs
    return WorkEstimate(
        what=what,
        events=flow_events,
        unit="flow-events",
        seconds=flows * SECONDS_PER_FLOW + events * SECONDS_PER_EVENT + flow_events / FLOW_EVENTS_PER_S,
        memory_bytes=jobs * f * BYTES_PER_FLOW,
        default_bound=DEFAULT_MAX_FLOW_EVENTS,
    )


def collective_work(
    tree: FatTree,
    hosts: IntArray,
    op: Op,
    size_bytes: float,
    *,
    algorithm: Algorithm | None = None,
    max_steps: int = 4,
    chunks: int = 8,
    jobs: int = 1,
    runs: int = 1,
) -> WorkEstimate:
    """The work of simulating ``op`` on ``hosts`` (one job's), ``jobs`` copies at once, ``runs`` times
    (routings and seeds compared, and calibrated links, whose flows run twice: ``results``). No flow is
    simulated: the flows of the first ``SAMPLE_NODES`` hosts are built, and a larger job's counted in
    proportion (its DAG deeper by the log of its ranks)."""
    nodes = int(np.size(hosts))
    sample = hosts[:SAMPLE_NODES]
    plan = with_pxn(tree, collective_flows(tree, sample, op, size_bytes, algorithm, max_steps=max_steps, chunks=chunks))
    scale = nodes / int(np.size(sample))
    levels = float(dag_levels(plan.flows))
    if scale > 1:
        ranks = int(np.size(sample)) * tree.spec.gpus_per_host
        levels *= math.log2(ranks * scale) / math.log2(ranks)
    f = plan.flows.num_flows * scale
    copies = f"{jobs:,} jobs x ~{f:,.0f} flows" if jobs > 1 else f"~{f:,.0f} flows"
    what = f"{op.value} on {nodes:,} nodes, {copies}" + (f", {runs} runs" if runs > 1 else "")
    return estimate(f, levels, what=what, jobs=jobs, runs=runs)


def offset(progress: Progress | None, before: int, total: int) -> Progress | None:
    """``progress`` for one part of a longer run: ``before`` flows done already, ``total`` in all."""
    if progress is None:
        return None
    report = progress

    def part(done: int, _n: int) -> None:
        report(before + done, total)

    return part
