"""Adaptive routing's path choice: each connection takes the least-loaded of its equal-cost paths.

A leaf switch with path-congestion feedback (CONGA, Alizadeh et al., SIGCOMM 2014: the uplink that
minimizes the maximum of its own load and the path's remote load; the same rule as Broadcom's and
NVIDIA Spectrum-X's dynamic load balancing picking the "optimal" egress) sends a new connection on the
path whose busiest link carries the least, ties broken by the flow's hash. Connections are placed
greedily in the order they first appear, each seeing the connections placed before it in its
``group`` (flows that run at the same time: a collective's step); ``route`` has no times, so
without groups every connection counts as concurrent with every other.

Greedy is not a matching: on a random permutation two connections can still be left sharing a
downlink when every spine free of the one's uplinks is busy into the other's leaf (on a 4-leaf,
4-spine tree, about half the permutations), so it lies between ECMP and spraying.
"""

from __future__ import annotations

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.topology import BoolArray, FatTree, FloatArray, IntArray


def adaptive_pick(
    tree: FatTree,
    la: IntArray,
    lb: IntArray,
    pa: IntArray,
    pb: IntArray,
    cross: BoolArray,
    key: IntArray,
    tie: IntArray,
    weight: FloatArray,
    group: IntArray,
) -> tuple[IntArray, IntArray]:
    """Spine ``j`` and core ``m`` of each stripe between leaves ``la -> lb`` (pods ``pa -> pb``):
    stripes with the same ``key`` and ``group`` (a connection's stripe in one step) share the pick of
    its first one; ``tie`` (a hash) orders the candidates among equals; ``weight`` is what a stripe
    adds to its links; only stripes of the same ``group`` see each other's load."""
    u, c = tree.leaf_uplinks, max(tree.spine_uplinks, 1)
    up = np.zeros((tree.num_leaves, u))
    down = np.zeros((tree.num_leaves, u))
    core_up = np.zeros((max(tree.num_pods, 1), u, c))
    core_down = np.zeros((max(tree.num_pods, 1), u, c))
    failed = tree.failed
    dead_up = failed[tree.leaf_up0 : tree.leaf_down0].reshape(tree.num_leaves, u)
    dead_down = failed[tree.leaf_down0 : tree.spine_up0].reshape(tree.num_leaves, u)
    num_core = tree.num_core_links
    dead_core_up = failed[tree.spine_up0 : tree.spine_up0 + num_core].reshape(-1, u, c)
    dead_core_down = failed[tree.core_down0 : tree.core_down0 + num_core].reshape(-1, u, c)
    _, first, inverse = np.unique(np.stack([group, key]), axis=1, return_index=True, return_inverse=True)
    j_of = np.zeros(first.size, dtype=np.int64)
    m_of = np.zeros(first.size, dtype=np.int64)
    rotate_u = np.arange(u)
    current = None
    for k in np.lexsort((first, group[first])):  # by group, then in order of appearance
        s = int(first[k])
        if group[s] != current:  # a new step: nothing placed yet
            current = group[s]
            for load in (up, down, core_up, core_down):
                load[...] = 0.0
        a, b, offset = int(la[s]), int(lb[s]), int(tie[s])
        cost = np.maximum(up[a], down[b])
        cost[dead_up[a] | dead_down[b]] = np.inf
        if cross[s]:
            x, y = int(pa[s]), int(pb[s])
            core = np.maximum(core_up[x], core_down[y])
            core[dead_core_up[x] | dead_core_down[y]] = np.inf
            path = np.maximum(cost[:, None], core)  # (u, c)
            flat = (np.arange(u * c) + offset) % (u * c)
            best = int(flat[np.argmin(path.reshape(-1)[flat])])
            if not np.isfinite(path.reshape(-1)[best]):
                raise ClusterSimError("failed links leave a flow with no path between its leaves", field="fail_links")
            j, m = divmod(best, c)
            core_up[x, j, m] += weight[s]
            core_down[y, j, m] += weight[s]
        else:
            order = (rotate_u + offset) % u
            j, m = int(order[np.argmin(cost[order])]), 0
            if not np.isfinite(cost[j]):
                raise ClusterSimError("failed links leave a flow with no path between its leaves", field="fail_links")
        up[a, j] += weight[s]
        down[b, j] += weight[s]
        j_of[k], m_of[k] = j, m
    inverse = inverse.reshape(-1)
    return j_of[inverse], m_of[inverse]
