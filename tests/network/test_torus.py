"""NeuronLink as a torus: closed forms of each algorithm, the link bound, the UltraServer ring between
the torus and EFA, the catalog's tori, and refusals."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import default_calibration
from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor
from clustersim.network.cost import ANALYTIC
from clustersim.network.fabric import Fabric, Torus
from clustersim.network.topology import fabric_for_instance
from clustersim.network.torus import (
    NeuronLinkCalibration,
    neuronlink_calibration,
    neuronlink_entries,
    predict_torus,
    torus_link_busbw_limit,
    torus_time_s,
)
from clustersim.system import system_for_instance

CATALOG = load_catalog(use_env=False)
CAL = neuronlink_calibration(use_env=False)
NET = default_calibration()
LINK = 128e9  # one trn2 NeuronLink, one direction (1,024 GB/s per chip both ways over 4 links)
SIZES = np.array([2.0**k for k in range(10, 34, 2)])


def torus_fabric(dims=(4, 4), *, per_chip=1, nodes=1, ring_nodes=1, network=400e9, name="test torus") -> Fabric:
    torus = Torus(
        dims=dims,
        wrap=tuple(True for _ in dims),
        link_bytes_per_s=LINK,
        ranks_per_chip=per_chip,
        ring_nodes=ring_nodes,
        ring_link_bytes_per_s=64e9 if ring_nodes > 1 else 0.0,
    )
    chips = math.prod(dims)
    return Fabric(
        name=name,
        devices_per_node=chips * per_chip,
        num_nodes=nodes,
        scaleup_bytes_per_s=LINK,
        network_bytes_per_s=network,
        in_network_reduction=False,
        network_latency_s=18e-6,
        torus=torus,
    )


def test_the_packaged_constants_are_priors_with_their_sources():
    entries = neuronlink_entries(use_env=False)
    assert set(entries) == {"link_efficiency", "hop_latency_s", "base_latency_s"}
    for entry in entries.values():
        assert entry.fitted is None and "aws-neuron/aws-neuron-sdk" in entry.source and "@81ce03ae" in entry.source


def test_a_ring_all_reduce_over_16_chips_is_the_closed_form_over_all_four_links():
    fabric = torus_fabric()
    size = 2.0**30
    table = predict_torus(Op.ALL_REDUCE, size, fabric, algorithm=Algorithm.RING)
    link = 4 * LINK * CAL.link_efficiency  # two Hamiltonian cycles, both directions: every link sends
    expected = CAL.base_latency_s + 2 * 15 * CAL.hop_latency_s + 2 * 15 / 16 * size / link
    assert table.time_s[0] == pytest.approx(expected, rel=1e-12)


def test_rdh_takes_log2_steps_on_one_link_each():
    fabric = torus_fabric()
    size = 2.0**24
    table = predict_torus(Op.ALL_REDUCE, size, fabric, algorithm=Algorithm.RDH)
    expected = CAL.base_latency_s + 2 * 4 * CAL.hop_latency_s + 2 * 15 / 16 * size / (LINK * CAL.link_efficiency)
    assert table.time_s[0] == pytest.approx(expected, rel=1e-12)


def test_mesh_is_one_step_whose_bytes_cross_the_mean_hop_distance():
    fabric = torus_fabric()
    assert fabric.torus is not None and fabric.torus.mean_hops == pytest.approx(32 / 15)  # 4 x 4: (0+1+2+1) x 2 x 4
    size = 2.0**16
    table = predict_torus(Op.ALL_GATHER, size, fabric, algorithm=Algorithm.MESH)
    mesh = 4 * LINK * CAL.link_efficiency / (32 / 15)
    assert table.time_s[0] == pytest.approx(CAL.base_latency_s + CAL.hop_latency_s + 15 / 16 * size / mesh)


def test_the_runtime_picks_mesh_small_rdh_or_ring_large_as_its_docs_order_them():
    table = predict_torus(Op.ALL_REDUCE, [1024, 2.0**30], torus_fabric())
    assert table.algorithm == [Algorithm.MESH, Algorithm.RING]


@pytest.mark.parametrize("op", [Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL])
@pytest.mark.parametrize(("dims", "per_chip", "nodes"), [((4, 4), 1, 1), ((4, 4), 4, 1), ((4,), 4, 1), ((4, 4), 2, 4)])
def test_busbw_never_beats_the_raw_links(op, dims, per_chip, nodes):
    fabric = torus_fabric(dims, per_chip=per_chip, nodes=nodes)
    table = predict_torus(op, SIZES, fabric)
    limit = torus_link_busbw_limit(op, fabric)
    assert np.all(table.busbw_bytes_per_s <= limit * (1 + 1e-12))
    assert not any(table.busbw_exceeds_links)
    assert np.all(np.diff(table.time_s) > 0)  # more bytes never take less time


def test_the_link_bound_of_a_whole_torus_is_every_link_of_a_chip():
    # one rank per chip, no latency, every link at its rate: ring busbw = 4 links x LINK
    assert torus_link_busbw_limit(Op.ALL_REDUCE, torus_fabric()) == pytest.approx(4 * LINK)


def test_the_ultraserver_ring_is_slower_than_the_torus_and_faster_than_efa():
    """Four ranks at the same chip position of four instances (a data-parallel group of TP=16 chips):
    over the UltraServer's 256 GB/s NeuronLink ring, or over EFA; four chips of one row inside an instance."""
    size = 2.0**28
    inside = torus_time_s(Op.ALL_REDUCE, size, torus_fabric((4,)), CAL, NET)[0]
    one_per_instance = dict(dims=(), per_chip=1, nodes=4, network=400e9 / 16)
    ultra = torus_time_s(Op.ALL_REDUCE, size, _point(ring_nodes=4, **one_per_instance), CAL, NET)[0]
    efa = torus_time_s(Op.ALL_REDUCE, size, _point(ring_nodes=1, **one_per_instance), CAL, NET)[0]
    assert inside < ultra < efa
    assert ultra / inside == pytest.approx(2 * LINK / (2 * 64e9), rel=0.02)  # 2 links of 128 vs 2 of 64 GB/s


def _point(*, dims, per_chip, nodes, network, ring_nodes) -> Fabric:
    torus = Torus(
        dims=dims,
        wrap=(),
        link_bytes_per_s=LINK,
        ranks_per_chip=per_chip,
        ring_nodes=ring_nodes,
        ring_link_bytes_per_s=64e9 if ring_nodes > 1 else 0.0,
        chip_links=4,
    )
    return Fabric("one rank per instance", 1, nodes, LINK, network, False, 18e-6, torus=torus)


def test_a_group_on_one_chip_moves_at_the_chips_link_rate():
    fabric = torus_fabric((), per_chip=2)  # two NeuronCores of one chip
    fabric = replace(fabric, torus=replace(fabric.torus, chip_links=4))
    table = predict_torus(Op.ALL_REDUCE, 2.0**34, fabric)
    assert table.busbw_bytes_per_s[0] == pytest.approx(4 * LINK * CAL.link_efficiency, rel=1e-3)


def test_hierarchical_all_reduce_is_the_sum_of_its_stages():
    """Reduce-scatter on the torus (S), all-reduce of S / 16 over EFA at each chip's share, all-gather."""
    fabric = torus_fabric(nodes=2, network=400e9)
    size = 2.0**30
    table = predict_torus(Op.ALL_REDUCE, size, fabric)
    efa = 400e9 * NET.network_efficiency / 16
    torus = 2 * 15 / 16 * size / (4 * LINK * CAL.link_efficiency)
    inter = 2 * 1 / 2 * size / 16 / efa
    assert table.algorithm == [Algorithm.HIERARCHICAL]
    latency = CAL.base_latency_s + 2 * 15 * CAL.hop_latency_s + 2 * 18e-6
    assert table.time_s[0] == pytest.approx(latency + torus + inter, rel=1e-9)


def test_the_catalogs_instances_are_tori_of_their_documented_links():
    trn2 = fabric_for_instance(CATALOG, "trn2.48xlarge", 1)
    assert trn2.torus is not None and trn2.torus.dims == (4, 4) and trn2.torus.link_bytes_per_s == pytest.approx(128e9)
    trn1 = fabric_for_instance(CATALOG, "trn1.32xlarge", 1)
    assert trn1.torus is not None and trn1.torus.link_bytes_per_s == pytest.approx(48e9)
    trn1n = fabric_for_instance(CATALOG, "trn1n.32xlarge", 1)
    assert trn1n.torus is not None and trn1n.torus.link_bytes_per_s == pytest.approx(96e9)
    four = fabric_for_instance(CATALOG, "trn2.48xlarge", 4)  # four trn2.48xlarge are not an UltraServer
    assert (four.num_nodes, four.devices_per_node, four.torus.ring_nodes) == (4, 16, 1)
    gpu = fabric_for_instance(CATALOG, "p5.48xlarge", 1)
    assert gpu.torus is None


@pytest.mark.parametrize(
    ("ranks", "stride", "dims", "per_chip", "chip_stride"),
    [
        (4, 1, (), 4, 1),  # TP=4 at LNC=2: one chip
        (8, 1, (2,), 4, 1),  # TP=8: two neighbouring chips
        (16, 1, (4,), 4, 1),  # TP=16: a row of the torus, closed by its wrap-around link
        (64, 1, (4, 4), 4, 1),  # TP=64: the instance
        (16, 4, (4, 4), 1, 1),  # a DP group over TP=4: one rank on each chip
        (8, 8, (4, 4), 1, 2),  # over TP=8: every other chip, sharing links with the group between
    ],
)
def test_a_groups_torus_follows_its_ranks_on_the_chips(ranks, stride, dims, per_chip, chip_stride):
    system = system_for_instance(CATALOG, "trn2.48xlarge", 1, devices_per_node=64)
    fabric = system.group_fabric(ranks, stride)
    assert fabric is not None and fabric.torus is not None
    assert (fabric.torus.dims, fabric.torus.ranks_per_chip, fabric.torus.chip_stride) == (dims, per_chip, chip_stride)


def test_the_analytic_cost_answers_a_torus_with_the_torus_model():
    fabric = fabric_for_instance(CATALOG, "trn2.48xlarge", 1)
    sizes = np.array([2.0**20, 2.0**30])
    torus = predict_torus(Op.ALL_REDUCE, sizes, fabric).time_s
    assert np.allclose(ANALYTIC.time_s(Op.ALL_REDUCE, sizes, fabric), torus)
    assert ANALYTIC.table(Op.ALL_REDUCE, sizes, fabric).bound == ["NeuronLink", "NeuronLink"]


def test_a_published_all_reduce_at_large_sizes_is_within_a_few_percent():
    """nccom-test.rst @81ce03ae: 4 Trainium2 chips (16 ranks at LNC=2), 512 MiB, 9,689.51 us; 2 x trn1,
    64 ranks, 1 GiB, 41,806 us. Both set the link efficiency prior (in sample), so this guards the model's
    structure (stages, links, EFA share), not its accuracy out of sample."""
    system = system_for_instance(CATALOG, "trn2.48xlarge", 1, devices_per_node=64)
    trn2 = system.group_fabric(16, 1)
    assert trn2 is not None
    assert ANALYTIC.time_s(Op.ALL_REDUCE, 2.0**29, trn2)[0] == pytest.approx(9689.51e-6, rel=0.05)
    trn1 = system_for_instance(CATALOG, "trn1.32xlarge", 2, devices_per_node=32).topology.fabric()
    assert ANALYTIC.time_s(Op.ALL_REDUCE, 2.0**30, trn1)[0] == pytest.approx(41806e-6, rel=0.05)


def test_refusals_name_the_field_and_what_is_valid():
    fabric = torus_fabric()
    with pytest.raises(ClusterSimError, match="no NCCL protocols") as protocol:
        predict_torus(Op.ALL_REDUCE, 1e6, fabric, protocol=Protocol.LL)
    assert protocol.value.field == "protocol"
    with pytest.raises(ClusterSimError, match="valid: mesh, rdh, ring") as algorithm:
        predict_torus(Op.ALL_REDUCE, 1e6, fabric, algorithm=Algorithm.NVLS)
    assert algorithm.value.field == "algorithm"
    with pytest.raises(ClusterSimError, match="do not fill UltraServers of 4"):
        predict_torus(Op.ALL_REDUCE, 1e6, torus_fabric(nodes=6, ring_nodes=4))
    with pytest.raises(ClusterSimError, match="at least 2 chips"):
        Torus(dims=(1,), wrap=(True,), link_bytes_per_s=LINK)
    with pytest.raises(ClusterSimError, match="need its link bandwidth"):
        Torus(dims=(4, 4), wrap=(True, True), link_bytes_per_s=LINK, ring_nodes=4)
    with pytest.raises(ClusterSimError, match="sizes must be finite"):
        predict_torus(Op.ALL_REDUCE, -1.0, fabric)


def test_a_user_file_replaces_a_prior(tmp_path):
    path = tmp_path / "neuronlink.toml"
    path.write_text('[link_efficiency]\nvalue = 0.68\nsource = "a faster runtime"\n')
    faster = neuronlink_calibration([path], use_env=False)
    assert faster.link_efficiency == 0.68 and faster.hop_latency_s == CAL.hop_latency_s
    slow = torus_time_s(Op.ALL_REDUCE, 2.0**32, torus_fabric(), CAL, NET)[0]
    fast = torus_time_s(Op.ALL_REDUCE, 2.0**32, torus_fabric(), faster, NET)[0]
    assert fast < slow and isinstance(faster, NeuronLinkCalibration)


def test_busbw_uses_nccom_tests_factors():
    fabric = torus_fabric()
    table = predict_torus(Op.REDUCE_SCATTER, 2.0**28, fabric)
    assert table.busbw_bytes_per_s[0] == pytest.approx(table.algbw_bytes_per_s[0] * busbw_factor(Op.REDUCE_SCATTER, 16))
