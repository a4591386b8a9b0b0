"""Several jobs on one fabric, failed spine switches, and collectives of rank groups, on small fat-trees
with bounds derived by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.flowsim.cluster import Placement, fail_job_switches, place_jobs, spine_links
from clustersim.network.flowsim.collectives import RING_OPS, collective_flows
from clustersim.network.flowsim.engine import independent, simulate
from clustersim.network.flowsim.groups import concatenate, group_flows
from clustersim.network.flowsim.results import collective_time_s, simulate_jobs
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build

RATE = 1e9  # bytes/s per NIC


def _tree(hosts: int = 16, gpus: int = 1, oversubscription: float = 1.0):
    # radix 8: leaves of 4 NIC ports with 4 / oversubscription uplinks (spines per pod), pods of 4 leaves
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=gpus,
        nics_per_host=gpus,
        nic_bytes_per_s=RATE,
        scaleup_bytes_per_s=10 * RATE,
        radix=8,
        oversubscription=oversubscription,
    )
    return build(spec)


def _cross_leaf_alltoall():
    """Every host to every host on the other three leaves of a 16-host, 4-leaf tree: 1 GB each."""
    a, b = np.meshgrid(np.arange(16), np.arange(16), indexing="ij")
    cross = a // 4 != b // 4
    return independent(a[cross], b[cross], np.full(int(cross.sum()), RATE))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_of_s_spines_failed_slows_a_sprayed_cross_spine_alltoall_by_s_over_s_minus_1(seed: int):
    tree = _tree()
    s = tree.leaf_uplinks
    # Each host sends 12 GB off its leaf; a leaf's 48 GB leave on s = 4 uplinks: 12 s, NIC and spine alike.
    full = simulate(tree, _cross_leaf_alltoall(), Routing.SPRAY).makespan_s
    assert full == pytest.approx(12.0)
    broken = fail_job_switches(tree, np.arange(16), 1, seed)
    assert int(broken.failed.sum()) == 2 * tree.num_leaves  # one uplink and one downlink per leaf
    after = simulate(broken, _cross_leaf_alltoall(), Routing.SPRAY).makespan_s
    assert after / full == pytest.approx(s / (s - 1))


def test_ecmp_never_routes_over_a_failed_spine_and_every_pod_keeps_one():
    tree = _tree()
    flows = _cross_leaf_alltoall()
    three_down = fail_job_switches(tree, np.arange(16), 3, seed=4)  # 3 of the pod's 4 spines
    dead = np.flatnonzero(three_down.failed)
    assert dead.size == 3 * 2 * tree.num_leaves
    inc = route(three_down, flows.src_gpu, flows.dst_gpu, Routing.ECMP, seed=1)
    assert not np.isin(inc.resource, dead).any()
    # One spine left carries a leaf's 48 GB alone: 4x the non-blocking 12 s.
    assert simulate(three_down, flows, Routing.ECMP, seed=1).makespan_s == pytest.approx(48.0)
    with pytest.raises(ClusterSimError, match="must keep one each") as err:
        fail_job_switches(tree, np.arange(16), 4)
    assert err.value.field == "fail_switches"


def test_a_spine_of_a_three_tier_fabric_takes_its_core_links_down_too():
    tree = _tree(hosts=64)  # 4 pods of 4 leaves, 4 spines per pod, 4 cores per plane
    links = spine_links(tree, pod=2, spine=3)
    names = [tree.link_name(int(i)) for i in links]
    assert len(names) == 2 * tree.leaves_per_pod + 2 * tree.spine_uplinks
    assert all("spine 2/3" in name for name in names)
    same = fail_job_switches(tree, np.arange(64), 2, seed=7)
    assert np.array_equal(same.failed, fail_job_switches(tree, np.arange(64), 2, seed=7).failed)


def test_jobs_are_placed_side_by_side_without_sharing_a_host():
    tree = _tree(hosts=64)
    packed = place_jobs(tree, 4, 3, Placement.PACKED)
    assert [j.tolist() for j in packed] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    spread = place_jobs(tree, 4, 2, Placement.SPREAD)  # 8 hosts 8 apart, dealt out in turn
    assert [j.tolist() for j in spread] == [[0, 16, 32, 48], [8, 24, 40, 56]]
    random = place_jobs(tree, 5, 4, Placement.RANDOM, seed=3)
    assert np.unique(np.concatenate(random)).size == 20
    assert all(
        np.array_equal(a, b) for a, b in zip(random, place_jobs(tree, 5, 4, Placement.RANDOM, seed=3), strict=True)
    )
    with pytest.raises(ClusterSimError, match="65 hosts") as err:
        place_jobs(tree, 13, 5)
    assert err.value.field == "jobs"


def test_jobs_on_their_own_leaves_do_not_slow_each_other():
    tree = _tree(oversubscription=4)  # one uplink per leaf
    result = simulate_jobs(tree, place_jobs(tree, 4, 4, Placement.PACKED), Op.ALL_REDUCE, 4 * RATE)
    assert result.slowdown == pytest.approx([1.0] * 4)


@pytest.mark.parametrize("routing", list(Routing))
def test_two_interleaved_jobs_halve_each_other_on_a_single_uplink(routing: Routing):
    tree = _tree(oversubscription=4)  # one uplink per leaf
    jobs = place_jobs(tree, 4, 2, Placement.SPREAD)  # one host of each job on every leaf
    result = simulate_jobs(tree, jobs, Op.SENDRECV, RATE, routing=routing)
    # Alone: one flow leaves each leaf, at line rate (1 s); together two share its one uplink.
    assert result.alone_time_s == pytest.approx([1.0, 1.0])
    assert result.slowdown == pytest.approx([2.0, 2.0])
    out = result.to_dict()
    assert out["max_slowdown"] == pytest.approx(2.0) and out["binding_tier"] in ("leaf->spine", "spine->leaf")


@pytest.mark.parametrize("op", [Op.ALL_REDUCE, Op.ALL_GATHER, Op.ALLTOALL])
@pytest.mark.parametrize("routing", list(Routing))
def test_a_group_of_whole_hosts_runs_the_hosts_collective(op: Op, routing: Routing):
    tree = _tree(hosts=64, gpus=4)
    hosts = np.array([0, 5, 9, 30, 47])
    group = (hosts[:, None] * 4 + np.arange(4)).reshape(1, -1)
    ours, theirs = group_flows(group, 4, op, 1e9), collective_flows(tree, hosts, op, 1e9)
    assert np.array_equal(ours.flows.src_gpu, theirs.flows.src_gpu)
    assert np.array_equal(ours.flows.dst_gpu, theirs.flows.dst_gpu)
    a = collective_time_s(ours, simulate(tree, ours.flows, routing, seed=2), tree.capacity_bytes_per_s)
    b = collective_time_s(theirs, simulate(tree, theirs.flows, routing, seed=2), tree.capacity_bytes_per_s)
    assert a == b


@pytest.mark.parametrize(("op", "factor"), [(Op.ALL_REDUCE, 2.0), (Op.REDUCE_SCATTER, 1.0), (Op.ALLTOALL, 1.0)])
def test_groups_of_one_gpu_per_host_run_at_their_rails_closed_form(op: Op, factor: float):
    tree = _tree(hosts=16, gpus=4)
    n = 8
    groups = np.arange(n)[None, :] * 4 + np.arange(4)[:, None]  # GPU c of hosts 0..7: four groups at once
    plan = group_flows(groups, 4, op, 8e9, max_steps=64)
    time_s = collective_time_s(plan, simulate(tree, plan.flows, Routing.SPRAY), tree.capacity_bytes_per_s)
    # Ring: factor (n - 1) / n of the size through each GPU's own rail; all-to-all: (n - 1) / n of it.
    assert time_s == pytest.approx(factor * (n - 1) / n * 8e9 / RATE)


def test_concatenated_flows_keep_their_own_dependencies():
    tree = _tree(hosts=16, gpus=4)
    left = group_flows(np.arange(16).reshape(1, -1), 4, Op.ALL_REDUCE, 1e9)
    right = group_flows(32 + np.arange(16).reshape(1, -1), 4, Op.ALL_REDUCE, 1e9)
    both = concatenate([left.flows, right.flows])
    times = simulate(tree, both, Routing.SPRAY)
    alone = simulate(tree, left.flows, Routing.SPRAY)
    assert times.end_s[: left.flows.num_flows] == pytest.approx(alone.end_s)
    assert times.end_s[left.flows.num_flows :] == pytest.approx(alone.end_s)


def test_bad_groups_are_refused_by_name():
    with pytest.raises(ClusterSimError, match="twice"):
        group_flows(np.array([[0, 1], [1, 2]]), 4, Op.ALL_REDUCE, 1.0)
    with pytest.raises(ClusterSimError, match="sendrecv") as err:
        group_flows(np.array([[0, 1]]), 4, Op.SENDRECV, 1.0)
    assert err.value.field == "collective"


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(2, 6), per=st.sampled_from([1, 2, 4]), groups=st.integers(1, 3), op=st.sampled_from(list(RING_OPS))
)
def test_ring_flows_move_the_ring_bytes_through_every_rank(n: int, per: int, groups: int, op: Op):
    """Whatever the shape, each rank of a ring sends (steps) x size / n over all its channels."""
    gpus = np.arange(groups * n * per).reshape(groups, n * per)
    plan = group_flows(gpus, 4, op, 1e6, max_steps=1000)
    sent = np.bincount(plan.flows.src_gpu, weights=plan.flows.size_bytes)
    ranks = n * per
    assert sent == pytest.approx(np.full(gpus.size, RING_OPS[op] * (ranks - 1) * 1e6 / ranks))
