"""Each (algorithm, protocol) of the collective model against its closed form on hand-built fabrics.

The fabrics are written out (devices per node, nodes, NVLink per device and direction, network per node
and direction) rather than read from the catalog. The NCCL constants are the tuner's tables
(``src/graph/tuning.cc``, NCCL 2.30), in microseconds:

=========  ============  ===================  ===================  =====================
algorithm  protocol      base latency         per NVLink hop       per network hop
=========  ============  ===================  ===================  =====================
ring       LL/LL128/S    6.6 / 14.0 / 8.4     0.6 / 1.9 / 3.4      2.7 / 4.0 / 14.0
tree       LL/LL128/S    6.8 / 14.0 / 8.4     0.6 / 1.25 / 4.0     5.0 / 8.5 / 14.0
=========  ============  ===================  ===================  =====================

plus NVLS (25 us over NVLink), NVLSTree (25 + 2 log2(nodes) x 20.9 us), the network overhead of a
multi-node ring hop (2 us, x3 for Simple), and 0.5 us per peer of a pairwise all-to-all. The achieved
fractions of the links and the Simple-protocol ramp come from the calibration (``DEFAULT_CALIBRATION``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.network import Algorithm, Op, Protocol, busbw_factor, parse_op, predict_collective
from clustersim.network.analytic import DEFAULT_CALIBRATION, collective_time_s
from clustersim.network.fabric import Fabric

CAL = DEFAULT_CALIBRATION
REL = 1e-9
US = 1e-6
NVLINK = 450e9  # per device and direction (H100 NVLink 4)
NET = 200e9  # per node and direction (8 x 200 Gb/s HDR InfiniBand): below NVLink, so rings are network-bound


def fabric(per_node: int, nodes: int, *, nvlink: float = NVLINK, net: float = NET, sharp: bool = False) -> Fabric:
    return Fabric("hand", per_node, nodes, nvlink, net, sharp)


def simple(latency_us: float, algbw: float, size: float, half: float) -> float:
    """Simple (and LL128) time: latency + S / algbw x (1 + (S_half / S) ** p), S_half in bytes whatever
    the bandwidth (at S = S_half the transfer takes twice its bandwidth time)."""
    return latency_us * US + size / algbw * (1 + (half / size) ** CAL.ramp_exponent)


def ll(latency_us: float, algbw: float, size: float) -> float:
    """LL time: no ramp."""
    return latency_us * US + size / algbw


def forced(op: Op, size: float, fab: Fabric, algorithm: Algorithm, protocol: Protocol):
    table = predict_collective(op, size, fab, algorithm=algorithm, protocol=protocol)
    return float(table.time_s[0]), table


NVLINK_EFF = CAL.nvlink_efficiency * NVLINK  # 0.824 x 450 = 370.8 GB/s
NET_EFF = CAL.network_efficiency * NET  # 0.97 x 200 = 194 GB/s
INTRA_RAMP = CAL.ramp_intra_node_bytes
GIB = 2.0**30


def test_collective_names_and_busbw_factors():
    aliases = {
        "allreduce": Op.ALL_REDUCE,
        "allgather": Op.ALL_GATHER,
        "reducescatter": Op.REDUCE_SCATTER,
        "all_to_all": Op.ALLTOALL,
        "all-to-all": Op.ALLTOALL,
        "send_recv": Op.SENDRECV,
        "p2p": Op.SENDRECV,
        " Reduce-Scatter ": Op.REDUCE_SCATTER,
        "broadcast": Op.BROADCAST,
    }
    for name, op in aliases.items():
        assert parse_op(name) is op, name
    with pytest.raises(UnknownNameError, match=r"^unknown collective 'gather'"):
        parse_op("gather")
    # nccl-tests: busbw = algbw x 2 (n - 1) / n for all-reduce, (n - 1) / n for gathers and all-to-all, 1 else
    for n in (2, 3, 8, 1000):
        assert busbw_factor(Op.ALL_REDUCE, n) == 2 * (n - 1) / n
        for op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL):
            assert busbw_factor(op, n) == (n - 1) / n
        for op in (Op.BROADCAST, Op.REDUCE, Op.SENDRECV):
            assert busbw_factor(op, n) == 1.0


# ---- one node of 8 -------------------------------------------------------------------------------------


def test_one_node_ring_all_reduce_simple_ll128_and_ll():
    f = fabric(8, 1)
    factor = 2 * 7 / 8
    ring = NVLINK_EFF / factor  # algbw: every byte crosses 2 (n - 1) / n links
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 14 * 3.4, ring, GIB, INTRA_RAMP), rel=REL)  # 2 (n - 1) = 14 hops
    assert table.bound == ["NVLink"]
    assert table.busbw_bytes_per_s[0] == pytest.approx(GIB / time * factor, rel=REL)
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.LL128)
    assert time == pytest.approx(simple(14.0 + 14 * 1.9, 0.92 * ring, GIB, INTRA_RAMP), rel=REL)
    # LL: half the bandwidth, capped at NCCL's 141 GB/s busbw on one Hopper node; no ramp.
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.LL)
    assert min(0.5 * ring, 141e9 / factor) == 141e9 / factor
    assert time == pytest.approx(ll(6.6 + 14 * 0.6, 141e9 / factor, GIB), rel=REL)


def test_one_node_tree_is_a_chain_at_half_the_nvlink_bandwidth():
    f = fabric(8, 1)
    chain = NVLINK_EFF / 2
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 2 * 7 * 4.0, chain, GIB, INTRA_RAMP), rel=REL)  # up and down 7 hops
    assert table.bound == ["NVLink (chain)"]
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.LL128)
    assert time == pytest.approx(simple(14.0 + 2 * 7 * 1.25, 0.92 * chain, GIB, INTRA_RAMP), rel=REL)
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.LL)
    assert time == pytest.approx(ll(6.8 + 2 * 7 * 0.6, min(0.5 * chain, 141e9 / 1.75), GIB), rel=REL)


def test_nvls_runs_at_its_own_fraction_with_a_flat_latency_on_a_reducing_switch():
    time, table = forced(Op.ALL_REDUCE, GIB, fabric(8, 1, sharp=True), Algorithm.NVLS, Protocol.SIMPLE)
    nvls = CAL.nvls_efficiency * NVLINK
    # NVLS ramps over loops of NCCL's NVLS kernel: 16 channels x 8 heads x 128 KiB (Hopper's 16 channels).
    nvls_ramp = CAL.nvls_ramp_loops * 16 * 8 * 128 * 1024
    assert time == pytest.approx(simple(25.0, nvls, GIB, nvls_ramp), rel=REL)
    assert table.bound == ["NVLink SHARP"]
    with pytest.raises(ClusterSimError, match="cannot use nvls"):
        predict_collective(Op.ALL_REDUCE, GIB, fabric(8, 1), algorithm=Algorithm.NVLS)  # no SHARP switch
    with pytest.raises(ClusterSimError, match="cannot use nvls"):
        predict_collective(Op.ALL_REDUCE, GIB, fabric(2, 1, sharp=True), algorithm=Algorithm.NVLS)  # 2 GPUs


def test_ring_busbw_approaches_the_achieved_nvlink_bandwidth_at_huge_sizes():
    size = 2.0**44
    table = predict_collective(Op.ALL_REDUCE, size, fabric(8, 1), algorithm=Algorithm.RING, protocol=Protocol.SIMPLE)
    busbw = table.busbw_bytes_per_s[0]
    assert busbw < NVLINK_EFF
    assert busbw == pytest.approx(NVLINK_EFF, rel=1e-3)  # 0.824 x 450 = 370.8 GB/s
    assert not table.busbw_exceeds_links[0]


def test_latency_terms_at_one_byte_are_the_nccl_table_sums():
    f = fabric(8, 1)
    cases = [  # (algorithm, protocol, latency in us): base + hops x per-hop latency
        (Algorithm.RING, Protocol.LL, 6.6 + 14 * 0.6),  # 15.0
        (Algorithm.RING, Protocol.LL128, 14.0 + 14 * 1.9),  # 40.6
        (Algorithm.RING, Protocol.SIMPLE, 8.4 + 14 * 3.4),  # 56.0
        (Algorithm.TREE, Protocol.LL, 6.8 + 14 * 0.6),  # 15.2
        (Algorithm.TREE, Protocol.LL128, 14.0 + 14 * 1.25),  # 31.5
        (Algorithm.TREE, Protocol.SIMPLE, 8.4 + 14 * 4.0),  # 64.4
    ]
    for algorithm, protocol, latency in cases:
        time, _ = forced(Op.ALL_REDUCE, 1.0, f, algorithm, protocol)
        if protocol is Protocol.LL:  # no ramp: latency + 1 byte at tens of GB/s
            assert time == pytest.approx(latency * US, rel=1e-6), (algorithm, protocol)
        else:  # the ramp adds a fraction of a microsecond to one byte
            assert latency * US < time < (latency + 1) * US, (algorithm, protocol)
    # Two nodes: ring hops on the network, NVLink hops at least the network overhead (2 us, 6 us for Simple).
    two = fabric(8, 2)
    time, _ = forced(Op.ALL_REDUCE, 1.0, two, Algorithm.RING, Protocol.LL)
    assert time == pytest.approx((6.6 + 28 * 2.0 + 2 * 2.7) * US, rel=1e-5)  # 68.0
    time, _ = forced(Op.ALL_REDUCE, 1.0, two, Algorithm.TREE, Protocol.LL)
    assert time == pytest.approx((6.8 + 2 * (7 * 0.6 + 1 * 5.0)) * US, rel=1e-5)  # 25.2


def test_an_empty_message_costs_as_much_as_one_byte():
    for op in (Op.ALL_REDUCE, Op.ALL_GATHER, Op.SENDRECV, Op.ALLTOALL):
        f = fabric(8, 2)
        assert predict_collective(op, 0.0, f).time_s[0] == predict_collective(op, 1.0, f).time_s[0]
        assert collective_time_s(op, 0.0, f)[0] == collective_time_s(op, 1.0, f)[0]


# ---- two nodes of 8 --------------------------------------------------------------------------------------


def test_two_node_ring_all_reduce_is_network_bound():
    f = fabric(8, 2)
    factor = 2 * 15 / 16
    ramp = CAL.ramp_bytes["reduce"] * (2 / 2) ** CAL.ramp_node_exponent["reduce"]
    # 30 steps, 2 of them across the network; NVLink hops pay the 3 x 2 us network overhead.
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 28 * 6.0 + 2 * 14.0, NET_EFF / factor, GIB, ramp), rel=REL)
    assert table.bound == ["network"]
    # LL: capped at NCCL's 22.5 GB/s busbw on 2 nodes.
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.LL)
    assert time == pytest.approx(ll(6.6 + 28 * 2.0 + 2 * 2.7, 22.5e9 / factor, GIB), rel=REL)
    with pytest.raises(ClusterSimError, match="cannot use ring/ll128"):
        predict_collective(Op.ALL_REDUCE, GIB, f, algorithm=Algorithm.RING, protocol=Protocol.LL128)


def test_ring_is_nvlink_bound_when_the_network_is_faster():
    f = fabric(8, 2, net=4e12)
    time, table = forced(Op.ALL_GATHER, GIB, f, Algorithm.RING, Protocol.SIMPLE)
    ramp = CAL.ramp_bytes["gather"] * 1.0
    assert time == pytest.approx(simple(8.4 + 14 * 6.0 + 14.0, NVLINK_EFF / (15 / 16), GIB, ramp), rel=REL)
    assert table.bound == ["NVLink"]


def test_two_node_tree_hierarchical_and_nvlstree():
    f = fabric(8, 2, sharp=True)
    ramp = CAL.ramp_bytes["reduce"]
    tree = min(NVLINK_EFF / 2, 1.0 * NET_EFF)  # tree factor 1 on two nodes
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 2 * (7 * 4.0 + 1 * 14.0), tree, GIB, ramp), rel=REL)
    assert table.bound == ["network (tree)"]
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.LL)
    assert time == pytest.approx(ll(6.8 + 2 * (7 * 0.6 + 5.0), min(0.5 * tree, 22.5e9 / 1.875), GIB), rel=REL)
    # Hierarchical: reduce-scatter + all-gather on NVLink, all-reduce of 1/8 across the 2 nodes.
    hierarchical = 1 / (2 * 7 / 8 / NVLINK_EFF + 2 * 1 / 2 / NET_EFF)
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.HIERARCHICAL, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 28 * 6.0 + 2 * 14.0, hierarchical, GIB, ramp), rel=REL)
    assert table.bound == ["NVLink then network"]
    # NVLSTree: NVLink SHARP inside, a tree across.
    nvls = CAL.nvls_efficiency * NVLINK
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.NVLSTREE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(25.0 + 2 * 1 * 20.9, min(nvls, NET_EFF), GIB, ramp), rel=REL)
    assert table.bound == ["network (tree)"]  # 194 GB/s of network under 275 GB/s of NVLS
    fast = fabric(8, 2, net=4 * NET, sharp=True)
    time, table = forced(Op.ALL_REDUCE, GIB, fast, Algorithm.NVLSTREE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(25.0 + 2 * 1 * 20.9, nvls, GIB, ramp), rel=REL)
    assert table.bound == ["NVLink SHARP"]
    with pytest.raises(ClusterSimError, match="cannot use nvlstree"):
        predict_collective(Op.ALL_REDUCE, GIB, fabric(8, 2), algorithm=Algorithm.NVLSTREE)


@pytest.mark.parametrize(("nodes", "tree_factor"), [(2, 1.0), (3, 2 / 3), (4, 0.5), (16, 0.5)])
def test_tree_factor_of_the_inter_node_bandwidth(nodes, tree_factor):
    # NVLink far faster than the network, so the tree is network-bound: tree_factor x network.
    f = fabric(8, nodes, nvlink=100 * NVLINK, sharp=True)
    ramp = CAL.ramp_bytes["reduce"] * (nodes / 2) ** CAL.ramp_node_exponent["reduce"]
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.SIMPLE)
    latency = 8.4 + 2 * (7 * 4.0 + math.log2(nodes) * 14.0)
    assert time == pytest.approx(simple(latency, tree_factor * NET_EFF, GIB, ramp), rel=REL)
    time, table = forced(Op.ALL_REDUCE, GIB, f, Algorithm.NVLSTREE, Protocol.SIMPLE)
    latency = 25.0 + 2 * math.log2(nodes) * 20.9
    # NVLS tree holds half an NVLS loop (16 channels x 8 heads x 128 KiB) plus one per tree hop up and down.
    loops = (CAL.nvls_ramp_loops + 2 * math.log2(nodes)) * 16 * 8 * 128 * 1024
    assert time == pytest.approx(simple(latency, tree_factor * NET_EFF, GIB, max(ramp, loops)), rel=REL)
    assert table.bound == ["network (tree)"]


@pytest.mark.parametrize(("nodes", "cap"), [(1, 141e9), (2, 22.5e9), (3, 19e9), (64, 19e9)])
def test_ll_busbw_caps_by_node_count(nodes, cap):
    f = fabric(8, nodes)
    n = 8 * nodes
    table = predict_collective(Op.ALL_GATHER, 2.0**36, f, algorithm=Algorithm.RING, protocol=Protocol.LL)
    assert table.busbw_bytes_per_s[0] == pytest.approx(cap, rel=1e-3)  # latency is negligible at 64 GiB
    factor = (n - 1) / n
    steps, inter = n - 1, nodes - 1
    hop = 0.6 if nodes == 1 else 2.0  # NVLink hop, or the network overhead
    latency = 6.6 + (steps - inter) * hop + inter * 2.7
    assert table.time_s[0] == pytest.approx(ll(latency, cap / factor, 2.0**36), rel=REL)


def test_gather_family_ops_take_one_pass_around_the_ring():
    f = fabric(8, 2)
    ramp = CAL.ramp_bytes["gather"] * 1.0
    latency = 8.4 + 14 * 6.0 + 1 * 14.0  # n - 1 = 15 steps, one across the network
    for op, factor in ((Op.ALL_GATHER, 15 / 16), (Op.REDUCE_SCATTER, 15 / 16), (Op.BROADCAST, 1.0)):
        time, _ = forced(op, GIB, f, Algorithm.RING, Protocol.SIMPLE)
        assert time == pytest.approx(simple(latency, NET_EFF / factor, GIB, ramp), rel=REL), op
    # reduce has the all-reduce's ramp but one pass
    time, _ = forced(Op.REDUCE, GIB, f, Algorithm.RING, Protocol.SIMPLE)
    assert time == pytest.approx(simple(latency, NET_EFF, GIB, CAL.ramp_bytes["reduce"]), rel=REL)
    with pytest.raises(ClusterSimError, match="cannot use tree"):
        predict_collective(Op.ALL_GATHER, GIB, f, algorithm=Algorithm.TREE)


def test_the_ramp_grows_with_the_node_count():
    # At S = S_half the Simple transfer takes twice its bandwidth time.
    halves = []
    for nodes in (2, 4, 32):
        f = fabric(8, nodes)
        n = 8 * nodes
        half = CAL.ramp_bytes["reduce"] * (nodes / 2) ** CAL.ramp_node_exponent["reduce"]
        algbw = NET_EFF / (2 * (n - 1) / n)
        time, _ = forced(Op.ALL_REDUCE, half, f, Algorithm.RING, Protocol.SIMPLE)
        latency = 8.4 + (2 * (n - 1) - 2 * (nodes - 1)) * 6.0 + 2 * (nodes - 1) * 14.0
        assert time == pytest.approx(latency * US + 2 * half / algbw, rel=REL)
        halves.append(half)
    assert halves == sorted(halves) and halves[0] < halves[-1]


def test_the_ramp_is_a_size_so_a_slower_network_takes_longer_to_fill_it():
    fast, slow = fabric(8, 2), fabric(8, 2, net=NET / 8)
    size = 16 * 2.0**20
    t_fast, _ = forced(Op.ALL_GATHER, size, fast, Algorithm.RING, Protocol.SIMPLE)
    t_slow, _ = forced(Op.ALL_GATHER, size, slow, Algorithm.RING, Protocol.SIMPLE)
    latency = (8.4 + 14 * 6.0 + 14.0) * US
    # Same fraction of the peak at the same size: the transfer part scales with 1 / bandwidth exactly.
    assert (t_slow - latency) == pytest.approx(8 * (t_fast - latency), rel=1e-9)


# ---- all-to-all and send/recv ------------------------------------------------------------------------------


def test_alltoall_in_one_node_is_nvlink_bound():
    f = fabric(8, 1)
    # Each device sends 7/8 of its buffer over its NVLink: algbw = 8/7 x NVLink.
    algbw = 8 / 7 * NVLINK_EFF
    time, table = forced(Op.ALLTOALL, GIB, f, Algorithm.PAIRWISE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(3.4 + 7 * 0.5, algbw, GIB, INTRA_RAMP), rel=REL)
    assert table.bound == ["NVLink"]
    time, _ = forced(Op.ALLTOALL, GIB, f, Algorithm.PAIRWISE, Protocol.LL)
    assert time == pytest.approx(ll(0.5 * (3.4 + 7 * 0.5), min(0.5 * algbw, 141e9 / (7 / 8)), GIB), rel=REL)
    time, _ = forced(Op.ALLTOALL, GIB, f, Algorithm.PAIRWISE, Protocol.LL128)
    assert time == pytest.approx(simple(3.4 + 7 * 0.5, 0.92 * algbw, GIB, INTRA_RAMP), rel=REL)


def test_alltoall_across_nodes_is_bound_by_the_off_node_share():
    f = fabric(8, 2)
    # Of each device's buffer, 8/16 leaves the node; the node's network carries 8 devices' worth:
    # per byte of buffer, (nodes - 1) g^2 / n / network seconds = 4 / 356e9.
    intra, inter = 7 / 16 / NVLINK_EFF, 1 * 64 / 16 / NET_EFF
    assert inter > intra
    ramp = CAL.ramp_bytes["alltoall"] * 1.0
    time, table = forced(Op.ALLTOALL, GIB, f, Algorithm.PAIRWISE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(14.0 + 15 * 0.5, 1 / inter, GIB, ramp), rel=REL)
    assert table.bound == ["network (off-node share per device)"]
    assert not table.busbw_exceeds_links[0]
    time, _ = forced(Op.ALLTOALL, GIB, f, Algorithm.PAIRWISE, Protocol.LL)
    assert time == pytest.approx(ll(0.5 * 21.5, min(0.5 / inter, 22.5e9 / (15 / 16)), GIB), rel=REL)
    # One device per node: no NVLink part at all.
    single = fabric(1, 4)
    inter = 3 * 1 / 4 / NET_EFF
    ramp = CAL.ramp_bytes["alltoall"] * 2.0 ** CAL.ramp_node_exponent["alltoall"]
    time, _ = forced(Op.ALLTOALL, GIB, single, Algorithm.PAIRWISE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(14.0 + 3 * 0.5, 1 / inter, GIB, ramp), rel=REL)


def test_sendrecv_uses_one_link_or_one_device_share_of_the_network():
    time, table = forced(Op.SENDRECV, GIB, fabric(2, 1), Algorithm.DIRECT, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 3.4, NVLINK_EFF, GIB, INTRA_RAMP), rel=REL)
    assert table.bound == ["NVLink"]
    time, _ = forced(Op.SENDRECV, GIB, fabric(2, 1), Algorithm.DIRECT, Protocol.LL128)
    assert time == pytest.approx(simple(8.4 + 3.4, 0.92 * NVLINK_EFF, GIB, INTRA_RAMP), rel=REL)
    f = fabric(8, 2)
    share = NET_EFF / 8
    ramp = CAL.ramp_bytes["alltoall"]
    time, table = forced(Op.SENDRECV, GIB, f, Algorithm.DIRECT, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 14.0, share, GIB, ramp), rel=REL)
    assert table.bound == ["network share of one device"]
    time, _ = forced(Op.SENDRECV, GIB, f, Algorithm.DIRECT, Protocol.LL)
    assert time == pytest.approx(ll(0.5 * 22.4, min(0.5 * share, 22.5e9), GIB), rel=REL)
    assert not table.busbw_exceeds_links[0]


# ---- the automatic choice and the link flags ---------------------------------------------------------------


def test_the_automatic_choice_is_the_fastest_candidate():
    f = fabric(8, 2, sharp=True)
    sizes = [1.0, 2.0**14, 2.0**20, 2.0**26, 2.0**32]
    auto = predict_collective(Op.ALL_REDUCE, sizes, f)
    everything = [
        (a, p)
        for a in (Algorithm.RING, Algorithm.TREE, Algorithm.HIERARCHICAL, Algorithm.NVLSTREE)
        for p in (Protocol.LL, Protocol.SIMPLE)
        if not (a in (Algorithm.HIERARCHICAL, Algorithm.NVLSTREE) and p is Protocol.LL)
    ]
    times = np.array(
        [predict_collective(Op.ALL_REDUCE, sizes, f, algorithm=a, protocol=p).time_s for a, p in everything]
    )
    assert np.array_equal(auto.time_s, times.min(axis=0))
    best = [everything[i] for i in times.argmin(axis=0)]
    assert list(zip(auto.algorithm, auto.protocol, strict=True)) == best
    assert best[0][1] is Protocol.LL and best[-1][1] is Protocol.SIMPLE
    assert np.array_equal(collective_time_s(Op.ALL_REDUCE, sizes, f), auto.time_s)


def test_busbw_flags_a_tree_that_beats_the_ring_bound():
    # A slow network: the two-node tree's busbw (2 x 15/16 x its algbw) exceeds the raw network figure.
    f = fabric(8, 2, net=100e9)
    tree = predict_collective(Op.ALL_REDUCE, GIB, f, algorithm=Algorithm.TREE, protocol=Protocol.SIMPLE)
    ring = predict_collective(Op.ALL_REDUCE, GIB, f, algorithm=Algorithm.RING, protocol=Protocol.SIMPLE)
    assert tree.busbw_bytes_per_s[0] > 100e9 and tree.busbw_exceeds_links == [True]
    assert ring.busbw_bytes_per_s[0] < 100e9 and ring.busbw_exceeds_links == [False]
    # One node: the bound is NVLink per device; NVLS beats it, the ring does not.
    one = fabric(8, 1, sharp=True)
    nvls = predict_collective(Op.ALL_REDUCE, 2.0**36, one, algorithm=Algorithm.NVLS)
    assert nvls.busbw_bytes_per_s[0] > NVLINK and nvls.busbw_exceeds_links == [True]
    ring = predict_collective(Op.ALL_REDUCE, 2.0**36, one, algorithm=Algorithm.RING, protocol=Protocol.SIMPLE)
    assert ring.busbw_exceeds_links == [False]
    # Send/recv across nodes: the bound is one device's share of the network (25 GB/s); the send reaches 0.97 of it.
    sendrecv = predict_collective(Op.SENDRECV, 2.0**40, fabric(8, 2))
    assert sendrecv.busbw_bytes_per_s[0] == pytest.approx(NET_EFF / 8, rel=3e-3)
    assert sendrecv.busbw_bytes_per_s[0] < NET_EFF / 8 and sendrecv.busbw_exceeds_links == [False]


def test_one_device_per_node_has_no_nvlink_hops():
    f = fabric(1, 4)
    ramp = CAL.ramp_bytes["reduce"] * 2.0 ** CAL.ramp_node_exponent["reduce"]
    # Ring: 2 x 3 steps, all across the network.
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.RING, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 6 * 14.0, NET_EFF / (2 * 3 / 4), GIB, ramp), rel=REL)
    # Tree: log2(4) = 2 network hops up and down; half of the network (tree factor of 4 nodes).
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.TREE, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 2 * 2 * 14.0, min(NVLINK_EFF / 2, 0.5 * NET_EFF), GIB, ramp), rel=REL)
    # Hierarchical: nothing to do on NVLink.
    time, _ = forced(Op.ALL_REDUCE, GIB, f, Algorithm.HIERARCHICAL, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 6 * 14.0, 1 / (2 * 3 / 4 / NET_EFF), GIB, ramp), rel=REL)
    # Send/recv: the whole node's network for its one device.
    time, _ = forced(Op.SENDRECV, GIB, fabric(1, 2), Algorithm.DIRECT, Protocol.SIMPLE)
    assert time == pytest.approx(simple(8.4 + 14.0, NET_EFF, GIB, CAL.ramp_bytes["alltoall"]), rel=REL)


def test_two_device_alltoall_in_one_node():
    time, _ = forced(Op.ALLTOALL, GIB, fabric(2, 1), Algorithm.PAIRWISE, Protocol.SIMPLE)
    # Half of each buffer crosses the one NVLink: algbw = 2 x NVLink.
    assert time == pytest.approx(simple(3.4 + 1 * 0.5, 2 * NVLINK_EFF, GIB, INTRA_RAMP), rel=REL)


def test_sizes_must_be_finite_and_non_negative():
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ClusterSimError, match="sizes must be finite and non-negative"):
            predict_collective(Op.ALL_REDUCE, [1.0, bad], fabric(8, 1))
