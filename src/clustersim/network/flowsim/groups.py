"""Collectives of many rank groups at once, on any GPUs of the fabric: the groups of a parallel
layout (every tensor-parallel group, every data-parallel group, ...) each running the same
collective at the same time, so that they share the fabric.

``groups`` is an array of global GPU numbers, one row per group, in rank order.

* Ring (all-reduce: ``2(n-1)`` steps; all-gather, reduce-scatter: ``n-1``): where a group holds
  ``k > 1`` consecutive GPUs on each of several hosts, ``k`` channels as in ``collectives``: channel
  ``c`` visits each host's GPUs rotated by ``c + 1`` and leaves it from its ``c``-th GPU, so the
  GPUs' rails share the network; otherwise one channel in rank order. Each step moves
  ``size / n / channels`` per channel and rank, and waits for the previous step into its sender.
* Pairwise all-to-all: host blocks (``k`` consecutive ranks on one host; single ranks otherwise)
  exchange in ``blocks - 1`` rounds as ``collectives`` does with whole hosts, the exchange inside a
  block alongside round 1; ``max_steps`` rounds spread over the shifts are simulated.
* Send/receive (``pair_flows``): given pairs, all at once (pipeline stages handing activations on).
* Per-node expert dispatch (``dispatch_flows``: DeepEP, HybridEP): the pairwise all-to-all of the
  tokens' network copies (each GPU sends one flow per remote node, to its peer there, on its own
  rails) and, at once, the fan-out over each node's ranks of the group as an all-to-all there (the scale-up
  fabric) of the bytes of one copy per GPU holding a token's experts.

The steps (rounds) are numbered in ``Flows.group`` as ``collectives.CollectiveFlows`` expects, so
``results.collective_time_s`` extrapolates the rest the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.network.analytic import DEFAULT_CALIBRATION, candidates
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.fabric import Fabric
from clustersim.network.flowsim.collectives import RING_OPS, CollectiveFlows
from clustersim.network.flowsim.engine import Flows, independent
from clustersim.network.flowsim.topology import FloatArray, IntArray

GROUP_OPS = (Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL)


def concatenate(parts: Sequence[Flows]) -> Flows:
    """One set of flows from several (their dependencies renumbered; ``group`` kept as is)."""
    if not parts:
        raise ClusterSimError("no flows to put together", field="flows")
    offsets = np.cumsum([0] + [p.num_flows for p in parts])
    dep_offsets = np.cumsum([0] + [p.dep_idx.size for p in parts])
    return Flows(
        src_gpu=np.concatenate([p.src_gpu for p in parts]),
        dst_gpu=np.concatenate([p.dst_gpu for p in parts]),
        size_bytes=np.concatenate([p.size_bytes for p in parts]),
        start_at_s=np.concatenate([p.start_at_s for p in parts]),
        dep_ptr=np.concatenate([[0]] + [p.dep_ptr[1:] + d for p, d in zip(parts, dep_offsets, strict=False)]).astype(
            np.int64
        ),
        dep_idx=np.concatenate([p.dep_idx + o for p, o in zip(parts, offsets, strict=False)]).astype(np.int64),
        group=np.concatenate([p.group for p in parts]).astype(np.int64),
        latency_s=np.concatenate([_latency(p) for p in parts]) if any(p.latency_s.size for p in parts) else _NONE,
        dep_queue=np.concatenate([_queue(p) for p in parts]) if any(p.dep_queue.size for p in parts) else _NO_DEPS,
    )


_NONE = np.zeros(0)
_NO_DEPS = np.zeros(0, dtype=bool)


def _latency(flows: Flows) -> FloatArray:
    return flows.latency_s if flows.latency_s.size else np.zeros(flows.num_flows)


def _queue(flows: Flows) -> npt.NDArray[np.bool_]:
    return flows.dep_queue if flows.dep_queue.size else np.zeros(flows.dep_idx.size, dtype=bool)


def ideal_time_s(op: Op, size_bytes: float, fabric: Fabric, algorithm: Algorithm) -> float:
    """The analytic model's link-bound time of ``algorithm`` on ``fabric``'s datasheet links
    (efficiencies 1, no latency or ramp): what the simulator, on the same links, is set against."""
    ideal = dataclasses.replace(DEFAULT_CALIBRATION, network_efficiency=1.0, nvlink_efficiency=1.0, nvls_efficiency=1.0)
    match = [c for c in candidates(op, fabric, ideal) if c.algorithm is algorithm and c.protocol is Protocol.SIMPLE]
    if not match:
        raise ClusterSimError(f"the analytic model has no {algorithm.value} for {op.value}", field="algorithm")
    return float(size_bytes / match[0].algbw_bytes_per_s)


def group_flows(
    groups: IntArray, gpus_per_host: int, op: Op, size_bytes: float, *, max_steps: int = 4
) -> CollectiveFlows:
    """``op`` of ``size_bytes`` per rank in every group (row of ``groups``) at once."""
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    if op not in GROUP_OPS:
        valid = ", ".join(o.value for o in GROUP_OPS)
        raise ClusterSimError(f"groups run {valid}, not {op.value}", field="collective", value=op.value)
    if groups.shape[1] < 2:
        raise ClusterSimError("a collective needs at least 2 ranks per group", field="ranks", value=groups.shape[1])
    if not size_bytes > 0:
        raise ClusterSimError(f"size must be positive, got {size_bytes!r}", field="size", value=size_bytes)
    if max_steps < 1:
        raise ClusterSimError(f"max_steps must be at least 1, got {max_steps}", field="max_steps", value=max_steps)
    if np.unique(groups).size != groups.size:
        raise ClusterSimError("a GPU appears twice among the groups", field="groups")
    if op is Op.ALLTOALL:
        return _alltoall(groups, gpus_per_host, size_bytes, max_steps)
    return _ring(groups, gpus_per_host, op, size_bytes, max_steps)


def pair_flows(src_gpu: IntArray, dst_gpu: IntArray, size_bytes: float) -> CollectiveFlows:
    """Each ``src_gpu[i]`` sends ``size_bytes`` to ``dst_gpu[i]``, all at once."""
    src = np.asarray(src_gpu, dtype=np.int64)
    if not src.size:
        raise ClusterSimError("no pairs to send between", field="pairs")
    flows = independent(src, np.asarray(dst_gpu, dtype=np.int64), np.full(src.size, float(size_bytes)))
    return CollectiveFlows(Op.SENDRECV, Algorithm.DIRECT, flows, 1, 1, [1.0])


def dispatch_flows(
    groups: IntArray,
    gpus_per_host: int,
    size_bytes: float,
    copy_ratio: float,
    fan_out_ranks: int,
    fan_out_ratio: float = 1.0,
    *,
    max_steps: int = 4,
) -> list[CollectiveFlows]:
    """A per-node expert dispatch of ``size_bytes`` per rank in every group: [the network all-to-all of
    ``copy_ratio * size_bytes``, the all-to-all of ``fan_out_ratio * size_bytes`` over each node's ``fan_out_ranks``
    consecutive ranks of a group] (the second absent for ``fan_out_ranks`` 1); the two go at once."""
    groups = np.atleast_2d(np.asarray(groups, dtype=np.int64))
    for name, ratio in (("copy_ratio", copy_ratio), ("fan_out_ratio", fan_out_ratio)):
        if not 0 < ratio <= 1:
            raise ClusterSimError(f"{name.replace('_', ' ')} must be in (0, 1], got {ratio!r}", field=name, value=ratio)
    n = groups.shape[1]
    if fan_out_ranks < 1 or n % fan_out_ranks:
        raise ClusterSimError(
            f"fan-out ranks must divide the group's {n} ranks, got {fan_out_ranks}", field="fan_out_ranks"
        )
    plans = [group_flows(groups, gpus_per_host, Op.ALLTOALL, size_bytes * copy_ratio, max_steps=max_steps)]
    if fan_out_ranks > 1:
        local = groups.reshape(-1, fan_out_ranks)
        if np.any(local // gpus_per_host != local[:, :1] // gpus_per_host):
            raise ClusterSimError(
                f"a group's {fan_out_ranks} consecutive ranks are not on one host", field="fan_out_ranks"
            )
        plans.append(group_flows(local, gpus_per_host, Op.ALLTOALL, size_bytes * fan_out_ratio, max_steps=max_steps))
    return plans


def host_blocks(groups: IntArray, gpus_per_host: int) -> int:
    """GPUs of each group per host when every group is blocks of that many consecutive ranks, each
    block on its own host (a data-parallel group over whole hosts); 1 otherwise."""
    num, n = groups.shape
    hosts = groups // gpus_per_host
    per = int(np.count_nonzero(hosts[0] == hosts[0, 0]))
    if per == 1 or n % per:
        return 1
    blocks = hosts.reshape(num, n // per, per)
    if not np.all(blocks == blocks[:, :, :1]):
        return 1
    if any(np.unique(b[:, 0]).size != n // per for b in blocks):
        return 1
    return per


def ring_channels(groups: IntArray, gpus_per_host: int) -> IntArray:
    """The rings of every group, shape ``(groups, channels, n)`` (see the module docstring)."""
    num, n = groups.shape
    per = host_blocks(groups, gpus_per_host)
    if per == 1 or per == n:
        return groups[:, None, :]
    order = (np.arange(per)[:, None] + 1 + np.arange(per)[None, :]) % per  # (C, per)
    members = groups.reshape(num, n // per, per)
    return np.stack([members[:, :, order[c]].reshape(num, n) for c in range(per)], axis=1)


def _ring(groups: IntArray, gpus_per_host: int, op: Op, size: float, max_steps: int) -> CollectiveFlows:
    rings = ring_channels(groups, gpus_per_host)  # (G, C, n)
    num, channels, n = rings.shape
    seq = rings.reshape(num * channels, n)
    total = RING_OPS[op] * (n - 1)
    steps = min(total, max_steps)
    per_step = seq.size
    flow = np.arange(steps * per_step, dtype=np.int64).reshape(steps, num * channels, n)
    prev_in = np.roll(flow, 1, axis=2)  # the flow into this sender, same step
    deps = np.stack([prev_in[:-1], flow[:-1]], axis=-1)  # step k waits on step k-1
    counts = np.concatenate([np.zeros(per_step, np.int64), np.full((steps - 1) * per_step, 2)])
    flows = Flows(
        src_gpu=np.tile(seq.reshape(-1), steps),
        dst_gpu=np.tile(np.roll(seq, -1, axis=1).reshape(-1), steps),
        size_bytes=np.full(steps * per_step, size / n / channels),
        start_at_s=np.zeros(steps * per_step),
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        dep_idx=deps.reshape(-1).astype(np.int64),
        group=np.repeat(np.arange(steps, dtype=np.int64), per_step),
    )
    weights = [1.0] * steps
    weights[-1] += total - steps
    return CollectiveFlows(op, Algorithm.RING, flows, steps, total, weights)


def _alltoall(groups: IntArray, gpus_per_host: int, size: float, max_rounds: int) -> CollectiveFlows:
    """Host blocks exchange in rounds, as ``collectives`` does with whole hosts: in round ``i`` block
    ``b`` sends to block ``b + i``, each GPU to every GPU of that block on its own rails (``per``
    shares at once); the exchange inside a block goes alongside round 1."""
    num, n = groups.shape
    per = host_blocks(groups, gpus_per_host)
    m = n // per
    blocks = groups.reshape(num, m, per)
    src_l: list[IntArray] = []
    dst_l: list[IntArray] = []
    size_l: list[FloatArray] = []
    group_l: list[IntArray] = []
    if per > 1:  # inside a block: every GPU to the block's others
        a, b = np.nonzero(~np.eye(per, dtype=bool))
        src_l.append(blocks[:, :, a].reshape(-1))
        dst_l.append(blocks[:, :, b].reshape(-1))
        size_l.append(np.full(src_l[0].size, size / n))
        group_l.append(np.zeros(src_l[0].size, np.int64))
    intra = src_l[0].size if src_l else 0
    total = max(m - 1, 1)
    count = min(max_rounds, total) if m > 1 else 0
    shifts = 1 + (np.arange(count) * total) // max(count, 1)  # spread over the rounds
    for k, shift in enumerate(shifts):
        src_l.append(blocks.reshape(-1))
        dst_l.append(np.roll(blocks, -int(shift), axis=1).reshape(-1))
        size_l.append(np.full(groups.size, size / n * per))
        group_l.append(np.full(groups.size, k, np.int64))
    src = np.concatenate(src_l)
    counts = np.concatenate(
        [np.zeros(intra + min(count, 1) * n * num, np.int64), np.ones(max(count - 1, 0) * n * num, np.int64)]
    )
    flows = Flows(
        src_gpu=src,
        dst_gpu=np.concatenate(dst_l),
        size_bytes=np.concatenate(size_l),
        start_at_s=np.zeros(src.size),
        dep_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        dep_idx=np.arange(max(count - 1, 0) * n * num, dtype=np.int64) + intra,  # after the sender's last round
        group=np.concatenate(group_l),
    )
    weights = [total / count] * count if count else [1.0]
    return CollectiveFlows(Op.ALLTOALL, Algorithm.PAIRWISE, flows, max(count, 1), total, weights)
