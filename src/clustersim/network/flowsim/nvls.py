"""NCCL's NVLS and NVLS tree all-reduce as flows: the NVSwitch reduces (NVLink SHARP).

* NVLS (one host): the data is cut into ``g`` shards, one per GPU, and each shard into pipelined
  pieces of about ``NVLS_PIECE_BYTES``. Per piece of shard ``c``, a reduce flow from the host's
  NVSwitch into GPU ``c`` (the switch pulls the piece from every GPU, ``multimem.ld_reduce``), then
  a multicast flow from GPU ``c`` through the switch to every GPU (``multimem.st``): each GPU's
  NVLink port carries ``(g + 1) / g`` of the data each way (``routing._switch_loads``).
* NVLS tree (several hosts, NCCL's NVLSTree): per shard ``c`` and half of it per tree, the NVLS
  reduce into GPU ``c``, then NCCL's double binary tree across hosts over GPU ``c``'s rails (up to
  the root, which adds the children's sums to its own, and back down), then the NVLS multicast.
  Each channel (shard, tree) sends its pieces in order on every edge, so the pieces pipeline and the
  collective runs at the pace of the busiest port, NVLink or network, as the analytic model's
  ``min(nvls, tree factor x network)``.

The first ``chunks`` pieces are simulated; the rest go at the pipeline's steady pace (``results``).

NCCL's NVLS efficiency (``nvlsEfficiency``; the calibration's ``nvls_efficiency``) is the achieved
algbw over the NVLink bandwidth, so a port that carries ``(g + 1) / g`` of the data runs at
``nvls_port_efficiency`` of its bandwidth.
"""

from __future__ import annotations

import math

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.dag import CollectiveFlows, FlowBuilder, btree_parents, step_weights
from clustersim.network.flowsim.routing import nvswitch
from clustersim.network.flowsim.topology import FatTree, IntArray

NVLS_PIECE_BYTES = 512 * 1024  # assumed, as the tree's pieces: bytes a channel pipelines at a time


def nvls_port_efficiency(nvls_efficiency: float, gpus_per_host: int) -> float:
    """The fraction of an NVLink port's bandwidth NVLS flows reach for an algbw of ``nvls_efficiency``
    of it: each port carries ``(g + 1) / g`` of the data (a GPU's shards up, its reduced shard up
    once more to be multicast)."""
    return nvls_efficiency * (gpus_per_host + 1) / gpus_per_host


def nvls_flows(tree: FatTree, hosts: IntArray, size: float, chunks: int) -> CollectiveFlows:
    """NVLS all-reduce of ``size`` bytes per rank inside one host."""
    g = tree.spec.gpus_per_host
    if hosts.size != 1 or g < 2:
        raise ClusterSimError(
            f"nvls runs inside one host of 2 or more GPUs, not {hosts.size} hosts of {g}; across hosts use nvlstree",
            field="algorithm",
            value=Algorithm.NVLS.value,
        )
    total = max(1, math.ceil(size / g / NVLS_PIECE_BYTES))
    piece, count = size / g / total, min(chunks, total)
    gpus = int(hosts[0]) * g + np.arange(g)
    switch = nvswitch(hosts[0])
    builder = FlowBuilder()
    reduce = multicast = None
    for q in range(count):
        reduce_q = builder.add(np.full(g, switch), gpus, piece, q)
        multicast_q = builder.add(gpus, switch, piece, q)
        builder.wait(multicast_q, reduce_q)
        builder.wait(reduce_q, reduce, queue=True)  # each GPU's pieces in order
        builder.wait(multicast_q, multicast, queue=True)
        reduce, multicast = reduce_q, multicast_q
    flows = builder.flows()
    return CollectiveFlows(Op.ALL_REDUCE, Algorithm.NVLS, flows, count, total, step_weights(count, total), True)


def nvlstree_flows(tree: FatTree, hosts: IntArray, size: float, chunks: int) -> CollectiveFlows:
    """NVLS tree all-reduce of ``size`` bytes per rank over the GPUs of two or more ``hosts``."""
    g, num = tree.spec.gpus_per_host, hosts.size
    if num < 2:
        raise ClusterSimError(
            "nvlstree runs across 2 or more hosts; inside one use nvls", field="algorithm", value="nvlstree"
        )
    total = max(1, math.ceil(size / 2 / g / NVLS_PIECE_BYTES))
    piece, count = size / 2 / g / total, min(chunks, total)
    gpus = hosts[None, :] * g + np.arange(g)[:, None]  # (channel c, host)
    switch = np.broadcast_to(nvswitch(hosts)[None, :], gpus.shape)
    builder = FlowBuilder()
    for parent in btree_parents(num):
        child = np.flatnonzero(parent >= 0)  # every node but the root sends up and receives down
        root = int(np.flatnonzero(parent < 0)[0])
        up_of = np.full(num, -1, dtype=np.int64)  # node -> its position among ``child``
        up_of[child] = np.arange(child.size)
        at_root = child[parent[child] == root]
        previous: tuple[IntArray, ...] | None = None
        for q in range(count):
            reduce = builder.add(switch, gpus, piece, q)  # (g, num)
            up = builder.add(gpus[:, child], gpus[:, parent[child]], piece, q)  # (g, children)
            builder.wait(up, reduce[:, child])
            # A node sends up once its children's sums have arrived.
            into = child[parent[child] != root]
            builder.wait(up[:, up_of[parent[into]]], up[:, up_of[into]])
            down = builder.add(gpus[:, parent[child]], gpus[:, child], piece, q)
            # The root's sum is ready when its own reduce and its children's sums are in.
            from_root = up_of[at_root]
            builder.wait(down[:, from_root], reduce[:, [root]])
            for k in from_root:
                builder.wait(down[:, from_root], up[:, [k]])
            deeper = np.flatnonzero(parent[child] != root)
            builder.wait(down[:, deeper], down[:, up_of[parent[child[deeper]]]])
            multicast = builder.add(gpus, switch, piece, q)  # (g, num)
            builder.wait(multicast[:, child], down)
            builder.wait(multicast[:, [root]], reduce[:, [root]])
            for k in from_root:
                builder.wait(multicast[:, [root]], up[:, [k]])
            if previous is not None:  # each edge of a channel sends its pieces in order
                for now, before in zip((reduce, up, down, multicast), previous, strict=True):
                    builder.wait(now, before, queue=True)
            previous = (reduce, up, down, multicast)
    flows = builder.flows()
    weights = step_weights(count, total)
    return CollectiveFlows(Op.ALL_REDUCE, Algorithm.NVLSTREE, flows, count, total, weights, True)
