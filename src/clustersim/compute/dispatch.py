"""How many copies of a token an expert-parallel dispatch sends over the network.

A token routed to ``k`` of ``E`` experts spread evenly over an expert-parallel group on ``N`` nodes
(``E / N`` experts per node) is, under a plain all-to-all, one message per routed expert: ``k (N - 1)
/ N`` copies leave its node on average (uniform routing, as benchmarks that force-balance the router
have it). A hierarchical dispatch (DeepEP's internode kernels, HybridEP) sends it once to each remote
node holding at least one of its experts and fans it out there over the scale-up fabric; the combine
gathers the same way. A node misses all ``k`` experts with probability ``C(E - E/N, k) / C(E, k)``, so
``(N - 1) (1 - C(E - E/N, k) / C(E, k))`` copies cross the network. ``network_copy_ratio`` is the
ratio of the two: the factor on the network bytes of the dispatch and the combine.

Group-limited routing (DeepSeek-V3's node-limited routing: its experts in ``G`` groups, each token's
``k`` within the ``g`` groups it scores highest; arXiv 2412.19437 section 2.1.2, the config's
``n_group`` 8 and ``topk_group`` 4) bounds the nodes a token reaches. With a group over ``N / G``
nodes (``N >= G``) the token's experts lie on the ``g N / G`` nodes of its groups, each still missed
with the probability above among those groups' ``g E / G`` experts; with ``G / N`` groups per node
(``N < G``) the ``g`` groups land on ``N (1 - C(G - G/N, g) / C(G, g))`` nodes, each holding at least
one of its experts. A node is the token's own as often as any other: ``(N - 1) / N`` of them are remote.

Over the scale-up fabric the same dispatchers send a token once to each GPU holding at least one of its experts, not
once per expert (DeepEP's ``is_token_in_rank`` layout): ``gpu_copy_ratio`` is the ratio above with each of the
group's ``R`` ranks as a "node" of ``E / R`` experts.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.workload.moe import MoE

FloatArray = npt.NDArray[np.float64]


def node_miss_probability(experts: int, top_k: int, num_nodes: npt.ArrayLike) -> FloatArray:
    """Probability that a token's ``top_k`` distinct experts all miss one node's ``experts / N``."""
    nodes = np.asarray(num_nodes, dtype=float)
    others = experts - experts / nodes  # experts on the other nodes
    miss = np.ones_like(nodes)
    for i in range(top_k):
        miss = miss * np.clip(others - i, 0.0, None) / (experts - i)
    return np.asarray(miss, dtype=np.float64)


def nodes_reached(
    experts: int, top_k: int, num_nodes: npt.ArrayLike, groups: int = 1, group_top_k: int | None = None
) -> FloatArray:
    """Expected nodes holding at least one of a token's experts, routing limited to ``group_top_k`` of
    ``groups`` expert groups or not (None)."""
    nodes = np.asarray(num_nodes, dtype=float)
    free = nodes * (1.0 - node_miss_probability(experts, top_k, nodes))
    if group_top_k is None or group_top_k >= groups:
        return np.asarray(free, dtype=np.float64)
    pool = group_top_k * np.maximum(nodes / groups, 1.0)  # the nodes of the token's groups (N >= G)
    spread = pool * (1.0 - node_miss_probability(group_top_k * experts // groups, top_k, pool))
    packed = nodes * (1.0 - node_miss_probability(groups, group_top_k, np.minimum(nodes, groups)))  # N < G
    return np.asarray(np.minimum(free, np.where(nodes >= groups, spread, packed)), dtype=np.float64)


def network_copy_ratio(
    experts: int, top_k: int, num_nodes: npt.ArrayLike, groups: int = 1, group_top_k: int | None = None
) -> FloatArray:
    """Network copies of a token with a per-node dispatch / with one message per routed expert (1 on one
    node); routing limited to ``group_top_k`` of ``groups`` expert groups where given."""
    nodes = np.asarray(num_nodes, dtype=float)
    per_node = (nodes - 1) / nodes * nodes_reached(experts, top_k, nodes, groups, group_top_k)
    per_expert = top_k * (nodes - 1) / nodes
    ratio = np.where(nodes > 1, per_node / np.maximum(per_expert, 1e-300), 1.0)
    return np.asarray(ratio, dtype=np.float64)


def gpu_copy_ratio(
    experts: int, top_k: int, num_ranks: npt.ArrayLike, groups: int = 1, group_top_k: int | None = None
) -> FloatArray:
    """Scale-up copies of a token with a per-GPU dispatch (one message to each GPU holding its experts) / with one
    message per routed expert, over an expert-parallel group of ``num_ranks`` GPUs."""
    return network_copy_ratio(experts, top_k, num_ranks, groups, group_top_k)


def dispatch_copy_ratios(moe: MoE, num_nodes: npt.ArrayLike, num_ranks: npt.ArrayLike) -> tuple[FloatArray, FloatArray]:
    """A per-node dispatch's (network, scale-up) copy ratios for ``moe``'s routing over an expert-parallel group of
    ``num_ranks`` GPUs on ``num_nodes`` nodes: ``network_copy_ratio`` and ``gpu_copy_ratio``."""
    routing = (moe.experts, moe.top_k)
    return (
        network_copy_ratio(*routing, num_nodes, moe.groups, moe.group_top_k),
        gpu_copy_ratio(*routing, num_ranks, moe.groups, moe.group_top_k),
    )
