"""NCCL's collective algorithms as flows with dependencies, on the hosts a job was placed on.

Ranks are the job's GPUs, host by host (host ``i`` of the placement holds ranks ``i*G .. i*G+G-1``).

* Ring (all-reduce: ``2(n-1)`` steps; all-gather, reduce-scatter: ``n-1``; each step moves
  ``size / n`` per rank): one channel per GPU of a host; channel ``c`` visits the GPUs of each host
  from ``c+1`` round to ``c`` and leaves the host from GPU ``c`` on its rails, so every GPU's NICs
  carry one channel and every NVLink port the others. A flow of step ``k`` waits for the step
  ``k-1`` flow into its sender and for its own sender's step ``k-1`` flow.
* Tree all-reduce (NCCL's double binary tree, ``ncclGetDtree``): half the data on each tree, split
  over the GPUs' rails, reduced up and broadcast down in pipelined pieces of about
  ``TREE_PIECE_BYTES``, the first ``chunks`` of them simulated; inside a host a chain through the
  GPUs per channel.
* Hierarchical all-reduce (``hierarchical``): reduce-scatter inside each host, all-reduce of each
  shard across hosts on its GPU's rails, all-gather inside each host, each phase a ring.
* NVLS (one host) and NVLS tree all-reduce (``nvls``): the NVSwitch reduces and multicasts
  (NVLink SHARP), in pipelined pieces; across hosts the double binary tree carries each shard.
* Send/receive: every GPU to the same GPU of the next host, at once.
* Pairwise all-to-all: ``nodes - 1`` rounds; in round ``i`` host ``a`` sends to host ``a+i`` (every
  GPU to that host, on its own rails) and a GPU's round waits for its previous round. The
  NVLink part goes alongside round 1.

Only the first ``max_steps`` ring steps (or ``max_steps`` all-to-all rounds, evenly spread) are
simulated; ``CollectiveFlows`` says how many stand for how many, and ``results`` extrapolates the
remainder at the pace of the last simulated step (exact when every step takes as long). The tree's
pieces overlap in a pipeline, so its remaining pieces go at the pipeline's steady pace: the busiest
resource's bytes per piece over its capacity.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.analytic import predict_collective
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.fabric import Fabric
from clustersim.network.flowsim.dag import CollectiveFlows, FlowBuilder, btree_parents, step_weights
from clustersim.network.flowsim.engine import Flows, independent
from clustersim.network.flowsim.hierarchical import hierarchical_flows
from clustersim.network.flowsim.nvls import nvls_flows, nvlstree_flows
from clustersim.network.flowsim.topology import FatTree, IntArray

__all__ = ["RING_OPS", "SUPPORTED", "CollectiveFlows", "btree_parents", "collective_flows", "default_algorithm"]

RING_OPS = {Op.ALL_REDUCE: 2, Op.ALL_GATHER: 1, Op.REDUCE_SCATTER: 1}
TREE_PIECE_BYTES = 512 * 1024  # assumed: bytes a tree channel pipelines at a time
SUPPORTED = {
    Op.ALL_REDUCE: (Algorithm.RING, Algorithm.TREE, Algorithm.HIERARCHICAL, Algorithm.NVLS, Algorithm.NVLSTREE),
    Op.ALL_GATHER: (Algorithm.RING,),
    Op.REDUCE_SCATTER: (Algorithm.RING,),
    Op.ALLTOALL: (Algorithm.PAIRWISE,),
    Op.SENDRECV: (Algorithm.DIRECT,),
}


def default_algorithm(op: Op, fabric: Fabric | None = None, size_bytes: float | None = None) -> Algorithm:
    """The algorithm simulated when none is asked for: on ``fabric`` at ``size_bytes``, the one NCCL's
    tuner would pick as the analytic model predicts it (the fastest candidate); without them, ring
    (or the op's only algorithm)."""
    if op not in SUPPORTED:
        raise ClusterSimError(
            f"the flow simulator has no algorithm for {op.value}; valid: {', '.join(o.value for o in SUPPORTED)}",
            field="collective",
            value=op.value,
        )
    if fabric is None or size_bytes is None:
        return SUPPORTED[op][0]
    chosen = predict_collective(op, np.array([float(size_bytes)]), fabric).algorithm[0]
    return chosen if chosen in SUPPORTED[op] else SUPPORTED[op][0]


def collective_flows(
    tree: FatTree,
    hosts: IntArray,
    op: Op,
    size_bytes: float,
    algorithm: Algorithm | None = None,
    *,
    max_steps: int = 4,
    chunks: int = 8,
) -> CollectiveFlows:
    """The flows of ``op`` of ``size_bytes`` per rank over the GPUs of ``hosts``."""
    algorithm = default_algorithm(op) if algorithm is None else algorithm
    if algorithm not in SUPPORTED.get(op, ()):
        valid = ", ".join(a.value for a in SUPPORTED.get(op, ()))
        raise ClusterSimError(
            f"the flow simulator runs {op.value} as {valid}, not {algorithm.value}",
            field="algorithm",
            value=algorithm.value,
        )
    if not size_bytes > 0:
        raise ClusterSimError(f"size must be positive, got {size_bytes!r}", field="size", value=size_bytes)
    if max_steps < 1:
        raise ClusterSimError(f"max_steps must be at least 1, got {max_steps}", field="max_steps", value=max_steps)
    hosts = np.asarray(hosts, dtype=np.int64)
    if hosts.size * tree.spec.gpus_per_host < 2:
        raise ClusterSimError("a collective needs at least 2 GPUs", field="nodes", value=int(hosts.size))
    if algorithm is Algorithm.RING:
        return _ring(tree, hosts, op, size_bytes, max_steps)
    if algorithm is Algorithm.TREE:
        return _tree(tree, hosts, size_bytes, max(1, chunks))
    if algorithm is Algorithm.HIERARCHICAL:
        return hierarchical_flows(tree, hosts, size_bytes, max_steps)
    if algorithm is Algorithm.NVLS:
        return nvls_flows(tree, hosts, size_bytes, max(1, chunks))
    if algorithm is Algorithm.NVLSTREE:
        return nvlstree_flows(tree, hosts, size_bytes, max(1, chunks))
    if algorithm is Algorithm.DIRECT:
        return _sendrecv(tree, hosts, size_bytes)
    return _alltoall(tree, hosts, size_bytes, max_steps)


def _sendrecv(tree: FatTree, hosts: IntArray, size: float) -> CollectiveFlows:
    """Every rank sends ``size`` to the same GPU of the next host (the next rank on one host), as a
    pipeline stage hands its activations on."""
    g = tree.spec.gpus_per_host
    gpus = (hosts[:, None] * g + np.arange(g)[None, :]).reshape(-1)
    shift = g if hosts.size > 1 else 1
    flows = independent(gpus, np.roll(gpus, -shift), np.full(gpus.size, size))
    return CollectiveFlows(Op.SENDRECV, Algorithm.DIRECT, flows, 1, 1, [1.0])


def _ring(tree: FatTree, hosts: IntArray, op: Op, size: float, max_steps: int) -> CollectiveFlows:
    g = tree.spec.gpus_per_host
    n = hosts.size * g
    channels = g if hosts.size > 1 else 1
    # Channel c's ring: per host, GPUs c+1 .. c+g (mod g); the host is left from GPU c.
    order = (np.arange(channels)[:, None] + 1 + np.arange(g)[None, :]) % g  # (C, g)
    seq = (hosts[None, :, None] * g + order[:, None, :]).reshape(channels, n)  # global GPU ids
    src = seq
    dst = np.roll(seq, -1, axis=1)
    total = RING_OPS[op] * (n - 1)
    steps = min(total, max_steps)
    per_step = channels * n
    chunk = size / n / channels
    flow = np.arange(steps * per_step, dtype=np.int64).reshape(steps, channels, n)
    prev_in = np.roll(flow, 1, axis=2)  # the flow into this sender, same step
    deps = np.stack([prev_in[:-1], flow[:-1]], axis=-1)  # step k waits on step k-1
    dep_idx = np.concatenate([np.zeros(0, np.int64), deps.reshape(-1)])
    counts = np.concatenate([np.zeros(per_step, np.int64), np.full((steps - 1) * per_step, 2)])
    flows = Flows(
        src_gpu=np.tile(src.reshape(-1), steps),
        dst_gpu=np.tile(dst.reshape(-1), steps),
        size_bytes=np.full(steps * per_step, chunk),
        start_at_s=np.zeros(steps * per_step),
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        dep_idx=dep_idx,
        group=np.repeat(np.arange(steps, dtype=np.int64), per_step),
    )
    weights = [1.0] * steps
    weights[-1] += total - steps
    return CollectiveFlows(op, Algorithm.RING, flows, steps, total, weights)


def _tree(tree: FatTree, hosts: IntArray, size: float, chunks: int) -> CollectiveFlows:
    g, num = tree.spec.gpus_per_host, hosts.size
    total = max(1, math.ceil(size / 2 / g / TREE_PIECE_BYTES))
    piece = size / 2 / g / total  # per tree, per channel (GPU), per pipelined piece
    chunks = min(chunks, total)
    parents = btree_parents(num) if num > 1 else (np.array([-1]), np.array([-1]))
    gpu = hosts[None, :] * g + np.arange(g)[:, None]  # (channel c, node): GPU c of the node
    # Channel c reduces along its host's chain c+g-1 -> ... -> c+1 -> c and broadcasts back.
    link = [(np.arange(g) + g - 1 - k) % g for k in range(g)]  # link[k][c]: the k-th GPU of c's chain
    builder = FlowBuilder()
    for parent in parents:
        child = np.flatnonzero(parent >= 0)
        root = int(np.flatnonzero(parent < 0)[0])
        slot = np.full(num, -1, dtype=np.int64)  # node -> its column among ``child``
        slot[child] = np.arange(child.size)
        inner = child[parent[child] != root]  # children whose parent is not the root
        at_root = child[parent[child] == root]
        previous: list[IntArray] | None = None
        for q in range(chunks):
            chain = [
                builder.add(hosts * g + link[k][:, None], hosts * g + link[k + 1][:, None], piece, q)
                for k in range(g - 1)
            ]
            up = builder.add(gpu[:, child], gpu[:, parent[child]], piece, q)
            # A host's chain starts once its children's sums are in; the sum goes up at its end.
            if chain:
                builder.wait(chain[0][:, parent[child]], up[:, slot[child]])
                for before, after in itertools.pairwise(chain):
                    builder.wait(after, before)
                builder.wait(up, chain[-1][:, child])
            else:
                builder.wait(up[:, slot[parent[inner]]], up[:, slot[inner]])
            # The root's sum: its chain's end, or (one GPU a host) its children's sums.
            ready_root = [chain[-1][:, [root]]] if chain else [up[:, [k]] for k in slot[at_root]]
            down = builder.add(gpu[:, parent[child]], gpu[:, child], piece, q)
            for dep in ready_root:
                builder.wait(down[:, slot[at_root]], dep)
            builder.wait(down[:, slot[inner]], down[:, slot[parent[inner]]])
            back = [
                builder.add(hosts * g + link[g - 1 - k][:, None], hosts * g + link[g - 2 - k][:, None], piece, q)
                for k in range(g - 1)
            ]
            if back:
                for dep in ready_root:
                    builder.wait(back[0][:, [root]], dep)
                builder.wait(back[0][:, child], down)
                for before, after in itertools.pairwise(back):
                    builder.wait(after, before)
            current = [*chain, up, down, *back]
            if previous is not None:  # each edge of a channel sends its pieces in order
                for now, before in zip(current, previous, strict=True):
                    builder.wait(now, before, queue=True)
            previous = current
    weights = step_weights(chunks, total)
    return CollectiveFlows(Op.ALL_REDUCE, Algorithm.TREE, builder.flows(), chunks, total, weights, pipelined=True)


def _alltoall(tree: FatTree, hosts: IntArray, size: float, max_rounds: int) -> CollectiveFlows:
    g, num = tree.spec.gpus_per_host, hosts.size
    n = num * g
    total = max(num - 1, 1)
    count = min(max_rounds, total)
    # Shifts 1, 1 + total / count, ...: spread over the rounds (all of them when count == total), not
    # bunched at the ends, where a shift of 1 or total is a neighbour on the same leaf.
    picked: list[int] | IntArray = 1 + (np.arange(count) * total) // count if num > 1 else []
    src_l, dst_l, size_l, group_l = [], [], [], []
    gpus = (hosts[:, None] * g + np.arange(g)[None, :]).reshape(-1)
    if g > 1:  # the NVLink part: every GPU to the other GPUs of its host
        a, b = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
        off = a != b
        s = (hosts[:, None] * g + a[off][None, :]).reshape(-1)
        d = (hosts[:, None] * g + b[off][None, :]).reshape(-1)
        src_l.append(s)
        dst_l.append(d)
        size_l.append(np.full(s.size, size / n))
        group_l.append(np.zeros(s.size, np.int64))
    for k, shift in enumerate(picked):
        dst_host = np.roll(hosts, -int(shift))
        src_l.append(gpus)
        dst_l.append(np.repeat(dst_host, g) * g + np.tile(np.arange(g), num))
        size_l.append(np.full(gpus.size, size / n * g))  # to every GPU of that host, on the sender's rails
        group_l.append(np.full(gpus.size, k, np.int64))
    src, dst = np.concatenate(src_l), np.concatenate(dst_l)
    group = np.concatenate(group_l)
    intra = int(src_l[0].size) if g > 1 else 0
    rounds = len(picked)
    # A GPU's round k waits for its round k-1 (flows intra + (k-1)*n + i).
    counts = np.concatenate([np.zeros(intra + min(rounds, 1) * n, np.int64), np.ones(max(rounds - 1, 0) * n, np.int64)])
    dep_idx = np.arange(max(rounds - 1, 0) * n, dtype=np.int64) + intra
    flows = Flows(
        src_gpu=src,
        dst_gpu=dst,
        size_bytes=np.concatenate(size_l),
        start_at_s=np.zeros(src.size),
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        dep_idx=dep_idx,
        group=group,
    )
    weights = [total / rounds] * rounds if rounds else [1.0]
    return CollectiveFlows(Op.ALLTOALL, Algorithm.PAIRWISE, flows, max(rounds, 1), total, weights)
