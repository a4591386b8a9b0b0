"""A collective's flows and how they are built: in whole arrays with dependencies between them
(``FlowBuilder``, ``ring_phase``), and NCCL's double binary tree (``btree_parents``)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.engine import Flows
from clustersim.network.flowsim.topology import BoolArray, IntArray


@dataclass(frozen=True, slots=True, eq=False)
class CollectiveFlows:
    """A collective's flows; ``group`` numbers steps (rounds), ``num_steps`` of them simulated
    standing for ``total_steps`` (``weights`` says how many each simulated step stands for)."""

    op: Op
    algorithm: Algorithm
    flows: Flows
    num_steps: int
    total_steps: int
    step_weights: list[float]
    pipelined: bool = False  # the rest runs at the busiest resource's pace per step (a pipeline)
    base_latency_s: float = 0.0  # paid once by the whole collective (NCCL's launch latency; 0 on ideal links)


def step_weights(simulated: int, total: int) -> list[float]:
    """``simulated`` steps standing for ``total``: the last one stands for the rest."""
    weights = [1.0] * simulated
    if simulated:
        weights[-1] += total - simulated
    return weights


def btree_parents(n: int) -> tuple[IntArray, IntArray]:
    """Parents (-1 at a root) of NCCL's two binary trees over ``n`` nodes (``ncclGetDtree``): the
    second is the first shifted by one when ``n`` is odd, mirrored when even."""

    def parent(rank: int) -> int:
        if rank == 0:
            return -1
        bit = rank & -rank
        up = (rank ^ bit) | (bit << 1)
        return up if up < n else rank ^ bit

    first = np.array([parent(r) for r in range(n)], dtype=np.int64)
    second = np.empty(n, dtype=np.int64)
    for node in range(n):
        pos = (node - 1) % n if n % 2 else n - 1 - node
        up = parent(pos)
        second[node] = -1 if up < 0 else ((up + 1) % n if n % 2 else n - 1 - up)
    return first, second


class FlowBuilder:
    """Flows added a batch (array) at a time, dependencies as (waiter, flow waited on) pairs."""

    def __init__(self) -> None:
        self._src: list[IntArray] = []
        self._dst: list[IntArray] = []
        self._size: list[float] = []
        self._count: list[int] = []
        self._group: list[int] = []
        self._waiter: list[IntArray] = []
        self._dep: list[IntArray] = []
        self._queue: list[BoolArray] = []
        self.num_flows = 0

    def add(self, src: IntArray, dst: IntArray, size: float, group: int) -> IntArray:
        """Flows ``src -> dst`` (same shape) of ``size`` bytes each; their indices, in that shape."""
        src, dst = np.asarray(src, dtype=np.int64), np.broadcast_to(np.asarray(dst, dtype=np.int64), np.shape(src))
        index = np.arange(self.num_flows, self.num_flows + src.size, dtype=np.int64).reshape(src.shape)
        self._src.append(src.reshape(-1))
        self._dst.append(dst.reshape(-1))
        self._size.append(size)
        self._count.append(src.size)
        self._group.append(group)
        self.num_flows += src.size
        return index

    def wait(self, waiter: IntArray, dep: IntArray | None, *, queue: bool = False) -> None:
        """Each ``waiter`` flow starts after the ``dep`` flow beside it (broadcast) has arrived; a
        negative ``dep`` (none) is skipped. ``queue``: the next piece on the same connection, which
        may leave once ``dep`` has left (``Flows.dep_queue``; with per-step latencies only)."""
        if dep is None:
            return
        w, d = np.broadcast_arrays(np.asarray(waiter, dtype=np.int64), np.asarray(dep, dtype=np.int64))
        keep = (d >= 0) & (w >= 0)
        self._waiter.append(w[keep].reshape(-1))
        self._dep.append(d[keep].reshape(-1))
        self._queue.append(np.full(int(keep.sum()), queue))

    def flows(self) -> Flows:
        """The flows built; their ``dep_queue`` set where a wait was a queue's."""
        n = self.num_flows
        waiter = np.concatenate([np.zeros(0, np.int64), *self._waiter])
        dep = np.concatenate([np.zeros(0, np.int64), *self._dep])
        queue = np.concatenate([np.zeros(0, bool), *self._queue])
        order = np.argsort(waiter, kind="stable")
        return Flows(
            src_gpu=np.concatenate(self._src),
            dst_gpu=np.concatenate(self._dst),
            size_bytes=np.repeat(np.array(self._size), self._count),
            start_at_s=np.zeros(n),
            dep_ptr=np.searchsorted(waiter[order], np.arange(n + 1)).astype(np.int64),
            dep_idx=dep[order],
            group=np.repeat(np.array(self._group, dtype=np.int64), self._count),
            dep_queue=queue[order] if queue.any() else np.zeros(0, dtype=bool),
        )


def ring_phase(
    builder: FlowBuilder,
    rings: IntArray,
    steps: int,
    chunk: float,
    group0: int,
    entry: tuple[IntArray, IntArray] | None = None,
) -> tuple[IntArray, IntArray] | None:
    """``steps`` steps of the rings in the rows of ``rings`` (GPU numbers, shape ``(R, L)``), each
    position sending ``chunk`` to the next per step; step ``k`` is group ``group0 + k``.

    A flow waits for the previous step's flow into its sender and its sender's own previous flow;
    the first step waits on ``entry`` (the flow into and the flow out of each position before the
    phase). Returns the last flow into and out of each position (``None`` without steps)."""
    if steps < 1 or rings.shape[1] < 2:
        return entry
    dst = np.roll(rings, -1, axis=1)
    into, own = entry if entry is not None else (None, None)
    for k in range(steps):
        flow = builder.add(rings, dst, chunk, group0 + k)
        builder.wait(flow, into)
        builder.wait(flow, own)
        into, own = np.roll(flow, 1, axis=1), flow
    return np.roll(flow, 1, axis=1), flow
