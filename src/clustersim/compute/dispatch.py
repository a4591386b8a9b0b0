"""How many copies of a token an expert-parallel dispatch sends over the network.

A token routed to ``k`` of ``E`` experts spread evenly over an expert-parallel group on ``N`` nodes
(``E / N`` experts per node) is, under a plain all-to-all, one message per routed expert: ``k (N - 1)
/ N`` copies leave its node on average (uniform routing, as benchmarks that force-balance the router
have it). A hierarchical dispatch (DeepEP's internode kernels, HybridEP) sends it once to each remote
node holding at least one of its experts and fans it out there over the scale-up fabric; the combine
gathers the same way. A node misses all ``k`` experts with probability ``C(E - E/N, k) / C(E, k)``, so
``(N - 1) (1 - C(E - E/N, k) / C(E, k))`` copies cross the network. ``network_copy_ratio`` is the
ratio of the two: the factor on the network bytes of the dispatch and the combine.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def node_miss_probability(experts: int, top_k: int, num_nodes: npt.ArrayLike) -> FloatArray:
    """Probability that a token's ``top_k`` distinct experts all miss one node's ``experts / N``."""
    nodes = np.asarray(num_nodes, dtype=float)
    others = experts - experts / nodes  # experts on the other nodes
    miss = np.ones_like(nodes)
    for i in range(top_k):
        miss = miss * np.clip(others - i, 0.0, None) / (experts - i)
    return np.asarray(miss, dtype=np.float64)


def network_copy_ratio(experts: int, top_k: int, num_nodes: npt.ArrayLike) -> FloatArray:
    """Network copies of a token with a per-node dispatch / with one message per routed expert (1 on one node)."""
    nodes = np.asarray(num_nodes, dtype=float)
    per_node = (nodes - 1) * (1.0 - node_miss_probability(experts, top_k, nodes))
    per_expert = top_k * (nodes - 1) / nodes
    ratio = np.where(nodes > 1, per_node / np.maximum(per_expert, 1e-300), 1.0)
    return np.asarray(ratio, dtype=np.float64)
