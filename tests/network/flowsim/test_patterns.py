"""Point-to-point patterns on small fat-trees, against bounds counted by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.network.flowsim.failover import fail_job_leaves
from clustersim.network.flowsim.patterns import (
    Pattern,
    all_to_all,
    endpoint_bound_s,
    incast,
    parse_pattern,
    pattern_flows,
    permutation,
    shift,
    simulate_pattern,
)
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, build

NIC = 1e9  # bytes/s per NIC port
SIZE = 1e6


def _tree(hosts: int, radix: int, *, gpus: int = 1, nics: int = 1, oversubscription: float = 1.0) -> FatTree:
    return build(
        FatTreeSpec(
            num_hosts=hosts,
            gpus_per_host=gpus,
            nics_per_host=nics,
            nic_bytes_per_s=NIC,
            scaleup_bytes_per_s=100 * NIC,
            radix=radix,
            oversubscription=oversubscription,
        )
    )


def test_a_permutation_is_a_seeded_derangement_and_reaches_line_rate_on_a_non_blocking_tree_with_spray():
    tree = _tree(16, 8)  # 4 leaves of 4 hosts, 4 spines: 1:1
    hosts = np.arange(16)
    plan = permutation(tree, hosts, SIZE, seed=5)
    src, dst = plan.flows.src_gpu, plan.flows.dst_gpu
    assert sorted(src) == sorted(dst) == list(range(16)) and not np.any(src == dst)
    assert np.array_equal(dst, permutation(tree, hosts, SIZE, seed=5).flows.dst_gpu)
    assert not np.array_equal(dst, permutation(tree, hosts, SIZE, seed=6).flows.dst_gpu)
    result = simulate_pattern(tree, hosts, plan, routing=Routing.SPRAY)
    assert result.ideal_s == pytest.approx(SIZE / NIC, rel=1e-12)  # one flow per NIC each way
    assert result.time_s == pytest.approx(SIZE / NIC, rel=1e-9) and result.slowdown == pytest.approx(1, rel=1e-9)
    assert result.p50_s == pytest.approx(SIZE / NIC, rel=1e-9)
    assert result.throughput_bytes_per_s == pytest.approx(16 * NIC, rel=1e-9)  # every NIC at line rate
    assert result.links.max_link_utilization == pytest.approx(1, rel=1e-9)


def test_ecmp_on_a_shift_collides_as_balls_into_bins_and_spray_does_not():
    # 8 rails, each on its own pair of leaves (8 hosts a leaf, 8 spines); shift 8 sends every flow
    # across the pair: per rail and direction 8 flows hashed onto 8 uplinks. A flow alone on its
    # spine finishes at line rate; P(alone) = (1 - 1/8)^7 for each flow.
    tree = _tree(16, 16, gpus=8, nics=8)
    hosts = np.arange(16)
    plan = shift(tree, hosts, SIZE, 8)
    alone, slow = [], []
    for seed in range(40):
        r = simulate_pattern(tree, hosts, plan, routing=Routing.ECMP, seed=seed)
        alone.append(np.isclose(r.flow_end_s, SIZE / NIC, rtol=1e-9).mean())
        slow.append(r.slowdown)
    assert np.mean(alone) == pytest.approx((7 / 8) ** 7, abs=0.02)
    assert min(slow) >= 2 - 1e-9  # 32 bins of 8 balls each: some spine gets 2 or more every time
    sprayed = simulate_pattern(tree, hosts, plan, routing=Routing.SPRAY)
    assert sprayed.slowdown == pytest.approx(1, rel=1e-9) and sprayed.links.binding_tier in ("nic->leaf", "leaf->nic")


def test_a_shift_keeps_every_gpu_on_its_rail_and_host_h_sends_to_h_plus_k():
    tree = _tree(8, 8, gpus=4, nics=4)
    plan = shift(tree, np.arange(8), SIZE, 3)
    src, dst = plan.flows.src_gpu, plan.flows.dst_gpu
    assert np.array_equal(dst // 4, (src // 4 + 3) % 8) and np.array_equal(dst % 4, src % 4)


def test_incast_takes_n_times_the_size_over_the_receivers_rail_bandwidth():
    tree = _tree(8, 64, gpus=8, nics=32)  # p5-like: 4 rails of NIC per GPU
    hosts = np.arange(8)
    gpu_rails = 4 * NIC
    for senders, on_rail in ((3, 3), (7, 7), (10, 7)):  # beyond 7 the senders are on rail 1 of host 0
        plan = incast(tree, hosts, SIZE, senders)
        assert plan.flows.num_flows == senders and np.all(plan.flows.dst_gpu == 0)
        r = simulate_pattern(tree, hosts, plan)
        assert r.time_s == pytest.approx(on_rail * SIZE / gpu_rails, rel=1e-9)
        assert r.slowdown == pytest.approx(1, rel=1e-9) and r.links.binding_tier == "leaf->nic"
    spread = incast(tree, hosts, SIZE, 7).flows.src_gpu
    assert np.array_equal(spread // 8, np.arange(1, 8)) and np.all(spread % 8 == 0)  # one per host, on rail 0
    everyone = incast(tree, hosts, SIZE, 63).flows.src_gpu
    assert sorted(everyone) == list(range(1, 64)) and np.all(everyone[-7:] // 8 == 0)  # own host last


def test_all_to_all_on_a_2_to_1_spine_is_bound_by_the_spine():
    # 16 hosts, 4 leaves of 4: each host sends 15 flows (12 off its leaf). 1:1 (4 uplinks a leaf):
    # the NIC binds, 15 x size / NIC. 2:1 (2 uplinks): a leaf sends 4 x 12 flows over 2 links,
    # 24 x size / NIC.
    hosts = np.arange(16)
    flat = _tree(16, 8)
    thin = _tree(16, 8, oversubscription=2)
    plan = all_to_all(flat, hosts, SIZE)
    assert plan.flows.num_flows == 16 * 15
    full = simulate_pattern(flat, hosts, plan)
    assert full.time_s == pytest.approx(15 * SIZE / NIC, rel=1e-9) and full.slowdown == pytest.approx(1, rel=1e-9)
    half = simulate_pattern(thin, hosts, plan)
    assert half.ideal_s == pytest.approx(15 * SIZE / NIC, rel=1e-12)
    assert half.time_s == pytest.approx(24 * SIZE / NIC, rel=1e-9) and half.slowdown == pytest.approx(1.6, rel=1e-9)
    assert half.links.binding_tier == "leaf->spine" and half.links.hottest_links[0][0].startswith("leaf ")


def test_the_endpoint_bound_counts_nic_ports_and_scale_up_ports_by_hand():
    tree = _tree(2, 8, gpus=2, nics=1)  # two GPUs share one NIC
    flows = pattern_flows(tree, np.arange(2), Pattern.SHIFT, SIZE).flows  # GPUs 0,1 -> 2,3 and back
    assert endpoint_bound_s(tree, flows) == pytest.approx(2 * SIZE / NIC)  # two flows through each NIC port
    local = incast(tree, np.arange(1), SIZE, 1).flows  # GPU 1 -> GPU 0 over NVLink
    assert endpoint_bound_s(tree, local) == pytest.approx(SIZE / (100 * NIC))


def test_the_same_seed_gives_the_same_result_and_a_failed_leaf_still_completes():
    tree = _tree(16, 8, gpus=2, nics=2)
    hosts = np.arange(16)

    def run(seed: int, t: FatTree = tree) -> dict[str, object]:
        plan = pattern_flows(t, hosts, Pattern.PERMUTATION, SIZE, seed=seed)
        return simulate_pattern(t, hosts, plan, routing=Routing.ECMP, seed=seed).to_dict()

    assert run(3) == run(3) and run(3) != run(4)
    broken = fail_job_leaves(tree, hosts, 1, seed=0)
    out = run(3, broken)  # GPUs whose rail is down send through their peer's (PXN)
    assert out["num_flows"] == 32 and float(out["slowdown"]) >= 1 - 1e-9  # type: ignore[arg-type]


@settings(max_examples=15, deadline=None)
@given(
    pattern=st.sampled_from(list(Pattern)),
    routing=st.sampled_from(list(Routing)),
    num_hosts=st.integers(2, 6),
    oversubscription=st.sampled_from([1.0, 2.0]),
    seed=st.integers(0, 1000),
)
def test_no_pattern_beats_the_non_blocking_bound(
    pattern: Pattern, routing: Routing, num_hosts: int, oversubscription: float, seed: int
) -> None:
    tree = _tree(8, 4, gpus=2, nics=2, oversubscription=oversubscription)
    hosts = np.random.default_rng(seed).choice(8, size=num_hosts, replace=False)
    r = simulate_pattern(tree, hosts, pattern_flows(tree, hosts, pattern, SIZE, seed=seed), routing=routing, seed=seed)
    assert r.slowdown >= 1 - 1e-9 and r.p50_s <= r.p99_s <= r.time_s
    assert r.throughput_bytes_per_s == pytest.approx(r.num_flows * SIZE / r.time_s)


def test_bad_input_is_refused_naming_the_field_and_what_is_valid():
    tree = _tree(4, 8, gpus=2, nics=2)
    hosts = np.arange(4)
    with pytest.raises(UnknownNameError, match="all_to_all, incast, permutation, shift"):
        parse_pattern("ring")
    assert parse_pattern("All-To-All") is Pattern.ALL_TO_ALL and parse_pattern("alltoall") is Pattern.ALL_TO_ALL
    for k in (0, 4, -1):
        with pytest.raises(ClusterSimError, match=rf"shift must be between 1 and 3 .*got {k}") as err:
            shift(tree, hosts, SIZE, k)
        assert err.value.field == "shift"
    for n in (0, 8):
        with pytest.raises(ClusterSimError, match=rf"senders must be between 1 and 7 .*got {n}"):
            incast(tree, hosts, SIZE, n)
    with pytest.raises(ClusterSimError, match="senders applies to the incast pattern only"):
        pattern_flows(tree, hosts, Pattern.PERMUTATION, SIZE, senders=2)
    with pytest.raises(ClusterSimError, match="shift applies to the shift pattern only"):
        pattern_flows(tree, hosts, Pattern.INCAST, SIZE, k=2)
    with pytest.raises(ClusterSimError, match="a shift needs at least 2 hosts, the job has 1"):
        shift(tree, np.arange(1), SIZE, 1)
    with pytest.raises(ClusterSimError, match="at least 2 GPUs"):
        permutation(_tree(1, 8), np.arange(1), SIZE)
    with pytest.raises(ClusterSimError, match="size must be positive"):
        permutation(tree, hosts, 0.0)
    big = _tree(1456, 8)
    with pytest.raises(ClusterSimError, match=r"2,118,480 flows, more than 2,097,152") as err:
        all_to_all(big, np.arange(1456), SIZE)
    assert err.value.field == "nodes"
