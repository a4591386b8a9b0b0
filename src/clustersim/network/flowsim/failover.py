"""Leaf switches failed under a job, and the job's traffic carried on the NICs it has left.

A failed leaf takes down every link cabled to it: the NIC links of its ports and its spine links.
Rail-optimized, that is rail ``k`` of up to ``radix / 2`` hosts; otherwise ``radix / 2`` consecutive
NIC ports, which on p5 (32 NICs, radix 64) are every NIC of one host.

What a cluster does then, and what is simulated: a communicator cannot move to other NICs, so a NIC
lost mid-job fails the job's collectives and the job restarts from its checkpoint. At the restart
NCCL lists only ports that are up (``ncclIbInit`` skips a port that is not ``IBV_PORT_ACTIVE``,
NCCL's src/transport/net_ib.cc; assumed the same for EFA through aws-ofi-nccl), and a GPU without a
NIC of its own reaches the network through a peer GPU's NIC over NVLink (PXN, NCCL 2.12 and later,
on by default: the data cross NVLink to the GPU on the receiver's rail, which posts the send, so no
message changes rails in the fabric). ``pxn_flows`` is that restarted job: a flow between hosts
whose GPU has a rail down at either end (at the sender's host or the receiver's) leaves through the
next GPU of its host, counting on from its own, whose rails are up at both ends; its bytes cross
NVLink to that GPU and, on the receiving host, from that rail's GPU to the receiver (two more flows,
at once with the network one: PXN's proxy forwards in chunks, a pipeline). With several rails a
GPU (p5: 4) the GPU moves wholly to its peer's rails, as NCCL gives each GPU's channels their NICs;
that the EFA plugin might instead stripe over the GPU's remaining rails is not modelled (an
assumption: it would lose a quarter, not half). A job with a host whose NICs are all down cannot
run there (``fail_job_leaves`` refuses it, naming the host and the leaf), nor can a flow with no GPU
of its host whose rails are up at both ends (a cross-rail detour is not modelled): ``pxn_flows``
refuses it.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.dag import CollectiveFlows
from clustersim.network.flowsim.engine import Flows
from clustersim.network.flowsim.topology import BoolArray, FatTree, IntArray


def leaf_links(tree: FatTree, leaf: int) -> IntArray:
    """Every directed link of leaf ``leaf``: to and from its NIC ports, to and from its spines."""
    ports = np.flatnonzero(tree.nic_leaf == leaf).astype(np.int64)
    u = tree.leaf_uplinks
    spines = tree.leaf_up0 + leaf * u + np.arange(u if tree.num_tiers >= 2 else 0, dtype=np.int64)
    return np.concatenate([tree.nic_up0 + ports, tree.nic_down0 + ports, spines, spines + tree.num_leaf_links])


def job_leaves(tree: FatTree, hosts: IntArray) -> IntArray:
    """The leaves the job's NICs are cabled to."""
    nics = np.asarray(hosts, dtype=np.int64)[:, None] * tree.spec.nics_per_host + np.arange(tree.spec.nics_per_host)
    return np.unique(tree.nic_leaf[nics.reshape(-1)])


def fail_job_leaves(tree: FatTree, hosts: IntArray, count: int, seed: int = 0) -> FatTree:
    """``tree`` with ``count`` of the job's leaves down (every link of each), chosen with ``seed``;
    refused where a host of the job would have no NIC left."""
    if count < 0:
        raise ClusterSimError(f"failed leaves must be at least 0, got {count}", field="fail_leaves", value=count)
    if count == 0:
        return tree
    leaves = job_leaves(tree, hosts)
    if count > leaves.size:
        raise ClusterSimError(
            f"the job's NICs sit on {leaves.size} leaves; cannot fail {count}", field="fail_leaves", value=count
        )
    chosen = np.sort(np.random.default_rng(seed).choice(leaves, size=count, replace=False))
    failed = tree.with_failures(np.concatenate([leaf_links(tree, int(leaf)) for leaf in chosen]))
    dead = nic_down(failed).reshape(tree.spec.num_hosts, tree.spec.nics_per_host)
    cut = [int(h) for h in hosts if dead[h].all()]
    if cut:
        r = tree.spec.nics_per_host
        leaf = int(tree.nic_leaf[cut[0] * r])
        raise ClusterSimError(
            f"failing leaf {leaf} takes down every NIC of host {cut[0]} of the job ({len(cut)} host(s) cut off): "
            f"the job cannot run there (fail fewer leaves, or another --seed)",
            field="fail_leaves",
            value=count,
        )
    return failed


def nic_down(tree: FatTree) -> BoolArray:
    """Per NIC port: its link to or from its leaf is down."""
    n = tree.num_nics
    return np.asarray(tree.failed[tree.nic_up0 : tree.nic_up0 + n] | tree.failed[tree.nic_down0 : tree.nic_down0 + n])


def pxn_flows(tree: FatTree, flows: Flows) -> Flows:
    """``flows`` as NCCL runs them with PXN where a GPU's rails are down (see the module docstring):
    ``flows`` itself where no NIC is down; otherwise each such flow leaves through a peer GPU (the
    flow keeps its index, dependencies and group), with its NVLink legs appended (the flow's
    dependencies, its group; nothing waits on them)."""
    down = nic_down(tree)
    if not down.any():
        return flows
    g, r, num_hosts = tree.spec.gpus_per_host, tree.spec.nics_per_host, tree.spec.num_hosts
    rails = tree.nic_rails(np.arange(g))  # (g, rails per GPU)
    gpu_down: BoolArray = np.asarray(down.reshape(num_hosts, r)[:, rails].any(axis=2))  # (hosts, g): a rail down
    src, dst = flows.src_gpu, flows.dst_gpu
    remote = (src >= 0) & (dst >= 0) & (src // g != dst // g)
    hs, hd = np.where(remote, src // g, 0), np.where(remote, dst // g, 0)
    moved = np.flatnonzero(remote & (gpu_down[hs, src % g] | gpu_down[hd, src % g]))
    if not moved.size:
        return flows
    a, hs, hd = src[moved] % g, hs[moved], hd[moved]
    offset = (a[:, None] + np.arange(g)[None, :]) % g  # the host's GPUs, from the flow's own on
    usable = ~gpu_down[hs[:, None], offset] & ~gpu_down[hd[:, None], offset]
    if not usable.any(axis=1).all():
        k = int(np.flatnonzero(~usable.any(axis=1))[0])
        raise ClusterSimError(
            f"no GPU of host {int(hs[k])} has its rails up both there and on host {int(hd[k])}: the failed "
            f"leaves leave no rail between them (a cross-rail detour is not modelled)",
            field="fail_leaves",
        )
    b = offset[np.arange(moved.size), np.argmax(usable, axis=1)]
    proxy, landing = hs * g + b, hd * g + b
    new_src = src.copy()
    new_src[moved] = proxy
    first = moved[proxy != src[moved]]  # sender's NVLink leg: GPU -> proxy
    last = moved[landing != dst[moved]]  # receiver's NVLink leg: the rail's GPU -> receiver
    legs = np.concatenate([first, last])
    leg_src = np.concatenate([src[first], landing[landing != dst[moved]]])
    leg_dst = np.concatenate([proxy[proxy != src[moved]], dst[last]])
    counts = flows.dep_ptr[legs + 1] - flows.dep_ptr[legs]
    starts = np.repeat(flows.dep_ptr[legs] - np.cumsum(counts) + counts, counts)
    entries = starts + np.arange(int(counts.sum()))
    leg_deps = flows.dep_idx[entries]
    return Flows(
        src_gpu=np.concatenate([new_src, leg_src]),
        dst_gpu=np.concatenate([dst, leg_dst]),
        size_bytes=np.concatenate([flows.size_bytes, flows.size_bytes[legs]]),
        start_at_s=np.concatenate([flows.start_at_s, flows.start_at_s[legs]]),
        dep_ptr=np.concatenate([flows.dep_ptr, flows.dep_ptr[-1] + np.cumsum(counts)]).astype(np.int64),
        dep_idx=np.concatenate([flows.dep_idx, leg_deps]).astype(np.int64),
        group=np.concatenate([flows.group, flows.group[legs]]).astype(np.int64)
        if flows.group.size == flows.num_flows
        else flows.group,
        # the NVLink legs go alongside the network flow (a pipeline): no latency of their own
        latency_s=np.concatenate([flows.latency_s, np.zeros(legs.size)]) if flows.latency_s.size else flows.latency_s,
        dep_queue=np.concatenate([flows.dep_queue, flows.dep_queue[entries]])
        if flows.dep_queue.size
        else flows.dep_queue,
    )


def with_pxn(tree: FatTree, plan: CollectiveFlows) -> CollectiveFlows:
    """``plan`` with its flows as ``pxn_flows`` runs them on ``tree``."""
    flows = pxn_flows(tree, plan.flows)
    return plan if flows is plan.flows else dataclasses.replace(plan, flows=flows)
