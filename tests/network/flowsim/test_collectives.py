"""Collectives as flows against the analytic model on a non-blocking, sprayed fat-tree, the cost
model seam, and determinism."""

from __future__ import annotations

import dataclasses
import functools
import json

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import (
    _BASE_US,
    _NET_US,
    _NVLINK_US,
    candidates,
    default_calibration,
    predict_collective,
)
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.cost import ANALYTIC, cost_model
from clustersim.network.flowsim.cluster import Placement, fail_job_links, fat_tree_for_instance, place
from clustersim.network.flowsim.collectives import TREE_PIECE_BYTES, btree_parents, collective_flows
from clustersim.network.flowsim.cost import SIM, SimCost
from clustersim.network.flowsim.engine import run
from clustersim.network.flowsim.nccl import SIMPLE, LinkModel, price_terms
from clustersim.network.flowsim.results import simulate_collective
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.topology import fabric_for_instance

from .test_hierarchical import NIC, _tree

# These tests check the link-bound view: datasheet links, no latency (``ideal``, ``--ideal``).
simulate_collective = functools.partial(simulate_collective, ideal=True)

CATALOG = load_catalog(use_env=False)
GIB = float(1 << 30)


@pytest.mark.parametrize(
    ("op", "algorithm", "nodes"),
    [
        (Op.ALL_REDUCE, Algorithm.RING, 2),
        (Op.ALL_REDUCE, Algorithm.RING, 64),
        (Op.ALL_GATHER, Algorithm.RING, 16),
        (Op.REDUCE_SCATTER, Algorithm.RING, 4),
        (Op.ALL_REDUCE, Algorithm.TREE, 4),
        (Op.ALLTOALL, Algorithm.PAIRWISE, 2),
        (Op.ALLTOALL, Algorithm.PAIRWISE, 16),
        (Op.SENDRECV, Algorithm.DIRECT, 4),
    ],
)
def test_sprayed_non_blocking_simulation_matches_the_analytic_model(op: Op, algorithm: Algorithm, nodes: int):
    """Like with like: the sim cost applies the analytic model's efficiencies to the links and takes its
    latency and ramp, so at 1 GiB the two differ only in the bandwidth term; on a non-blocking
    sprayed fabric they agree within 5%. (Tree: from 4 nodes, where the network binds; below, the
    analytic model's NVLink bound for a tree, half the NVLink bandwidth, is a rule of thumb.)"""
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", nodes)
    sizes = np.array([GIB])
    analytic = ANALYTIC.table(op, sizes, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE).time_s[0]
    simulated = SIM.table(op, sizes, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE).time_s[0]
    assert simulated == pytest.approx(analytic, rel=0.05)


def test_the_sim_cost_model_is_registered_and_chooses_among_its_algorithms():
    assert cost_model("sim") is SIM
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 4)
    sizes = np.array([1e3, 1e6, 1e9])
    table = SIM.table(Op.ALL_REDUCE, sizes, fabric)
    # As the analytic model (NCCL's tuner) on p5: NVLS tree for the large all-reduce.
    assert table.algorithm == ANALYTIC.table(Op.ALL_REDUCE, sizes, fabric).algorithm
    assert table.algorithm[-1] is Algorithm.NVLSTREE
    assert np.array_equal(SIM.time_s(Op.ALL_REDUCE, sizes, fabric), table.time_s)
    assert np.all(np.diff(table.time_s) > 0)
    with pytest.raises(ClusterSimError, match="no algorithm for broadcast"):
        SIM.time_s(Op.BROADCAST, sizes, fabric)


def test_a_2_to_1_fabric_slows_the_sim_cost_of_a_cross_spine_alltoall():
    """128 p5 nodes: leaves of 32 hosts per rail, 4 per rail. The all-to-all runs as rounds of shift
    i (host a to a + i); the cost model simulates 4 of the 127, shifts 1, 32, 64 and 96. At 2:1 a
    leaf has 16 uplinks for its 32 NICs: shift 1 sends 1 host's traffic up (no slower), the others
    all 32 (twice as long), so the time grows by (1 + 2 + 2 + 2) / 4 = 1.75 (all 127 shifts:
    207 / 127 = 1.63)."""
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 128)
    size = np.array([GIB])
    full = SimCost().table(Op.ALLTOALL, size, fabric, protocol=Protocol.SIMPLE).time_s[0]
    half = SimCost(oversubscription=2).table(Op.ALLTOALL, size, fabric, protocol=Protocol.SIMPLE).time_s[0]
    assert half / full == pytest.approx(1.75, rel=0.02)


def test_the_double_binary_tree_is_ncclgetdtree():
    first, second = btree_parents(8)
    # NCCL's btree over 8 ranks: 0 -> 4 is the root's child; odd ranks are leaves.
    assert first.tolist() == [-1, 2, 4, 2, 0, 6, 4, 6]
    assert second.tolist() == [1, 3, 1, 7, 5, 3, 5, -1]  # mirrored (8 is even)
    # Each rank is interior in at most one tree, so the two trees share the links evenly.
    assert not set(first[first >= 0].tolist()) & set(second[second >= 0].tolist())


def test_the_same_seed_gives_the_same_bytes_and_ecmp_depends_on_it():
    tree = fat_tree_for_instance(CATALOG, "p5.48xlarge", 16, fabric_hosts=256, oversubscription=2)
    hosts = place(tree, 16, Placement.RANDOM, seed=5)
    broken = fail_job_links(tree, hosts, 4, seed=5)

    def run(seed: int) -> str:
        result = simulate_collective(broken, hosts, Op.ALLTOALL, GIB, routing=Routing.ECMP, seed=seed, max_steps=2)
        return json.dumps(result.to_dict(), sort_keys=True)

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_a_collective_reports_its_binding_tier_and_hottest_links():
    tree = fat_tree_for_instance(CATALOG, "p5.48xlarge", 4)
    result = simulate_collective(tree, place(tree, 4), Op.ALL_REDUCE, GIB, max_steps=2)
    assert result.binding_tier == "nic->leaf"
    assert result.max_link_utilization == pytest.approx(1.0)
    assert result.busbw_bytes_per_s == pytest.approx(400e9, rel=1e-6)  # 32 x 100 Gb/s, line rate
    assert result.extrapolated and result.steps_total == 2 * (32 - 1)
    assert result.hottest_links[0][1] == pytest.approx(1.0)


def test_an_unsupported_algorithm_is_refused_with_the_valid_ones():
    tree = fat_tree_for_instance(CATALOG, "p5.48xlarge", 2)
    with pytest.raises(ClusterSimError, match="runs all_gather as ring, not tree"):
        simulate_collective(tree, place(tree, 2), Op.ALL_GATHER, GIB, algorithm=Algorithm.TREE)


@pytest.mark.parametrize(
    ("hosts", "gpus", "op", "size", "algorithm", "max_steps", "message", "field", "value"),
    [
        (2, 2, Op.ALL_REDUCE, GIB, Algorithm.PAIRWISE, 4,
         "the flow simulator runs all_reduce as ring, tree, hierarchical, nvls, nvlstree, not pairwise",
         "algorithm", "pairwise"),
        (2, 2, Op.ALL_REDUCE, 0.0, Algorithm.RING, 4, "size must be positive, got 0.0", "size", 0.0),
        (2, 2, Op.ALL_REDUCE, GIB, Algorithm.RING, 0, "max_steps must be at least 1, got 0", "max_steps", 0),
        (1, 1, Op.ALL_REDUCE, GIB, Algorithm.RING, 4, "a collective needs at least 2 GPUs", "nodes", 1),
    ],
)  # fmt: skip
def test_a_collective_the_flow_simulator_cannot_build_is_refused_by_message_field_and_value(
    hosts, gpus, op, size, algorithm, max_steps, message, field, value
):
    with pytest.raises(ClusterSimError) as refused:
        collective_flows(_tree(hosts, gpus=gpus), np.arange(hosts), op, size, algorithm, max_steps=max_steps)
    assert str(refused.value) == message
    assert (refused.value.field, refused.value.value) == (field, value)


def test_the_edges_of_a_flow_collective_s_inputs_are_accepted():
    """Half a byte, one simulated step, two GPUs on one host."""
    plan = collective_flows(_tree(1, gpus=2), np.arange(1), Op.ALL_REDUCE, 0.5, Algorithm.RING, max_steps=1)
    assert plan.num_steps == 1 and plan.flows.size_bytes.sum() == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("instance", "nodes", "algorithm"),
    [
        ("p5.48xlarge", 2, Algorithm.RING),
        ("p5.48xlarge", 4, Algorithm.TREE),
        ("p5.48xlarge", 2, Algorithm.HIERARCHICAL),
        ("p5.48xlarge", 4, Algorithm.NVLSTREE),
        ("p4d.24xlarge", 4, Algorithm.RING),
        ("p4d.24xlarge", 2, Algorithm.TREE),
    ],
)
def test_analytic_and_simulated_cost_share_the_analytic_latency_at_small_sizes(
    instance: str, nodes: int, algorithm: Algorithm
):
    """At 8 bytes the collective is its latency: the sim cost model charges the analytic model's Simple-protocol
    latency, whatever the algorithm."""
    fabric = fabric_for_instance(CATALOG, instance, nodes)
    small = np.array([8.0])
    analytic = predict_collective(Op.ALL_REDUCE, small, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE)
    simulated = SIM.table(Op.ALL_REDUCE, small, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE)
    assert simulated.time_s[0] == pytest.approx(analytic.time_s[0], rel=1e-3)


@pytest.mark.parametrize(("hosts", "factor"), [(2, 1.0), (3, 2 / 3), (5, 0.5)])
def test_the_double_binary_tree_runs_at_its_busiest_nics_pace(hosts: int, factor: float):
    """NVLink 10x a rail: per piece, a host's rail sends up and down both trees, 2 pieces at 2
    hosts, 3 at the busiest of 3, 4 from 4 hosts (interior: up once, down twice): algbw = factor x
    the host's network (analytic ``_tree_factor``)."""
    rate, gpus = 50e9, 2
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=gpus,
        nics_per_host=gpus,
        nic_bytes_per_s=rate,
        scaleup_bytes_per_s=10 * gpus * rate,
        radix=8,
    )
    tree = build(spec)
    result = simulate_collective(tree, np.arange(hosts), Op.ALL_REDUCE, 64 * GIB, algorithm=Algorithm.TREE, chunks=2)
    assert result.algbw_bytes_per_s == pytest.approx(factor * gpus * rate, rel=2e-3)


@pytest.mark.parametrize("gpus", [2, 4])
def test_one_tree_piece_crosses_the_child_s_chain_the_rail_up_the_root_s_chain_down_and_back(gpus: int):
    """Two hosts of g GPUs, one 512 KiB piece p per tree and channel: each tree's child host reduces along its chain
    (g - 1 NVLink hops), sends up its rail, the root reduces along its own chain, sends down, and the child
    broadcasts back along its chain: 3 (g - 1) p / nvlink + 2 p / nic, the two trees on opposite hosts never
    sharing a port."""
    nic, nvlink = NIC, 400e9
    piece = float(TREE_PIECE_BYTES)
    size = 2 * gpus * piece
    result = simulate_collective(
        _tree(2, gpus=gpus, nvlink=nvlink), np.arange(2), Op.ALL_REDUCE, size, algorithm=Algorithm.TREE, chunks=8
    )
    assert result.time_s == pytest.approx(3 * (gpus - 1) * piece / nvlink + 2 * piece / nic, rel=1e-9)


def test_one_piece_climbs_and_descends_both_trees_of_four_hosts():
    """Four hosts of one GPU, one piece p per tree (u = p / nic): the trees are 0 <- 2 <- {1, 3} and 3 <- 1 <- {0, 2}.
    Both leaves of each tree send into its middle node at once (2u on that node's ingress), the middle nodes send
    up to the roots (u), the roots down to them (u), and each middle node sends down to its two leaves at once (2u on
    its egress): 6u."""
    nic = NIC
    piece = float(TREE_PIECE_BYTES)
    rails = _tree(4, gpus=1, nvlink=400e9)
    one = simulate_collective(rails, np.arange(4), Op.ALL_REDUCE, 2 * piece, algorithm=Algorithm.TREE, chunks=8)
    assert one.time_s == pytest.approx(6 * piece / nic, rel=1e-9)


@pytest.mark.parametrize(("gpus", "nvlink"), [(2, 50e9), (2, 400e9), (4, 400e9)])
def test_one_tree_piece_runs_the_length_of_both_three_host_paths(gpus: int, nvlink: float):
    """Three hosts: both trees are paths (1 -> 2 -> 0 and 2 -> 0 -> 1) whose stages never share a port. Per tree and
    channel one piece p: the leaf's chain, up, the middle host's chain (once the leaf's sum is in), up, the root's
    chain, down twice and the leaf's chain back: 4 (g - 1) p / nvlink + 4 p / nic (the middle host's chain back runs
    beside the second down)."""
    nic, piece = NIC, float(TREE_PIECE_BYTES)
    rails = _tree(3, gpus=gpus, nvlink=nvlink)
    result = simulate_collective(
        rails, np.arange(3), Op.ALL_REDUCE, 2 * gpus * piece, algorithm=Algorithm.TREE, chunks=8
    )
    assert result.time_s == pytest.approx(4 * (gpus - 1) * piece / nvlink + 4 * piece / nic, rel=1e-9)


def test_a_sendrecv_hands_each_rank_s_data_to_the_same_gpu_of_the_next_host_or_the_next_gpu_on_one_host():
    rails = _tree(3, gpus=2, nvlink=400e9)
    plan = collective_flows(rails, np.array([0, 1, 2]), Op.SENDRECV, GIB, Algorithm.DIRECT)
    assert (plan.op, plan.algorithm, plan.num_steps, plan.total_steps) == (Op.SENDRECV, Algorithm.DIRECT, 1, 1)
    assert plan.flows.src_gpu.tolist() == [0, 1, 2, 3, 4, 5]
    assert plan.flows.dst_gpu.tolist() == [2, 3, 4, 5, 0, 1]
    two_hosts = collective_flows(_tree(2, gpus=2, nvlink=400e9), np.array([0, 1]), Op.SENDRECV, GIB, Algorithm.DIRECT)
    assert two_hosts.flows.dst_gpu.tolist() == [2, 3, 0, 1]
    one_host = collective_flows(_tree(1, gpus=4, nvlink=400e9), np.array([0]), Op.SENDRECV, GIB, Algorithm.DIRECT)
    assert one_host.flows.dst_gpu.tolist() == [1, 2, 3, 0]


def test_a_ring_rank_sends_each_step_once_it_has_received_the_last_and_sent_its_own():
    """Eight hosts of one GPU in a shuffled ring order on a 2:1 tree with ECMP, so the ring's flows collide on uplinks
    and run at different rates: every flow of step k starts exactly when the flow into its sender and the sender's
    own flow of step k - 1 have both arrived."""
    spec = FatTreeSpec(
        num_hosts=8, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=50e9, scaleup_bytes_per_s=400e9, radix=8,
        oversubscription=2.0,
    )  # fmt: skip
    tree = build(spec)
    ring = np.array([2, 4, 3, 6, 5, 0, 1, 7])
    plan = collective_flows(tree, ring, Op.ALL_REDUCE, GIB, Algorithm.RING, max_steps=4)
    times = run(tree, plan.flows, route(tree, plan.flows.src_gpu, plan.flows.dst_gpu, Routing.ECMP, 3))
    start = times.start_s.reshape(plan.num_steps, -1)
    end = times.end_s.reshape(plan.num_steps, -1)
    assert np.ptp(end[0]) > 0  # the rates differ: the test can tell one predecessor from another
    ready = np.maximum(np.roll(end, 1, axis=1), end)[:-1]  # ring position j - 1 sends into position j
    assert start[1:] == pytest.approx(ready, rel=1e-12)


def test_the_sim_prices_an_algorithm_s_latency_and_ramp_as_the_analytic_model_s_simple_protocol():
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 4)
    simple = next(
        c for c in candidates(Op.ALL_REDUCE, fabric) if c.algorithm is Algorithm.RING and c.protocol is Protocol.SIMPLE
    )
    assert simple.latency_s > 0 and simple.ramp_bytes > 0
    assert price_terms(fabric, Op.ALL_REDUCE, Algorithm.RING) == (simple.latency_s, simple.ramp_bytes)
    others = [c for c in candidates(Op.ALL_REDUCE, fabric) if c.algorithm is Algorithm.RING]
    assert any(c.latency_s != simple.latency_s for c in others)  # another protocol would price it otherwise
    assert price_terms(fabric, Op.ALL_GATHER, Algorithm.TREE) == (0.0, 0.0)  # no such candidate
    assert price_terms(fabric_for_instance(CATALOG, "trn1.32xlarge", 2), Op.ALL_REDUCE, Algorithm.RING) == (0.0, 0.0)


def test_an_all_to_all_sends_inside_the_host_then_round_by_round_each_gpu_after_its_last():
    """One host of four GPUs: each sends S / 4 to each other over NVLink, 3 S / 4 / nvlink in one step. Three hosts of
    two GPUs (and of one): the NVLink pairs (none), then two network rounds (to the next host and the one after),
    each GPU's second round starting exactly when its first has arrived."""
    nvlink = 400e9
    one = simulate_collective(
        _tree(1, gpus=4, nvlink=nvlink), np.arange(1), Op.ALLTOALL, GIB, algorithm=Algorithm.PAIRWISE
    )
    assert one.time_s == pytest.approx(3 * GIB / 4 / nvlink, rel=1e-9)
    rails = _tree(3, gpus=2, nvlink=nvlink)
    plan = collective_flows(rails, np.arange(3), Op.ALLTOALL, GIB, Algorithm.PAIRWISE)
    assert (plan.num_steps, plan.total_steps) == (2, 2)
    intra = [(int(s), int(d)) for s, d in zip(plan.flows.src_gpu[:6], plan.flows.dst_gpu[:6], strict=True)]
    assert intra == [(0, 1), (1, 0), (2, 3), (3, 2), (4, 5), (5, 4)]
    times = run(rails, plan.flows, route(rails, plan.flows.src_gpu, plan.flows.dst_gpu, Routing.SPRAY, 0))
    first, second = times.end_s[6:12], times.start_s[12:18]
    assert second == pytest.approx(first, rel=1e-12) and first.min() > times.end_s[:6].max()
    single = _tree(3, gpus=1, nvlink=nvlink)  # one GPU a host: no NVLink part, the rounds alone
    plan = collective_flows(single, np.arange(3), Op.ALLTOALL, GIB, Algorithm.PAIRWISE)
    times = run(single, plan.flows, route(single, plan.flows.src_gpu, plan.flows.dst_gpu, Routing.SPRAY, 0))
    assert plan.flows.src_gpu.size == 6 and times.start_s[3:] == pytest.approx(times.end_s[:3], rel=1e-12)


@pytest.mark.parametrize("instance", ["p5.48xlarge", "p4d.24xlarge"])
def test_nccl_s_latencies_make_a_small_tree_all_reduce_its_critical_path(instance: str):
    """8 bytes on two hosts with NCCL's latencies: a tree piece crosses the child's chain, the root's and the child's
    chain back (3 (g - 1) NVLink hops), up and down (two network hops, each NCCL's plus the adapter's, twice where
    a Simple hop flushes), after NCCL's base latency; ring and hierarchical pay the analytic model's latency, which
    bounds their simulated structure."""
    nodes = 2
    tree = fat_tree_for_instance(CATALOG, instance, nodes)
    spec = tree.spec
    adapter_us = spec.adapter_latency_s * 1e6 * (2 if spec.network_flush else 1)
    hops_us = 3 * (spec.gpus_per_host - 1) * _NVLINK_US[Algorithm.TREE][SIMPLE] + 2 * (
        _NET_US[Algorithm.TREE][SIMPLE] + adapter_us
    )
    small = simulate_collective(tree, np.arange(nodes), Op.ALL_REDUCE, 8.0, algorithm=Algorithm.TREE, ideal=False)
    # (8 bytes' own transfer adds under a nanosecond)
    assert small.time_s == pytest.approx((_BASE_US[Algorithm.TREE][SIMPLE] + hops_us) * 1e-6, rel=1e-5)
    fabric = fabric_for_instance(CATALOG, instance, nodes)
    for algorithm in (Algorithm.RING, Algorithm.HIERARCHICAL):
        analytic = predict_collective(
            Op.ALL_REDUCE, np.array([8.0]), fabric, algorithm=algorithm, protocol=Protocol.SIMPLE
        )
        result = simulate_collective(tree, np.arange(nodes), Op.ALL_REDUCE, 8.0, algorithm=algorithm, ideal=False)
        assert result.time_s == pytest.approx(analytic.time_s[0], rel=1e-3)


def test_where_nccl_s_ramp_binds_the_simulated_ring_is_the_analytic_one():
    """Four p4d hosts (400 Gb/s for 8 A100s): from 64 KiB to 256 MiB the fitted Simple ramp, priced on the job's own
    fabric (its NICs, NVLink and family), is slower than the simulated structure, so the answer is the analytic
    model's time."""
    fabric, tree = fabric_for_instance(CATALOG, "p4d.24xlarge", 4), fat_tree_for_instance(CATALOG, "p4d.24xlarge", 4)
    for size in (2.0**16, 2.0**24, 2.0**28):
        analytic = predict_collective(
            Op.ALL_REDUCE, np.array([size]), fabric, algorithm=Algorithm.RING, protocol=Protocol.SIMPLE
        )
        result = simulate_collective(tree, np.arange(4), Op.ALL_REDUCE, size, algorithm=Algorithm.RING, ideal=False)
        assert result.time_s == pytest.approx(analytic.time_s[0], rel=1e-9)


def test_the_fitted_ramp_slows_the_bandwidth_term_by_the_calibration_s_exponent():
    """``priced_s``: latency + bandwidth x (1 + (S_half / S) ^ p), p the calibration's (the packaged one by default,
    the model's own where it has one); no ramp without a half size; sizes under a byte priced as one byte."""
    packaged = default_calibration()
    model = LinkModel("calibrated")
    assert model.priced_s(1e-5, 4096.0, 1024.0, 2e-6) == pytest.approx(1e-5 + 2e-6 * (1 + 4.0**packaged.ramp_exponent))
    assert model.priced_s(1e-5, 0.0, 1024.0, 2e-6) == pytest.approx(1e-5 + 2e-6)
    assert model.priced_s(0.0, 4.0, 0.5, 1.0) == pytest.approx(1 + 4.0**packaged.ramp_exponent)
    steeper = LinkModel("calibrated", calibration=dataclasses.replace(packaged, ramp_exponent=2.0))
    assert steeper.priced_s(1e-5, 4096.0, 1024.0, 2e-6) == pytest.approx(1e-5 + 2e-6 * 17.0)
