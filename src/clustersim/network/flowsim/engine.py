"""The event loop: flows start when released and their dependencies have arrived, share the fabric
max-min fairly, and the rates are solved again only when a flow starts or completes.

A flow's last byte leaves at ``tx_end_s``; it arrives ``hops x link_latency_s`` plus its own
``latency_s`` later (``end_s``), and flows that depend on it may start then; a dependency marked in
``dep_queue`` (the sender's queue: the next piece on the same connection) releases at ``tx_end_s``.
Between events every active flow moves at its solved rate, so the next event is the earliest release
or the earliest completion. Each flow keeps its bytes left at its last rate change and the time it
will finish at that rate, so an event touches only the flows whose rate changed; ``MaxMinState`` says
which (those at or above the level where the allocation can first differ), and re-solves only them:
exact, not approximated. Release, finish and done times are kept with their block minima
(``BlockMin``), so finding the next event and the flows it ends costs a pass over the blocks, not
over every flow (a million flows and thousands of events otherwise spend most of the run there).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.blockmin import BlockMin
from clustersim.network.flowsim.filling import csr_rows
from clustersim.network.flowsim.routing import Incidence, Routing, route
from clustersim.network.flowsim.solver import WARM_FRACTION, MaxMinState, distinct, prepare
from clustersim.network.flowsim.topology import BoolArray, FatTree, FloatArray, IntArray

DONE_TOL = 1e-9  # a flow with less than this fraction of its bytes left has completed


@dataclass(frozen=True, slots=True, kw_only=True)
class Flows:
    """Transfers between global GPU numbers, with sizes, release times and dependencies.

    ``dep_ptr``/``dep_idx`` (CSR): flow ``i`` waits for flows ``dep_idx[dep_ptr[i]:dep_ptr[i+1]]``
    to arrive (or, where ``dep_queue`` is set for that entry, to have sent their last byte).
    ``group`` labels flows for results (a collective's step, a job). ``latency_s``: per flow, the
    seconds from its last byte leaving to its arrival beyond the links' own (a protocol's per-step
    latency); empty: none. ``dep_queue``: per dependency entry; empty: every dependency is data.
    """

    src_gpu: IntArray
    dst_gpu: IntArray
    size_bytes: FloatArray
    start_at_s: FloatArray
    dep_ptr: IntArray
    dep_idx: IntArray
    group: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    latency_s: FloatArray = field(default_factory=lambda: np.zeros(0))
    dep_queue: BoolArray = field(default_factory=lambda: np.zeros(0, dtype=bool))

    @property
    def num_flows(self) -> int:
        return int(self.size_bytes.size)

    def __post_init__(self) -> None:
        n = self.size_bytes.size
        if not (self.src_gpu.size == self.dst_gpu.size == self.start_at_s.size == n and self.dep_ptr.size == n + 1):
            raise ClusterSimError("flow arrays must have one entry per flow", field="flows")
        if np.any(self.size_bytes <= 0) or not np.all(np.isfinite(self.size_bytes)):
            raise ClusterSimError("flow sizes must be positive and finite", field="size_bytes")
        if self.dep_idx.size and (self.dep_idx.min() < 0 or self.dep_idx.max() >= n):
            raise ClusterSimError("a dependency names a flow that does not exist", field="dep_idx")
        if self.latency_s.size not in (0, n) or self.dep_queue.size not in (0, self.dep_idx.size):
            raise ClusterSimError("latencies must be one per flow and queue flags one per dependency", field="flows")
        if self.latency_s.size and not (np.all(self.latency_s >= 0) and np.all(np.isfinite(self.latency_s))):
            raise ClusterSimError("flow latencies must be finite and at least 0 s", field="latency_s")


def independent(
    src_gpu: IntArray, dst_gpu: IntArray, size_bytes: FloatArray, start_at_s: FloatArray | None = None
) -> Flows:
    """Flows without dependencies (all released at ``start_at_s``, default 0)."""
    n = np.asarray(size_bytes).size
    return Flows(
        src_gpu=np.asarray(src_gpu, dtype=np.int64),
        dst_gpu=np.asarray(dst_gpu, dtype=np.int64),
        size_bytes=np.asarray(size_bytes, dtype=np.float64),
        start_at_s=np.zeros(n) if start_at_s is None else np.asarray(start_at_s, dtype=np.float64),
        dep_ptr=np.zeros(n + 1, dtype=np.int64),
        dep_idx=np.zeros(0, dtype=np.int64),
        group=np.zeros(n, dtype=np.int64),
    )


@dataclass(frozen=True, slots=True, eq=False)
class FlowTimes:
    """What happened to each flow and each resource."""

    start_s: FloatArray
    tx_end_s: FloatArray
    end_s: FloatArray  # arrival of the last byte
    resource_bytes: FloatArray  # bytes each resource carried
    peak_utilization: FloatArray  # highest load / capacity each resource saw
    num_events: int
    num_rounds: int  # progressive-filling rounds over all solves
    wall_s: float

    @property
    def makespan_s(self) -> float:
        return float(self.end_s.max()) if self.end_s.size else 0.0


def simulate(
    tree: FatTree,
    flows: Flows,
    routing: Routing,
    *,
    seed: int = 0,
    progress: Callable[[int, int], None] | None = None,
    warm_fraction: float = WARM_FRACTION,
) -> FlowTimes:
    """Run ``flows`` on ``tree`` to completion (adaptive routing balances each ``group`` on its own)."""
    began = time.perf_counter()
    return run(
        tree,
        flows,
        route_flows(tree, flows, routing, seed),
        began=began,
        progress=progress,
        warm_fraction=warm_fraction,
    )


def route_flows(tree: FatTree, flows: Flows, routing: Routing, seed: int = 0) -> Incidence:
    """Route ``flows``, each ``group`` (a collective's step) on its own for adaptive routing."""
    group = flows.group if flows.group.size else None
    return route(tree, flows.src_gpu, flows.dst_gpu, routing, seed, group=group)


def run(
    tree: FatTree,
    flows: Flows,
    inc: Incidence,
    *,
    began: float | None = None,
    progress: Callable[[int, int], None] | None = None,
    warm_fraction: float = WARM_FRACTION,
    kernel: bool | None = None,
) -> FlowTimes:
    """The event loop over routed flows (``simulate`` routes them first). At each event only the
    flows whose rate can change are re-solved, unless more than ``warm_fraction`` of the active
    flows move (then all are; 0: all at every event, the plain method, for checks). ``kernel``: the
    compiled re-solve always (True), never (False), or once it pays (None; ``flowsim.kernel``)."""
    began = time.perf_counter() if began is None else began
    n = flows.num_flows
    cap = tree.capacity_bytes_per_s
    prepared = prepare(inc.flow, inc.resource, inc.weight, n, cap.size)
    e_flow, e_res, e_w = prepared.flow, prepared.resource, prepared.weight
    latency = inc.hops * tree.spec.link_latency_s
    if flows.latency_s.size:
        latency = latency + flows.latency_s
    size = flows.size_bytes
    waiting_on = np.diff(flows.dep_ptr).astype(np.int64)
    dependents_ptr, dependents, order = _reverse(flows.dep_ptr, flows.dep_idx, n)
    queue = flows.dep_queue[order] if flows.dep_queue.size else None
    ready = np.where(waiting_on == 0, flows.start_at_s, np.inf)
    pending = BlockMin(ready)  # release times of the flows not started yet (inf: started, or waiting on others)
    dep_arrival = np.full(n, -np.inf)
    start = np.full(n, np.nan)
    tx_end = np.full(n, np.nan)
    end = np.full(n, np.nan)
    peak = np.zeros(cap.size)
    inv_cap = np.divide(1.0, cap, out=np.zeros(cap.size), where=cap > 0)  # 0 for a failed link: no utilization
    done_slack = DONE_TOL * size  # bytes short of the end from which a flow counts as done
    has_deps = bool(flows.dep_idx.size)
    solver = MaxMinState(prepared, cap, warm_fraction=warm_fraction, kernel=kernel)
    rate = np.zeros(n)
    left = size.copy()  # bytes left at ``since``, when the flow's rate last changed
    since = np.zeros(n)
    finish = BlockMin(np.full(n, np.inf))  # when an active flow's last byte leaves at its current rate
    done_by = BlockMin(np.full(n, np.inf))  # from when it counts as done (``DONE_TOL`` of its bytes left)
    now, events, done = 0.0, 0, 0
    while done < n:
        next_start = pending.min()
        t = min(next_start, finish.min())
        if not np.isfinite(t):
            raise ClusterSimError("flows wait on each other in a cycle and can never start", field="dep_idx")
        finished = done_by.at_most(t)
        if finished.size:
            finish.set(finished, np.inf)
            done_by.set(finished, np.inf)
            tx_end[finished] = t
            end[finished] = t + latency[finished]
            done += finished.size
            if has_deps:
                freed = _release(
                    finished, end, dependents_ptr, dependents, waiting_on, dep_arrival, ready, flows.start_at_s,
                    tx_end if queue is not None else None, queue,
                )  # fmt: skip
                pending.set(freed, ready[freed])
                next_start = min(next_start, pending.min())
        now = t
        starting = pending.at_most(now) if next_start <= now else np.zeros(0, dtype=np.int64)
        if starting.size:
            pending.set(starting, np.inf)
            start[starting] = np.maximum(ready[starting], now)
        events += 1
        changed, touched = solver.update(finished, starting)
        if changed.size:
            new = solver.rate.take(changed)
            if np.logical_or.reduce(new <= 0):
                stuck = int(changed[np.argmin(new)])
                raise ClusterSimError(
                    f"flow {stuck} has no capacity left on its path (failed links?)", field="fail_links"
                )
            now_left = left.take(changed) - rate.take(changed) * (now - since.take(changed))
            left[changed] = now_left
            since[changed] = now
            rate[changed] = new
            ends = now + now_left / new
            finish.set(changed, ends)
            done_by.set(changed, ends - done_slack.take(changed) / new)
            peak[touched] = np.maximum(peak.take(touched), solver.used.take(touched) * inv_cap.take(touched))
        if progress is not None:
            progress(done, n)
    resource_bytes = np.bincount(e_res, weights=e_w * size[e_flow], minlength=cap.size).astype(np.float64)
    return FlowTimes(
        start_s=start,
        tx_end_s=tx_end,
        end_s=end,
        resource_bytes=resource_bytes,
        peak_utilization=peak,
        num_events=events,
        num_rounds=solver.rounds,
        wall_s=time.perf_counter() - began,
    )


def _reverse(dep_ptr: IntArray, dep_idx: IntArray, n: int) -> tuple[IntArray, IntArray, IntArray]:
    """CSR of dependents: who waits on each flow (and each entry's position among the dependencies)."""
    waiter = np.repeat(np.arange(n, dtype=np.int64), np.diff(dep_ptr))
    order = np.argsort(dep_idx, kind="stable")
    ptr = np.searchsorted(dep_idx[order], np.arange(n + 1))
    return ptr, waiter[order], order


def _release(
    finished: IntArray,
    end: FloatArray,
    ptr: IntArray,
    dependents: IntArray,
    waiting_on: IntArray,
    dep_arrival: FloatArray,
    ready: FloatArray,
    start_at: FloatArray,
    tx_end: FloatArray | None = None,
    queue: BoolArray | None = None,
) -> IntArray:
    """Count ``finished`` off their dependents; those with nothing left become ready (returned). A
    ``queue`` entry (in dependents order) releases at the flow's ``tx_end``, not its arrival."""
    idx = csr_rows(ptr, None, finished)
    if not idx.size:
        return np.zeros(0, dtype=np.int64)
    waiters = dependents[idx]
    counts = ptr[finished + 1] - ptr[finished]
    arrivals = np.repeat(end[finished], counts)
    if queue is not None and tx_end is not None:
        arrivals = np.where(queue[idx], np.repeat(tx_end[finished], counts), arrivals)
    np.maximum.at(dep_arrival, waiters, arrivals)
    np.subtract.at(waiting_on, waiters, 1)
    freed = distinct(waiters[waiting_on[waiters] == 0])
    ready[freed] = np.maximum(start_at[freed], dep_arrival[freed])
    return freed
