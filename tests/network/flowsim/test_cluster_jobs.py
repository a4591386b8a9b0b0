"""Several jobs on one fabric, failed spine switches, and collectives of rank groups, on small fat-trees
with bounds derived by hand."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.flowsim.cluster import Placement, fail_job_switches, place_jobs, spine_links
from clustersim.network.flowsim.collectives import RING_OPS, collective_flows
from clustersim.network.flowsim.engine import independent, simulate
from clustersim.network.flowsim.failover import fail_job_leaves, job_leaves, leaf_links, nic_down, pxn_flows
from clustersim.network.flowsim.groups import concatenate, group_flows
from clustersim.network.flowsim.results import collective_time_s, simulate_collective, simulate_jobs
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build

# These tests check the link-bound view: datasheet links, no latency (``ideal``, ``--ideal``).
simulate_jobs = functools.partial(simulate_jobs, ideal=True)
simulate_collective = functools.partial(simulate_collective, ideal=True)

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


def _rail_tree():
    """4 hosts of 2 GPUs, one rail each: rail 0 on leaf 0, rail 1 on leaf 1 (radix 8: 4 ports a leaf)."""
    return _tree(hosts=4, gpus=2)


def test_a_failed_leaf_takes_its_ports_and_spine_links_down():
    tree = _rail_tree()
    links = leaf_links(tree, 0)
    assert sorted(tree.link_name(int(i)) for i in links[:2]) == ["host 0 nic 0 -> leaf 0", "host 1 nic 0 -> leaf 0"]
    assert links.size == 4 + 4 + 2 * tree.leaf_uplinks  # 4 NIC ports both ways, 4 spines both ways
    assert job_leaves(tree, np.array([2])).tolist() == [0, 1]
    failed = fail_job_leaves(tree, np.arange(4), 1, seed=0)
    assert int(failed.failed.sum()) == links.size  # one whole leaf: its 4 NIC ports are the ones down
    down = np.flatnonzero(nic_down(failed))
    assert np.array_equal(down, np.flatnonzero(tree.nic_leaf == tree.nic_leaf[down[0]]))


def test_pxn_sends_a_gpu_without_its_rail_through_its_peer_at_the_same_rate():
    tree = _rail_tree().with_failures(leaf_links(_rail_tree(), 0))  # every host loses rail 0 (GPU 0's)
    flows = pxn_flows(tree, independent(np.array([0]), np.array([2]), np.array([RATE])))
    # GPU 0 of host 0 -> GPU 0 of host 1: the network part leaves from GPU 1 on rail 1; NVLink legs
    # GPU 0 -> GPU 1 on host 0 and GPU 1 -> GPU 0 on host 1 go at once.
    assert flows.src_gpu.tolist() == [1, 0, 3] and flows.dst_gpu.tolist() == [2, 1, 2]
    inc = route(tree, flows.src_gpu, flows.dst_gpu, Routing.SPRAY)
    times = simulate(tree, flows, inc)
    assert times.end_s[0] == pytest.approx(1.0, rel=1e-12)  # one 1 GB/s rail, alone
    assert not np.any(times.resource_bytes[: tree.num_links][tree.failed])  # nothing crosses the dead leaf
    untouched = independent(np.array([1]), np.array([3]), np.array([RATE]))
    assert pxn_flows(tree, untouched) is untouched


def test_a_failed_leaf_halves_a_ring_whose_channels_now_share_one_rail():
    tree = _rail_tree()
    hosts = np.arange(4)
    whole = simulate_collective(tree, hosts, Op.ALL_REDUCE, 64e6, max_steps=3)
    broken = simulate_collective(tree.with_failures(leaf_links(tree, 1)), hosts, Op.ALL_REDUCE, 64e6, max_steps=3)
    # Two channels leave each host, one per GPU's rail; with rail 1 gone both ride rail 0 (NVLink 10x faster).
    assert broken.time_s == pytest.approx(2 * whole.time_s, rel=1e-9)


def test_pxn_keeps_the_dependencies_and_groups_of_the_flows_it_moves():
    tree = _rail_tree().with_failures(leaf_links(_rail_tree(), 0))
    plan = group_flows(np.array([[0, 2, 4, 6]]), 2, Op.ALL_GATHER, 4e6, max_steps=3)
    moved = pxn_flows(tree, plan.flows)
    n = plan.flows.num_flows
    assert np.array_equal(moved.dep_ptr[: n + 1], plan.flows.dep_ptr)  # the moved flows wait as before
    assert np.array_equal(moved.group[:n], plan.flows.group)
    assert moved.num_flows == 3 * n  # every ring flow leaves from GPU 0: an NVLink leg at each end

    def deps(f, i):
        return f.dep_idx[f.dep_ptr[i] : f.dep_ptr[i + 1]].tolist()

    old = plan.flows
    for i in range(n):  # the senders' legs, then the receivers': each with its flow's deps and step
        assert moved.src_gpu[i] == old.src_gpu[i] + 1 and moved.dst_gpu[i] == old.dst_gpu[i]
        assert (moved.src_gpu[n + i], moved.dst_gpu[n + i]) == (old.src_gpu[i], old.src_gpu[i] + 1)
        assert (moved.src_gpu[2 * n + i], moved.dst_gpu[2 * n + i]) == (old.dst_gpu[i] + 1, old.dst_gpu[i])
        for leg in (n + i, 2 * n + i):
            assert deps(moved, leg) == deps(old, i) and moved.group[leg] == old.group[i]


def test_leaf_failures_that_cut_a_host_off_or_every_common_rail_are_refused():
    whole_hosts = build(
        FatTreeSpec(num_hosts=4, gpus_per_host=4, nics_per_host=4, nic_bytes_per_s=RATE, scaleup_bytes_per_s=RATE,
                    radix=8, rail_optimized=False)
    )  # fmt: skip
    with pytest.raises(ClusterSimError, match="every NIC of host") as err:
        fail_job_leaves(whole_hosts, np.array([0, 1]), 1)
    assert err.value.field == "fail_leaves"
    with pytest.raises(ClusterSimError, match="sit on 2 leaves; cannot fail 3"):
        fail_job_leaves(whole_hosts, np.array([0, 1]), 3)
    with pytest.raises(ClusterSimError, match="at least 0"):
        fail_job_leaves(whole_hosts, np.array([0, 1]), -1)
    # 3 NICs a host on 4-port leaves: leaf 1 holds host 1's NICs 1-2 and host 2's NICs 0-1, so host 1
    # keeps GPU 0's rail and host 2 GPU 2's: no rail is up at both.
    odd = build(
        FatTreeSpec(num_hosts=4, gpus_per_host=3, nics_per_host=3, nic_bytes_per_s=RATE, scaleup_bytes_per_s=RATE,
                    radix=8, rail_optimized=False)
    )  # fmt: skip
    odd = odd.with_failures(leaf_links(odd, 1))
    with pytest.raises(ClusterSimError, match="no GPU of host 1 has its rails up both there and on host 2"):
        pxn_flows(odd, independent(np.array([3]), np.array([6]), np.array([RATE])))
