"""NeuronLink's collectives and NVLink SHARP's bounds, pinned where mutation testing found them loose
(``benchmarks/mutation.py`` group ``nvls_torus``): the all-to-all's routed writes and network share, send/recv,
broadcast and reduce chains, strided groups, the UltraServer ring's links, the user's calibrations reaching every
stage, the link bound's ideal network, and the refusals' fields."""

from __future__ import annotations

from dataclasses import replace

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.fabric import Fabric, Torus
from clustersim.network.nvls import PerGeneration, nvls_heads, nvls_loop_bytes, nvls_tree
from clustersim.network.torus import (
    EFA,
    ON_CHIP,
    TORUS,
    Z_RING,
    candidates,
    neuronlink_calibration,
    neuronlink_entries,
    predict_torus,
    torus_link_busbw_limit,
    torus_time_s,
)
from tests.network.test_torus import CAL, LINK, NET, torus_fabric

EFA_LATENCY_S = 18e-6  # torus_fabric's adapter latency
SIZE = 2.0**30


def one(op: Op, fabric: Fabric):
    (only,) = candidates(op, fabric, CAL, NET)
    return only


# ---- all-to-all: routed writes inside an instance, each chip's network share beyond ---------------------------------


def test_an_all_to_all_inside_an_instance_is_one_routed_write_to_every_other_chip():
    fabric = torus_fabric()
    mesh = 4 * LINK * CAL.link_efficiency / (32 / 15)  # four links over the mean 32/15 hops of a 4 x 4 torus
    found = one(Op.ALLTOALL, fabric)
    assert (found.algorithm, found.protocol, found.bound) == (Algorithm.MESH, Protocol.SIMPLE, TORUS)
    assert found.algbw_bytes_per_s == pytest.approx(mesh * 16 / 15, rel=1e-12)  # 15 of 16 shares leave the chip
    assert found.latency_s == pytest.approx(CAL.hop_latency_s + CAL.base_latency_s, rel=1e-12)
    assert found.ramp_bytes == 0.0


def test_an_all_to_all_across_instances_is_bound_by_each_chips_share_of_the_network():
    """Two NeuronCores a chip on two instances: 64 ranks, 32 an instance. A chip's two ranks send 30/64 of their
    bytes to the other chips of their instance over the torus and 32/64 over its share of EFA (a sixteenth)."""
    fabric = torus_fabric(per_chip=2, nodes=2)
    found = one(Op.ALLTOALL, fabric)
    mesh = 4 * LINK * CAL.link_efficiency / (32 / 15)
    share = 400e9 * NET.network_efficiency / 16
    intra, inter = 2 * 30 / 64 / mesh, 2 * 32 / 64 / share
    assert inter > intra and found.bound == EFA
    assert found.algbw_bytes_per_s == pytest.approx(1 / inter, rel=1e-12)
    assert found.latency_s == pytest.approx(CAL.hop_latency_s + EFA_LATENCY_S + CAL.base_latency_s, rel=1e-12)
    fast_network = one(Op.ALLTOALL, torus_fabric(per_chip=2, nodes=2, network=400e9 * 64))
    assert fast_network.bound == TORUS and fast_network.algbw_bytes_per_s == pytest.approx(1 / intra, rel=1e-12)


def test_an_all_to_all_on_one_chip_moves_between_its_own_cores():
    fabric = torus_fabric((), per_chip=4)
    fabric = replace(fabric, torus=replace(fabric.torus, chip_links=4))
    found = one(Op.ALLTOALL, fabric)
    on_chip = 4 * LINK * CAL.link_efficiency
    assert found.bound == ON_CHIP
    assert found.algbw_bytes_per_s == pytest.approx(on_chip / (4 * 3 / 4), rel=1e-12)  # 3 peers of 4 ranks


def _instances(nodes: int, ring_nodes: int) -> Fabric:
    """One chip (one rank) of each of ``nodes`` instances, joined by a NeuronLink ring of ``ring_nodes``."""
    torus = Torus(
        dims=(), wrap=(), link_bytes_per_s=LINK, ring_nodes=ring_nodes, ring_link_bytes_per_s=64e9, chip_links=4
    )
    return Fabric("one rank an instance", 1, nodes, LINK, 400e9 / 16, False, EFA_LATENCY_S, torus=torus)


def test_one_rank_an_instance_has_no_stage_on_its_chip():
    found = one(Op.ALLTOALL, _instances(4, 4))
    assert found.latency_s == pytest.approx(CAL.hop_latency_s + CAL.base_latency_s, rel=1e-12)  # the ring's hop
    assert found.bound == Z_RING
    ring = 2 * 64e9 * CAL.link_efficiency  # both directions of the UltraServer ring
    assert found.algbw_bytes_per_s == pytest.approx(ring * 4 / 3, rel=1e-12)  # 3 of 4 shares leave the instance


def test_one_instance_of_an_ultraserver_has_no_ring_stage():
    found = one(Op.ALLTOALL, torus_fabric(ring_nodes=4))
    assert found.latency_s == pytest.approx(CAL.hop_latency_s + CAL.base_latency_s, rel=1e-12)
    assert found.bound == TORUS


# ---- send/recv, broadcast and reduce ---------------------------------------------------------------------------


def test_a_send_takes_one_link_of_the_outermost_stage_or_the_chips_network_share():
    inside = one(Op.SENDRECV, torus_fabric())
    assert inside.algorithm is Algorithm.DIRECT and inside.protocol is Protocol.SIMPLE and inside.bound == TORUS
    assert inside.algbw_bytes_per_s == pytest.approx(LINK * CAL.link_efficiency, rel=1e-12)
    assert inside.latency_s == pytest.approx(CAL.hop_latency_s + CAL.base_latency_s, rel=1e-12)
    assert inside.ramp_bytes == 0.0
    across = one(Op.SENDRECV, torus_fabric(nodes=2))
    assert across.bound == EFA
    assert across.algbw_bytes_per_s == pytest.approx(400e9 * NET.network_efficiency / 16, rel=1e-12)
    assert across.latency_s == pytest.approx(EFA_LATENCY_S + CAL.base_latency_s, rel=1e-12)


@pytest.mark.parametrize("op", [Op.BROADCAST, Op.REDUCE])
def test_a_broadcast_or_reduce_is_a_chain_at_its_slowest_stage(op):
    inside = one(op, torus_fabric())
    assert (inside.algorithm, inside.protocol, inside.bound) == (Algorithm.RING, Protocol.SIMPLE, TORUS)
    assert inside.algbw_bytes_per_s == pytest.approx(4 * LINK * CAL.link_efficiency, rel=1e-12)
    assert inside.latency_s == pytest.approx(15 * CAL.hop_latency_s + CAL.base_latency_s, rel=1e-12)
    assert inside.ramp_bytes == 0.0
    across = one(op, torus_fabric(nodes=3))
    assert (across.algorithm, across.bound) == (Algorithm.HIERARCHICAL, EFA)
    assert across.algbw_bytes_per_s == pytest.approx(400e9 * NET.network_efficiency / 16, rel=1e-12)
    latency = 15 * CAL.hop_latency_s + 2 * EFA_LATENCY_S + CAL.base_latency_s
    assert across.latency_s == pytest.approx(latency, rel=1e-12)


# ---- strides, mesh, rings and bounds ----------------------------------------------------------------------------


def test_a_strided_group_pays_its_hops_on_every_link():
    """Members two chips apart: each step crosses two links, so a ring over the same links takes twice as long."""
    plain, strided = torus_fabric((4,)), torus_fabric((4,))
    strided = replace(strided, torus=replace(strided.torus, chip_stride=2))
    time = {
        name: predict_torus(Op.ALL_REDUCE, SIZE, fabric, algorithm=Algorithm.RING, cal=CAL, net=NET).time_s[0]
        for name, fabric in (("plain", plain), ("strided", strided))
    }
    latency = CAL.base_latency_s + 2 * 3 * CAL.hop_latency_s
    assert time["strided"] - latency == pytest.approx(2 * (time["plain"] - latency), rel=1e-12)


def test_a_strided_mesh_counts_its_hops_in_links():
    """Members two chips apart on a ring of eight: their mean distance is 2 x 4/3 links, each link carrying a
    member's writes at half its rate (a step crosses two links)."""
    fabric = torus_fabric((4,))
    fabric = replace(fabric, torus=replace(fabric.torus, chip_stride=2))
    table = predict_torus(Op.ALL_GATHER, SIZE, fabric, algorithm=Algorithm.MESH, cal=CAL, net=NET)
    mesh = 2 * LINK * CAL.link_efficiency / 2 / (4 / 3)
    assert table.time_s[0] == pytest.approx(CAL.base_latency_s + CAL.hop_latency_s + 3 / 4 * SIZE / mesh, rel=1e-12)


def test_a_mesh_on_a_short_ring_crosses_its_mean_hops():
    """Four chips on a closed ring: a write crosses (1 + 2 + 1) / 3 = 4/3 links on average over two links."""
    table = predict_torus(Op.ALL_GATHER, SIZE, torus_fabric((4,)), algorithm=Algorithm.MESH, cal=CAL, net=NET)
    mesh = 2 * LINK * CAL.link_efficiency / (4 / 3)
    assert table.time_s[0] == pytest.approx(CAL.base_latency_s + CAL.hop_latency_s + 3 / 4 * SIZE / mesh, rel=1e-12)


@pytest.mark.parametrize(("nodes", "links"), [(2, 1), (4, 2)])
def test_the_ultraserver_ring_uses_both_directions_from_three_instances(nodes, links):
    """A ring of two instances is one link each way; of four, two."""
    table = predict_torus(Op.ALL_GATHER, SIZE, _instances(nodes, 4), algorithm=Algorithm.RING, cal=CAL, net=NET)
    share = (nodes - 1) / nodes
    latency = CAL.base_latency_s + (nodes - 1) * CAL.hop_latency_s
    assert table.time_s[0] == pytest.approx(latency + share * SIZE / (links * 64e9 * CAL.link_efficiency), rel=1e-12)
    assert table.bound == [Z_RING]


def test_a_two_instance_ring_joins_them_without_efa():
    table = predict_torus(Op.ALL_REDUCE, SIZE, _instances(2, 2), cal=CAL, net=NET)
    assert table.bound == [Z_RING]


def test_instances_that_do_not_fill_ultraservers_are_refused_with_the_count():
    with pytest.raises(ClusterSimError) as caught:
        candidates(Op.ALL_REDUCE, _instances(6, 4), CAL, NET)
    assert (caught.value.field, caught.value.value) == ("nodes", 6)
    assert "6 instances do not fill UltraServers of 4" in str(caught.value)


def test_the_hierarchical_bound_names_the_stage_that_takes_longest():
    table = predict_torus(Op.ALL_REDUCE, SIZE, torus_fabric(nodes=2, network=400e9 / 8), cal=CAL, net=NET)
    assert table.algorithm == [Algorithm.HIERARCHICAL] and table.bound == [EFA]
    fast = predict_torus(Op.ALL_REDUCE, SIZE, torus_fabric(nodes=2, network=400e9 * 64), cal=CAL, net=NET)
    assert fast.bound == [TORUS]


def test_the_link_bound_prices_the_network_at_its_line_rate():
    """Across two instances the bound of an all-reduce is the torus stage and each chip's EFA share at their full
    rates: 2 x (15/16 / (4 LINK) + 1/2 x 1/16 / (400 GB/s / 16)) seconds a byte, times the busbw factor."""
    fabric = torus_fabric(nodes=2, network=400e9 / 8)
    per_byte = 2 * (15 / 16 / (4 * LINK) + 1 / 2 / 16 / (400e9 / 8 / 16))
    assert torus_link_busbw_limit(Op.ALL_REDUCE, fabric) == pytest.approx(2 * 31 / 32 / per_byte, rel=1e-12)


# ---- the user's calibrations reach every stage ---------------------------------------------------------------------


def test_a_slower_network_calibration_reaches_the_efa_stage():
    fabric = torus_fabric(nodes=2, network=400e9 / 8)
    slow = replace(NET, network_efficiency=NET.network_efficiency / 2)
    base = torus_time_s(Op.ALL_REDUCE, SIZE, fabric, CAL, NET)[0]
    slower = torus_time_s(Op.ALL_REDUCE, SIZE, fabric, CAL, slow)[0]
    assert slower > 1.5 * base
    assert predict_torus(Op.ALL_REDUCE, SIZE, fabric, cal=CAL, net=slow).time_s[0] == pytest.approx(slower, rel=1e-12)


def test_a_slower_link_calibration_reaches_the_torus():
    slow = replace(CAL, link_efficiency=CAL.link_efficiency / 2)
    base = predict_torus(Op.ALL_GATHER, SIZE, torus_fabric(), cal=CAL, net=NET).time_s[0]
    assert predict_torus(Op.ALL_GATHER, SIZE, torus_fabric(), cal=slow, net=NET).time_s[0] > 1.9 * base


# ---- refusals -----------------------------------------------------------------------------------------------------


def test_a_protocol_or_an_algorithm_the_runtime_lacks_is_refused_by_name():
    with pytest.raises(ClusterSimError) as caught:
        predict_torus(Op.ALL_REDUCE, SIZE, torus_fabric(), protocol=Protocol.LL)
    assert (caught.value.field, caught.value.value) == ("protocol", "ll")
    assert str(caught.value).endswith("NeuronLink collectives have no NCCL protocols (got ll); give no protocol")
    with pytest.raises(ClusterSimError) as caught:
        predict_torus(Op.ALL_REDUCE, SIZE, torus_fabric((3,)), algorithm=Algorithm.RDH)
    assert (caught.value.field, caught.value.value) == ("algorithm", "rdh")
    assert "cannot use rdh; valid: mesh, ring" in str(caught.value)


def test_the_users_file_is_read_from_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "neuronlink.toml"
    path.write_text('[link_efficiency]\nvalue = 0.68\nsource = "a faster runtime"\n')
    monkeypatch.setenv("CLUSTERSIM_NEURONLINK_CALIBRATION", str(path))
    assert neuronlink_calibration().link_efficiency == 0.68
    assert neuronlink_entries()["link_efficiency"].source == "a faster runtime"
    assert neuronlink_calibration(use_env=False).link_efficiency == CAL.link_efficiency


def test_a_switched_fabric_is_not_a_torus():
    fabric = Fabric("nvswitch", 8, 1, 450e9, 400e9, False)
    with pytest.raises(ClusterSimError, match="nvswitch: not a NeuronLink torus"):
        candidates(Op.ALL_REDUCE, fabric, CAL, NET)


# ---- NVLink SHARP --------------------------------------------------------------------------------------------------


def test_a_domain_of_one_gpu_is_one_nvls_head():
    assert nvls_heads(1) == 1 and nvls_loop_bytes("hopper", 1) == 16 * 128 * 1024
    assert nvls_loop_bytes("blackwell", 72) == 32 * 32 * 128 * 1024


@pytest.mark.parametrize(
    ("nvls", "network", "factor", "bound"),
    [
        (100.0, 200.0, 0.5, "NVLink SHARP (heads' tree)"),
        (100.0, 200.0, 1.0, "NVLink SHARP"),
        (100.0, 50.0, 0.5, "network (tree)"),
    ],
)
def test_the_nvls_tree_across_racks_names_its_bound(nvls, network, factor, bound):
    tree = nvls_tree(nvls, network, factor, mnnvl=True)
    assert tree.bound == bound
    assert tree.algbw_bytes_per_s == factor * min(nvls, network)
    assert tree.choice_algbw_bytes_per_s == min(nvls, factor * network)


def test_each_generation_takes_its_own_factor():
    factors = PerGeneration(hopper=0.8, blackwell=1.2)
    assert (factors.factor("hopper"), factors.factor("blackwell"), factors.factor("ampere")) == (0.8, 1.2, 1.0)
