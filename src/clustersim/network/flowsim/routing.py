"""Routes GPU-to-GPU transfers over a ``FatTree``: which resources each flow loads, and how much.

A transfer inside a host crosses the sender's scale-up egress and the receiver's ingress. A
transfer between hosts leaves on the sender GPU's rails (its NICs, NCCL's rail-local choice) and
arrives on the same rails of the receiving host, striped evenly over them (weight ``1 / rails``
each); delivery from that NIC to another GPU of the host (PCIe, PXN) is not modelled.

Between two NICs on different leaves the path climbs to a spine (and a core between pods):

* ``ECMP``: one path per stripe, chosen by a seeded splitmix64 hash of the 5-tuple (source NIC,
  destination NIC, source port, destination port 4791, UDP), as RoCE/RC and TCP flows are pinned;
  a failed link removes the paths through it and the hash picks among the live ones.
* ``SPRAY``: the stripe's rate is split evenly over every equal-cost path, as SRD sprays packets.
  On a fat-tree every link of a bundle (all uplinks of a leaf, all downlinks into a leaf, a pod's
  core uplinks or downlinks) then carries the same load, so the stripe loads the bundle, whose
  capacity is the sum of its live links: exact without failures; with failures it is spraying per
  hop over the live links (a stated simplification).
* ``FLOWLET``: a flow is cut into flowlets at its pauses and a switch re-hashes each (flowlet
  switching; Juniper's and Broadcom's DLB flowlet mode): ``k`` sub-flows of equal weight, flowlet
  ``i`` hashed by ``splitmix64(h ^ i)`` with flowlet 0 on the ECMP hash ``h``, so ``k = 1`` is ECMP
  and a large ``k`` spreads the flow over the paths as spraying does (``FLOWLETS`` by default).
* ``ADAPTIVE``: each connection takes the least-loaded of its equal-cost paths, greedily in the
  order the flows come (``adaptive``): congestion-aware switches pinning a connection to a path.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.adaptive import adaptive_pick
from clustersim.network.flowsim.topology import BoolArray, FatTree, FloatArray, IntArray

RDMA_PORT = 4791  # RoCEv2's UDP port: the destination port of the hashed 5-tuple
UDP = 17
# Assumed flowlets per flow: NCCL posts a channel's transfer as NCCL_STEPS = 8 slot-sized sends
# (src/include/device.h; ../shared/reference/network.md 1.2), each waiting for the receiver's credit:
# the pauses where a switch's flowlet timer can expire and re-hash the rest. Whether it does depends
# on the timer (500 us in CONGA, SIGCOMM 2014) and the load; pass ``flowlets`` to ``route``.
FLOWLETS = 8
_MASK = np.uint64(0xFFFFFFFFFFFFFFFF)


class Routing(StrEnum):
    """How a flow crossing the network picks its path(s)."""

    ECMP = "ecmp"
    SPRAY = "spray"
    FLOWLET = "flowlet"
    ADAPTIVE = "adaptive"


@dataclass(frozen=True, slots=True)
class Incidence:
    """Sparse flow x resource loads: entry ``i`` puts ``weight[i]`` of flow ``flow[i]``'s rate on
    resource ``resource[i]``; ``hops`` is each flow's number of network links (0 inside a host; for latency)."""

    flow: IntArray
    resource: IntArray
    weight: FloatArray
    hops: IntArray


def splitmix64(x: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint64]:
    """Sebastiano Vigna's splitmix64 finalizer, elementwise (wrapping uint64 arithmetic)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return np.asarray(z ^ (z >> np.uint64(31)), dtype=np.uint64)


def five_tuple_hash(src: IntArray, dst: IntArray, sport: IntArray, seed: int) -> npt.NDArray[np.uint64]:
    """A seeded hash of (src, dst, sport, RDMA_PORT, UDP) per element: the switch's ECMP hash."""
    h = splitmix64(np.full(np.shape(src), np.uint64(seed & 0xFFFFFFFFFFFFFFFF), dtype=np.uint64))
    for field in (src, dst, sport, np.full(np.shape(src), RDMA_PORT), np.full(np.shape(src), UDP)):
        h = splitmix64(h ^ np.asarray(field, dtype=np.int64).astype(np.uint64))
    return h


def source_ports(connection: IntArray, seed: int) -> IntArray:
    """An ephemeral UDP source port per connection (49152-65535), fixed by the seed and connection id:
    every flow of one GPU pair (each step of a ring channel) rides the same connection, so one path."""
    ports = splitmix64(
        np.asarray(connection, dtype=np.int64).astype(np.uint64) ^ splitmix64(np.array([seed], np.uint64))
    )
    return (ports % np.uint64(16384)).astype(np.int64) + 49152


def nvswitch(host: IntArray | int) -> IntArray:
    """The endpoint number of host ``host``'s NVSwitch (in-network reduction), for ``route``: ``-1 - host``."""
    return np.asarray(-1 - np.asarray(host, dtype=np.int64), dtype=np.int64)


def route(
    tree: FatTree,
    src_gpu: IntArray,
    dst_gpu: IntArray,
    routing: Routing,
    seed: int = 0,
    *,
    flowlets: int = FLOWLETS,
    group: IntArray | None = None,
) -> Incidence:
    """The incidence of transfers ``src_gpu[i] -> dst_gpu[i]`` (global GPU numbers, or a host's
    NVSwitch, ``nvswitch(host)``, at one end: see ``_switch_loads``); ``flowlets``: the ``k`` of
    ``Routing.FLOWLET``; ``group``: which flows run together (a collective's steps, ``Flows.group``),
    for ``Routing.ADAPTIVE`` (default: all together)."""
    if flowlets < 1:
        raise ClusterSimError(f"flowlets must be at least 1, got {flowlets}", field="flowlets", value=flowlets)
    if group is not None and np.shape(group) != np.shape(src_gpu):
        raise ClusterSimError("group must have one entry per flow", field="group")
    src = np.asarray(src_gpu, dtype=np.int64)
    dst = np.asarray(dst_gpu, dtype=np.int64)
    g, r = tree.spec.gpus_per_host, tree.spec.nics_per_host
    num_hosts = tree.spec.num_hosts
    num_gpus = num_hosts * g
    if src.size and (min(src.min(), dst.min()) < -num_hosts or max(src.max(), dst.max()) >= num_gpus):
        raise ClusterSimError(
            f"GPU numbers must be in 0..{num_gpus - 1} (or -1..-{num_hosts}: a host's NVSwitch)", field="gpu"
        )
    if np.any(src == dst):
        raise ClusterSimError("a flow needs two different GPUs", field="gpu")
    flows = np.arange(src.size, dtype=np.int64)
    switched = (src < 0) | (dst < 0)
    parts_f, parts_r, parts_w = _switch_loads(tree, flows[switched], src[switched], dst[switched])
    local = (src // g == dst // g) & ~switched
    lf = flows[local]
    parts_f += [lf, lf]
    parts_r += [tree.scaleup_out(src[local]), tree.scaleup_in(dst[local])]
    parts_w += [np.ones(lf.size), np.ones(lf.size)]
    hops = np.zeros(src.size, dtype=np.int64)
    remote = ~local & ~switched
    rf = flows[remote]
    rails = tree.nic_rails(src[remote] % g)  # (n, per)
    per = rails.shape[1]
    stripe_flow = np.repeat(rf, per)
    sp = np.repeat(src[remote] // g * r, per) + rails.ravel()
    dp = np.repeat(dst[remote] // g * r, per) + rails.ravel()
    weight = np.full(stripe_flow.size, 1.0 / per)
    connection = src * num_gpus + dst  # one connection (queue pair) per GPU pair: its steps share a path
    connections = np.repeat(connection[remote], per)
    steps = np.repeat((np.zeros(src.size, np.int64) if group is None else np.asarray(group, np.int64))[remote], per)
    res, owner, fraction, stripe_hops = _nic_paths(tree, sp, dp, connections, steps, routing, seed, flowlets)
    parts_f.append(stripe_flow[owner])
    parts_r.append(res)
    parts_w.append(weight[owner] * fraction)
    hops[rf] = stripe_hops.reshape(-1, per).max(axis=1) if rf.size else hops[rf]
    flow, resource = np.concatenate(parts_f), np.concatenate(parts_r)
    share: FloatArray = np.concatenate(parts_w)
    if routing is Routing.FLOWLET and flowlets > 1:  # flowlets of a flow hashed onto one link: one entry
        pair, inverse = np.unique(flow * tree.num_resources + resource, return_inverse=True)
        flow, resource = pair // tree.num_resources, pair % tree.num_resources
        share = np.bincount(inverse.reshape(-1), weights=share, minlength=pair.size).astype(np.float64)
    return Incidence(flow=flow, resource=resource, weight=share, hops=hops)


def _switch_loads(
    tree: FatTree, flows: IntArray, src: IntArray, dst: IntArray
) -> tuple[list[IntArray], list[IntArray], list[FloatArray]]:
    """Flows with a host's NVSwitch at one end, as NVLink SHARP moves data (NCCL's NVLS).

    From the switch to GPU ``d`` (a reduce, ``multimem.ld_reduce``): the switch pulls the same bytes
    from every GPU of the host at the flow's rate and delivers their sum, loading each GPU's egress
    port and ``d``'s ingress port with the flow's rate. From GPU ``s`` to the switch (a multicast,
    ``multimem.st``): ``s``'s egress and every GPU's ingress. The crossbar itself is not a resource."""
    g = tree.spec.gpus_per_host
    if np.any((src < 0) & (dst < 0)):
        raise ClusterSimError("a flow cannot go from one NVSwitch to another", field="gpu")
    gpu = np.where(src < 0, dst, src)
    host = np.where(src < 0, -1 - src, -1 - dst)
    if np.any(gpu // g != host):
        raise ClusterSimError("a flow to or from an NVSwitch must stay inside the switch's host", field="gpu")
    members = host[:, None] * g + np.arange(g)[None, :]  # (flows, g)
    reduce = src < 0
    fan = np.repeat(flows, g)
    fan_ports = np.where(
        np.repeat(reduce, g), tree.scaleup_out(members.reshape(-1)), tree.scaleup_in(members.reshape(-1))
    )
    single = np.where(reduce, tree.scaleup_in(gpu), tree.scaleup_out(gpu))
    return [fan, flows], [fan_ports, single], [np.ones(fan.size), np.ones(flows.size)]


def _nic_paths(
    tree: FatTree,
    sp: IntArray,
    dp: IntArray,
    connection: IntArray,
    step: IntArray,
    routing: Routing,
    seed: int,
    flowlets: int,
) -> tuple[IntArray, IntArray, FloatArray, IntArray]:
    """Resources of each NIC-to-NIC stripe: (resource, stripe index of the entry, the share of the
    stripe's rate on it, links per stripe)."""
    n = sp.size
    stripe = np.arange(n, dtype=np.int64)
    la, lb = tree.nic_leaf[sp], tree.nic_leaf[dp]
    pa, pb = la // tree.leaves_per_pod, lb // tree.leaves_per_pod
    up_leaf = la != lb
    cross = pa != pb
    hops = 2 + 2 * up_leaf.astype(np.int64) + 2 * cross.astype(np.int64)
    res = [tree.nic_up0 + sp, tree.nic_down0 + dp]
    own = [stripe, stripe]
    s_up = stripe[up_leaf]
    s_x = stripe[cross]
    if routing is Routing.SPRAY:
        res += [tree.leaf_up_bundle(la[s_up]), tree.leaf_down_bundle(lb[s_up])]
        res += [tree.pod_up_bundle(pa[s_x]), tree.pod_down_bundle(pb[s_x])]
        own += [s_up, s_up, s_x, s_x]
        return np.concatenate(res), np.concatenate(own), np.ones(2 * n + 2 * (s_up.size + s_x.size)), hops
    h = five_tuple_hash(sp[s_up], dp[s_up], source_ports(connection[s_up], seed), seed)
    a, b, x, y, xs = la[s_up], lb[s_up], pa[s_up], pb[s_up], cross[s_up]
    share = np.ones(s_up.size)
    if routing is Routing.ADAPTIVE:
        key = connection[s_up] * tree.spec.nics_per_host + sp[s_up] % tree.spec.nics_per_host  # a stripe's rail
        tie = (h % np.uint64(1 << 62)).astype(np.int64)
        j, m = adaptive_pick(tree, a, b, x, y, xs, key, tie, share, step[s_up])
    else:
        if routing is Routing.FLOWLET:
            # Flowlet i of a stripe is hashed as h_i (h_0: the stripe's ECMP hash), each carrying 1 / k.
            index = np.tile(np.arange(flowlets, dtype=np.uint64), s_up.size)
            h = np.repeat(h, flowlets)
            h = np.where(index == 0, h, splitmix64(h ^ index))
            a, b, x, y, xs, s_up = (np.repeat(v, flowlets) for v in (a, b, x, y, xs, s_up))
            share = np.full(s_up.size, 1.0 / flowlets)
        j, m = _pick(tree, a, b, x, y, xs, h)
    u, c = tree.leaf_uplinks, max(tree.spine_uplinks, 1)
    res += [tree.leaf_up0 + a * u + j, tree.leaf_down0 + b * u + j]
    res += [tree.spine_up0 + (x[xs] * u + j[xs]) * c + m[xs], tree.core_down0 + (y[xs] * u + j[xs]) * c + m[xs]]
    own += [s_up, s_up, s_up[xs], s_up[xs]]
    fraction: FloatArray = np.concatenate([np.ones(2 * n), share, share, share[xs], share[xs]])
    return np.concatenate(res), np.concatenate(own), fraction, hops


def _pick(
    tree: FatTree, la: IntArray, lb: IntArray, pa: IntArray, pb: IntArray, cross: BoolArray, h: npt.NDArray[np.uint64]
) -> tuple[IntArray, IntArray]:
    """ECMP's spine ``j`` and core ``m`` per stripe from hash ``h``: the hash picks among live choices."""
    u, c = tree.leaf_uplinks, max(tree.spine_uplinks, 1)
    low = (h & np.uint64(0xFFFFFFFF)).astype(np.int64)
    high = (h >> np.uint64(32)).astype(np.int64)
    if not tree.failed.any():
        return low % u, high % c
    spines = np.arange(u, dtype=np.int64)
    live = (
        ~tree.failed[tree.leaf_up0 + la[:, None] * u + spines]
        & ~tree.failed[tree.leaf_down0 + lb[:, None] * u + spines]
    )
    cores = np.arange(c, dtype=np.int64)
    core_live = np.ones((la.size, u, c), dtype=bool)
    if cross.any():
        xa, xb = pa[cross], pb[cross]
        up = ~tree.failed[tree.spine_up0 + ((xa[:, None] * u + spines)[:, :, None]) * c + cores]
        down = ~tree.failed[tree.core_down0 + ((xb[:, None] * u + spines)[:, :, None]) * c + cores]
        core_live[cross] = up & down
        live[cross] &= core_live[cross].any(axis=2)
    j = _kth_live(live, low)
    m = _kth_live(core_live[np.arange(la.size), j], high)
    return j, m


def _kth_live(live: BoolArray, h: IntArray) -> IntArray:
    """Per row, the ``h mod (live count)``-th live column; an error where a row has none."""
    count = live.sum(axis=1)
    if np.any(count == 0):
        raise ClusterSimError("failed links leave a flow with no path between its leaves", field="fail_links")
    k = h % count
    chosen: IntArray = np.argmax(np.cumsum(live, axis=1) > k[:, None], axis=1).astype(np.int64)
    return chosen
