"""Small fat-trees with bounds derived by hand: line rate under spraying, ECMP's hash collisions
against balls-into-bins, a 2:1 spine, a failed link, dependencies and their latency."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.engine import Flows, independent, simulate
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build

RATE = 1e9  # bytes/s per NIC


def _tree(hosts: int = 16, radix: int = 8, oversubscription: float = 1.0, latency: float = 0.0):
    # radix 8: leaves of 4 hosts with 4 / oversubscription uplinks, pods of 4 leaves
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=1,
        nics_per_host=1,
        nic_bytes_per_s=RATE,
        scaleup_bytes_per_s=1e12,
        radix=radix,
        oversubscription=oversubscription,
        link_latency_s=latency,
    )
    return build(spec)


def test_the_tree_has_the_sizes_of_its_radix():
    tree = _tree(hosts=64)  # 16 leaves of 4 hosts, 4 pods of 4 leaves, 4 spines per pod, 4 cores per plane
    assert (tree.num_leaves, tree.num_pods, tree.leaf_uplinks, tree.spine_uplinks, tree.num_tiers) == (16, 4, 4, 4, 3)
    assert tree.num_links == 2 * 64 + 2 * 16 * 4 + 2 * 4 * 4 * 4
    assert _tree(hosts=16).num_tiers == 2 and _tree(hosts=4).num_tiers == 1


def test_a_20000_gpu_p5_fabric_is_arrays():
    spec = FatTreeSpec(
        num_hosts=2500, gpus_per_host=8, nics_per_host=32, nic_bytes_per_s=12.5e9, scaleup_bytes_per_s=450e9
    )
    tree = build(spec)
    # Rail-optimized: each of 32 rails has ceil(2500 / 32) = 79 leaves of 32 NIC ports; pods of 32 leaves.
    assert tree.num_leaves == 32 * 79 and tree.num_pods == 79 and tree.num_tiers == 3
    assert tree.nic_leaf[5 * 32 + 7] == 7 * 79 + 0  # host 5, NIC 7: rail 7's first leaf


def test_a_permutation_reaches_line_rate_with_spraying_and_not_with_ecmp():
    tree = _tree()
    rng = np.random.default_rng(3)
    dst = rng.permutation(16)
    while np.any(dst // 4 == np.arange(16) // 4):  # a permutation in which every host sends off its leaf
        dst = rng.permutation(16)
    flows = independent(np.arange(16), dst, np.full(16, RATE))
    sprayed = simulate(tree, flows, Routing.SPRAY)
    assert sprayed.end_s == pytest.approx(np.ones(16))
    # ECMP pins each flow to one of 4 uplinks; 4 flows per leaf collide unless the hash is a perfect
    # matching (probability 4!/4^4 per leaf), so some flow runs below line rate on most seeds.
    slow = [simulate(tree, flows, Routing.ECMP, seed=s).makespan_s > 1.0 + 1e-9 for s in range(8)]
    assert sum(slow) >= 6


def test_ecmp_collisions_match_balls_into_bins():
    """n flows hashed onto u uplinks: a flow shares its link with another with probability
    1 - (1 - 1/u)^(n-1), so n (1 - (1 - 1/u)^(n-1)) flows collide on average."""
    tree = _tree()
    n, u = 4, tree.leaf_uplinks
    src, dst = np.arange(n), 4 + np.arange(n)  # leaf 0 to leaf 1
    colliding = []
    for seed in range(600):
        inc = route(tree, src, dst, Routing.ECMP, seed)
        up = inc.resource[(inc.resource >= tree.leaf_up0) & (inc.resource < tree.leaf_down0)]
        counts = np.bincount(up - tree.leaf_up0)
        colliding.append(int(counts[counts > 1].sum()))
    expected = n * (1 - (1 - 1 / u) ** (n - 1))  # 2.3125
    assert np.mean(colliding) == pytest.approx(expected, rel=0.06)


def _cross_leaf_alltoall(tree):
    """Every host of leaf 0 to every host of leaf 1 and back: 32 flows of 1 GB."""
    a, b = np.meshgrid(np.arange(4), 4 + np.arange(4))
    src = np.concatenate([a.ravel(), b.ravel()])
    dst = np.concatenate([b.ravel(), a.ravel()])
    return independent(src, dst, np.full(src.size, 1e9))


@pytest.mark.parametrize("routing", list(Routing))
def test_a_2_to_1_spine_halves_cross_spine_alltoall(routing: Routing):
    full = simulate(_tree(), _cross_leaf_alltoall(_tree()), Routing.SPRAY)
    # Non-blocking: each NIC sends 4 GB at 1 GB/s.
    assert full.makespan_s == pytest.approx(4.0)
    half = simulate(_tree(oversubscription=2), _cross_leaf_alltoall(_tree()), routing, seed=1)
    # 2:1: 16 GB leave each leaf on 2 uplinks of 1 GB/s (ECMP can only do worse).
    if routing is Routing.SPRAY:
        assert half.makespan_s == pytest.approx(8.0)
    else:
        assert half.makespan_s >= 8.0 * (1 - 1e-9)


def test_a_failed_spine_link_slows_exactly_the_flows_that_crossed_it():
    tree = _tree(oversubscription=2)  # 2 uplinks per leaf
    # Leaf 0 -> leaf 1 and leaf 2 -> leaf 3, four flows each, sprayed.
    src = np.concatenate([np.arange(4), 8 + np.arange(4)])
    dst = np.concatenate([4 + np.arange(4), 12 + np.arange(4)])
    flows = independent(src, dst, np.full(8, 1e9))
    before = simulate(tree, flows, Routing.SPRAY).end_s
    cable = tree.leaf_up0 + 0 * tree.leaf_uplinks + 1  # leaf 0's uplink to spine 1, both directions
    broken = tree.with_failures(np.array([cable, cable + tree.num_leaf_links]))
    after = simulate(broken, flows, Routing.SPRAY).end_s
    assert before == pytest.approx(np.full(8, 2.0))  # 4 GB over 2 uplinks
    assert after[:4] == pytest.approx(np.full(4, 4.0))  # 4 GB over the 1 uplink left
    assert after[4:] == pytest.approx(before[4:])


def test_ecmp_routes_around_a_failed_link_and_refuses_a_leaf_cut_off():
    tree = _tree(oversubscription=2)
    flows = independent(np.arange(4), 4 + np.arange(4), np.full(4, 1e9))
    uplinks = [tree.leaf_up0 + j for j in range(2)]
    one_left = tree.with_failures(np.array(uplinks[:1]))
    for seed in range(5):
        inc = route(one_left, flows.src_gpu, flows.dst_gpu, Routing.ECMP, seed)
        assert uplinks[0] not in inc.resource
    with pytest.raises(ClusterSimError, match="no path"):
        route(tree.with_failures(np.array(uplinks)), flows.src_gpu, flows.dst_gpu, Routing.ECMP, 0)
    with pytest.raises(ClusterSimError, match="no capacity left"):
        simulate(tree.with_failures(np.array(uplinks)), flows, Routing.SPRAY)


def test_a_dependent_flow_starts_when_the_first_has_arrived():
    tree = _tree(latency=1e-6)
    flows = Flows(
        src_gpu=np.array([0, 4]),
        dst_gpu=np.array([4, 8]),
        size_bytes=np.array([1e9, 5e8]),
        start_at_s=np.array([0.0, 0.25]),
        dep_ptr=np.array([0, 0, 1]),
        dep_idx=np.array([0]),
    )
    times = simulate(tree, flows, Routing.SPRAY)
    # Flow 0: 1 s on the wire, then 4 links (nic, leaf up, leaf down, nic) of 1 us each.
    assert times.end_s[0] == pytest.approx(1.0 + 4e-6)
    assert times.start_s[1] == pytest.approx(1.0 + 4e-6)
    assert times.end_s[1] == pytest.approx(1.5 + 8e-6)


def test_a_dependency_cycle_is_refused():
    flows = Flows(
        src_gpu=np.array([0, 1]),
        dst_gpu=np.array([1, 0]),
        size_bytes=np.ones(2),
        start_at_s=np.zeros(2),
        dep_ptr=np.array([0, 1, 2]),
        dep_idx=np.array([1, 0]),
    )
    with pytest.raises(ClusterSimError, match="cycle"):
        simulate(_tree(), flows, Routing.SPRAY)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [("radix", {"radix": 7}), ("oversubscription", {"oversubscription": 0.5}), ("num_hosts", {"num_hosts": 0})],
)
def test_a_bad_spec_names_its_field(field: str, kwargs: dict[str, float]):
    base = {"num_hosts": 4, "gpus_per_host": 1, "nics_per_host": 1, "nic_bytes_per_s": 1.0, "scaleup_bytes_per_s": 1.0}
    with pytest.raises(ClusterSimError, match=field) as err:
        FatTreeSpec(**{**base, **kwargs})  # type: ignore[arg-type]
    assert err.value.field == field
