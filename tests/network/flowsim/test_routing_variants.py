"""Flowlet and adaptive routing between ECMP and spraying, with bounds derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op, Protocol
from clustersim.network.flowsim.cost import SimCost
from clustersim.network.flowsim.engine import independent, run, simulate
from clustersim.network.flowsim.routing import FLOWLETS, Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.topology import fabric_for_instance

RATE = 1e9  # bytes/s per NIC


def _tree(hosts: int = 16, oversubscription: float = 1.0):
    # radix 8: leaves of 4 hosts with 4 / oversubscription uplinks, pods of 4 leaves (3 tiers from 17 hosts)
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=1,
        nics_per_host=1,
        nic_bytes_per_s=RATE,
        scaleup_bytes_per_s=1e12,
        radix=8,
        oversubscription=oversubscription,
    )
    return build(spec)


def _uplink_loads(tree, inc, leaf: int = 0):
    """The share of a flow's rate each uplink of ``leaf`` carries, summed over the flows."""
    first = tree.leaf_up0 + leaf * tree.leaf_uplinks
    mine = (inc.resource >= first) & (inc.resource < first + tree.leaf_uplinks)
    return np.bincount(inc.resource[mine] - first, weights=inc.weight[mine], minlength=tree.leaf_uplinks)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**32),
    hosts=st.sampled_from([16, 64]),
    pairs=st.lists(st.tuples(st.integers(0, 63), st.integers(0, 63)), min_size=1, max_size=40),
)
def test_one_flowlet_per_flow_is_ecmp(seed: int, hosts: int, pairs: list[tuple[int, int]]):
    src = np.array([a % hosts for a, b in pairs])
    dst = np.array([b % hosts for a, b in pairs])
    keep = src != dst
    if not keep.any():
        return
    tree = _tree(hosts)
    ecmp = route(tree, src[keep], dst[keep], Routing.ECMP, seed)
    flowlet = route(tree, src[keep], dst[keep], Routing.FLOWLET, seed, flowlets=1)
    for field in ("flow", "resource", "weight", "hops"):
        assert np.array_equal(getattr(ecmp, field), getattr(flowlet, field))


@pytest.mark.parametrize("k", [1, 4, 16])
def test_flowlet_loads_follow_balls_into_bins(k: int):
    """n flows of k flowlets (1/k of the rate each) hashed onto u uplinks: an uplink's load is
    Binomial(n k, 1/u) / k, so the sum of the squared uplink loads averages n/k (1 - 1/u) + n^2/u
    (7 for ECMP's single flowlet, n = u = 4; 4, perfectly even, for spraying)."""
    tree = _tree()
    n, u = 4, tree.leaf_uplinks
    src, dst = np.arange(n), 4 + np.arange(n)  # leaf 0 to leaf 1
    squares = [
        float((_uplink_loads(tree, route(tree, src, dst, Routing.FLOWLET, seed, flowlets=k)) ** 2).sum())
        for seed in range(400)
    ]
    expected = n / k * (1 - 1 / u) + n**2 / u
    assert np.mean(squares) == pytest.approx(expected, rel=0.04)
    spray = _uplink_loads(tree, route(tree, src, dst, Routing.SPRAY, 0))
    assert spray.sum() == 0  # spraying loads the leaf's bundle, not its links
    assert FLOWLETS == 8


def test_many_flowlets_approach_spraying_on_a_permutation():
    """A leaf-to-leaf shift (host i to i + 4): spraying reaches line rate (1 s per GB); ECMP's
    collisions make the slowest flow take 2-4 s on most seeds; with k flowlets the busiest uplink
    carries about 1 + O(1/sqrt(k)) flows' worth, so the makespan falls toward 1 s."""
    tree = _tree()
    src, dst = np.arange(16), (np.arange(16) + 4) % 16
    flows = independent(src, dst, np.full(16, RATE))
    spans = {
        k: np.mean(
            [run(tree, flows, route(tree, src, dst, Routing.FLOWLET, s, flowlets=k)).makespan_s for s in range(6)]
        )
        for k in (1, 16, 1024)
    }
    assert spans[1] > spans[16] > spans[1024]
    assert spans[1] >= 1.9  # ECMP's collisions
    assert spans[1024] == pytest.approx(1.0, abs=0.12)
    assert simulate(tree, flows, Routing.SPRAY).makespan_s == pytest.approx(1.0)


@pytest.mark.parametrize("hosts", [16, 64])
def test_adaptive_routing_puts_a_leaf_pair_permutation_at_line_rate(hosts: int):
    """Every host of a leaf to the same position on the next leaf (16 hosts: one pod) or in the next
    pod (64 hosts: 3 tiers): each connection finds a path whose links no earlier one uses, since at
    most u - 1 of its leaf's (and spine's) links are taken when it is placed; ECMP collides (a leaf
    is collision-free with probability 4! / 4^4)."""
    tree = _tree(hosts)
    shift = 4 if hosts == 16 else 16
    flows = independent(np.arange(hosts), (np.arange(hosts) + shift) % hosts, np.full(hosts, RATE))
    for seed in range(5):
        adaptive = simulate(tree, flows, Routing.ADAPTIVE, seed=seed)
        assert adaptive.end_s == pytest.approx(np.ones(hosts))
    assert min(simulate(tree, flows, Routing.ECMP, seed=s).makespan_s for s in range(5)) > 1.5


def test_adaptive_routing_is_deterministic_per_seed_and_avoids_failed_links():
    tree = _tree()
    rng = np.random.default_rng(1)
    src = rng.integers(0, 16, 40)
    dst = (src + rng.integers(1, 16, 40)) % 16
    one = route(tree, src, dst, Routing.ADAPTIVE, 3)
    again = route(tree, src, dst, Routing.ADAPTIVE, 3)
    assert all(np.array_equal(getattr(one, f), getattr(again, f)) for f in ("flow", "resource", "weight"))
    dead = tree.leaf_up0 + np.array([0, 1])  # two of leaf 0's four uplinks
    broken = tree.with_failures(dead)
    inc = route(broken, src, dst, Routing.ADAPTIVE, 3)
    assert not np.isin(inc.resource, dead).any()
    # Leaf 0's four hosts to leaf 1 over the two live uplinks: two connections on each, 2 s per GB.
    flows = independent(np.arange(4), 4 + np.arange(4), np.full(4, RATE))
    assert simulate(broken, flows, Routing.ADAPTIVE).end_s == pytest.approx(np.full(4, 2.0))
    with pytest.raises(ClusterSimError, match="no path between its leaves"):
        route(tree.with_failures(tree.leaf_up0 + np.arange(4)), src, dst, Routing.ADAPTIVE, 3)


def test_adaptive_routing_avoids_a_failed_core_link_in_either_direction():
    """64 hosts in four pods (three tiers), every host to the same position in the next pod: the intact tree's
    adaptive picks use every spine-to-core link, among them the two that then fail: up from pod 2's spine 3 to its
    core 1, and down from core 2 into pod 1's spine 1 (each dead in one direction only). With them failed, no
    connection crosses either, and none is slower than two sharing a link."""
    tree = _tree(64)
    u, c = tree.leaf_uplinks, tree.spine_uplinks
    dead = np.array([tree.spine_up0 + 2 * u * c + 3 * c + 1, tree.core_down0 + 1 * u * c + 1 * c + 2])
    broken = tree.with_failures(dead)
    src = np.arange(64)
    dst = (src + 16) % 64
    flows = independent(src, dst, np.full(64, RATE))
    for seed in range(4):
        assert np.isin(route(tree, src, dst, Routing.ADAPTIVE, seed).resource, dead).sum() == 2
        assert not np.isin(route(broken, src, dst, Routing.ADAPTIVE, seed).resource, dead).any()
        assert simulate(broken, flows, Routing.ADAPTIVE, seed=seed).makespan_s == pytest.approx(2.0)


def test_a_flow_needs_at_least_one_flowlet():
    with pytest.raises(ClusterSimError, match="flowlets must be at least 1, got 0"):
        route(_tree(), np.array([0]), np.array([5]), Routing.FLOWLET, 0, flowlets=0)


def test_adaptive_routing_balances_each_step_on_its_own():
    """Hosts 0 and 1 send to leaf 1 (t = 0), then leaf 0's four hosts do, on new connections (t = 1
    s). Placed as steps (``group``), the second round has all four spines to itself: line rate,
    ending at 1 s and 2 s. Counted as concurrent, the first round's two connections weigh on the
    second's choices: its last two connections see every path at load 1 and, on some seeds, take
    one of its own first two's."""
    tree = _tree()
    src = np.array([0, 1, 0, 1, 2, 3])
    dst = np.array([4, 5, 5, 4, 6, 7])
    step = np.array([0, 0, 1, 1, 1, 1])
    flows = independent(src, dst, np.full(6, RATE), start_at_s=step.astype(float))
    for seed in range(8):
        inc = route(tree, src, dst, Routing.ADAPTIVE, seed, group=step)
        assert run(tree, flows, inc).end_s == pytest.approx(1.0 + step)
    together = [run(tree, flows, route(tree, src, dst, Routing.ADAPTIVE, s)).makespan_s for s in range(8)]
    assert max(together) == pytest.approx(3.0)  # two of the second round on one uplink: 2 s for 1 GB
    with pytest.raises(ClusterSimError, match="group must have one entry per flow"):
        route(tree, src, dst, Routing.ADAPTIVE, 0, group=step[:3])


def test_the_sim_cost_model_routes_adaptively_step_by_step():
    """128 p5 nodes at 2:1, all-to-all: the pairwise rounds' connections, placed round by round on
    their least-loaded paths, load the spines as evenly as spraying does."""
    fabric = fabric_for_instance(load_catalog(use_env=False), "p5.48xlarge", 128)
    size = np.array([float(1 << 30)])
    sprayed = SimCost(oversubscription=2).table(Op.ALLTOALL, size, fabric, protocol=Protocol.SIMPLE)
    adaptive = SimCost(routing=Routing.ADAPTIVE, oversubscription=2)
    table = adaptive.table(Op.ALLTOALL, size, fabric, protocol=Protocol.SIMPLE)
    assert table.time_s[0] == pytest.approx(sprayed.time_s[0], rel=1e-6)
    assert "simulated with adaptive" in table.bound[0]
