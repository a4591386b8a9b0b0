"""Hierarchical, NVLS and NVLS tree all-reduce as flows: closed forms on small fat-trees, the
NVSwitch's loads, the analytic model at 1 to 2,048 p5 nodes, and the refusals."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import DEFAULT_CALIBRATION, candidates
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.cost import ANALYTIC
from clustersim.network.flowsim.collectives import collective_flows, default_algorithm
from clustersim.network.flowsim.cost import SIM
from clustersim.network.flowsim.engine import independent, simulate
from clustersim.network.flowsim.nvls import nvls_port_efficiency
from clustersim.network.flowsim.results import simulate_collective
from clustersim.network.flowsim.routing import Routing, nvswitch, route
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.topology import fabric_for_instance

# These tests check the link-bound view: datasheet links, no latency (``ideal``, ``--ideal``).
simulate_collective = functools.partial(simulate_collective, ideal=True)

CATALOG = load_catalog(use_env=False)
GIB = float(1 << 30)
NIC = 50e9  # bytes/s per GPU's rail
NVLINK = 400e9  # bytes/s per GPU's NVLink port, each way


def _tree(hosts: int, gpus: int = 4, nvlink: float = NVLINK):
    spec = FatTreeSpec(
        num_hosts=hosts,
        gpus_per_host=gpus,
        nics_per_host=gpus,
        nic_bytes_per_s=NIC,
        scaleup_bytes_per_s=nvlink,
        radix=8,
    )
    return build(spec)


@pytest.mark.parametrize(("hosts", "gpus"), [(1, 4), (2, 4), (5, 2), (6, 1), (12, 4)])
def test_hierarchical_all_reduce_takes_the_sum_of_its_three_rings(hosts: int, gpus: int):
    """Reduce-scatter over NVLink, (hosts - 1) / hosts of each shard twice over its GPU's rail,
    all-gather over NVLink: 2 (g-1)/g S / nvlink + 2 (h-1)/h (S/g) / nic, exactly (every ring step
    of a phase takes as long, so sampling 3 steps per phase loses nothing)."""
    tree, size = _tree(hosts, gpus), 1e9
    result = simulate_collective(
        tree, np.arange(hosts), Op.ALL_REDUCE, size, algorithm=Algorithm.HIERARCHICAL, max_steps=3
    )
    expected = 2 * (gpus - 1) / gpus * size / NVLINK + 2 * (hosts - 1) / hosts * size / gpus / NIC
    assert result.time_s == pytest.approx(expected, rel=1e-9)
    assert result.steps_total == 2 * (gpus - 1) + 2 * (hosts - 1)
    # 12 hosts span 3 leaves per rail: the inter-host rings cross the spines and stay at line rate.
    assert result.max_link_utilization == pytest.approx(1.0 if hosts > 1 else 0.0)


def test_an_nvswitch_reduce_pulls_from_every_gpu_and_a_multicast_feeds_every_gpu():
    tree = _tree(2, gpus=4)
    inc = route(tree, np.array([int(nvswitch(1)), 5]), np.array([6, int(nvswitch(1))]), Routing.SPRAY)
    reduce_ports = set(inc.resource[inc.flow == 0].tolist())
    multicast_ports = set(inc.resource[inc.flow == 1].tolist())
    host1 = np.arange(4, 8)
    assert reduce_ports == set(tree.scaleup_out(host1).tolist()) | {int(tree.scaleup_in(np.array([6]))[0])}
    assert multicast_ports == set(tree.scaleup_in(host1).tolist()) | {int(tree.scaleup_out(np.array([5]))[0])}
    assert np.all(inc.weight == 1.0) and np.all(inc.hops == 0)
    # Two reduces into different GPUs share every egress port: each gets half of it.
    times = simulate(tree, independent(np.array([-2, -2]), np.array([4, 5]), np.array([1e9, 1e9])), Routing.SPRAY)
    assert times.end_s == pytest.approx([2e9 / NVLINK] * 2)


@pytest.mark.parametrize(
    ("src", "dst", "message"),
    [
        (-1, -2, "from one NVSwitch to another"),
        (-1, 4, "stay inside the switch's host"),
        (-3, 0, "or -1..-2: a host's NVSwitch"),
    ],
)
def test_nvswitch_flows_that_cannot_exist_are_refused(src: int, dst: int, message: str):
    with pytest.raises(ClusterSimError, match=message):
        route(_tree(2), np.array([src]), np.array([dst]), Routing.SPRAY)


def test_nvls_carries_g_plus_1_over_g_of_the_data_through_each_port_and_pipelines():
    """One host of 4 GPUs: each GPU's egress carries all its shards up to the switch and its reduced
    shard up again to be multicast, 5/4 of the data; its ingress the same. Pipelined over 512 KiB
    pieces, the whole takes (5/4) S / nvlink plus one piece's fill."""
    tree, size = _tree(1, gpus=4), 64 * GIB
    plan = collective_flows(tree, np.array([0]), Op.ALL_REDUCE, size, Algorithm.NVLS, chunks=3)
    inc = route(tree, plan.flows.src_gpu, plan.flows.dst_gpu, Routing.SPRAY)
    per_port = np.bincount(inc.resource, weights=plan.flows.size_bytes[inc.flow], minlength=tree.num_resources)
    simulated = plan.flows.size_bytes.sum() / 2  # reduce and multicast bytes: one shard piece each
    ports = per_port[tree.scaleup0 :]
    assert ports == pytest.approx(np.full(8, simulated * 5 / 4))
    result = simulate_collective(tree, np.array([0]), Op.ALL_REDUCE, size, algorithm=Algorithm.NVLS, chunks=3)
    assert result.time_s == pytest.approx(size * 5 / 4 / NVLINK, rel=1e-3)
    assert nvls_port_efficiency(0.6, 4) == pytest.approx(0.75)


@pytest.mark.parametrize("gpus", [2, 4, 8])
@pytest.mark.parametrize("pieces", [1, 2, 4])
def test_nvls_pipelines_its_pieces_reduce_then_multicast(gpus: int, pieces: int):
    """Every piece simulated (512 KiB a shard): each shard's piece is reduced into its GPU, then multicast from it,
    and each GPU's pieces go in order, so the whole takes S / nvlink x ((g + 1) / g + (g - 1) / (g n)): the steady
    (g + 1) / g of the data per port, plus the fill, one piece's reduce and multicast (2 S / nvlink for one piece).
    """
    tree, size = _tree(1, gpus=gpus), float(pieces * gpus * 512 * 1024)
    result = simulate_collective(tree, np.array([0]), Op.ALL_REDUCE, size, algorithm=Algorithm.NVLS, chunks=8)
    expected = size / NVLINK * ((gpus + 1) / gpus + (gpus - 1) / (gpus * pieces))
    assert result.time_s == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("gpus", [2, 4])
def test_one_nvls_tree_piece_reduces_goes_up_and_down_then_multicasts(gpus: int):
    """Two hosts, one piece p = S / 2g per tree and shard: the NVSwitch reduce of every shard of both trees (each
    GPU's port sends S: S / nvlink), the child's sum up its rail and the root's down (2 p / nic), then the child's
    multicast, g pieces into every GPU (S / 2 / nvlink); the root's multicast runs while the down crosses."""
    size = float(2 * gpus * 512 * 1024)
    piece = size / (2 * gpus)
    result = simulate_collective(_tree(2, gpus=gpus), np.arange(2), Op.ALL_REDUCE, size, algorithm=Algorithm.NVLSTREE)
    assert result.time_s == pytest.approx(1.5 * size / NVLINK + 2 * piece / NIC, rel=1e-9)


def test_nvls_on_another_host_runs_on_that_host_s_gpus():
    tree = _tree(2, gpus=4)
    plan = collective_flows(tree, np.array([1]), Op.ALL_REDUCE, 4 * 512 * 1024.0, Algorithm.NVLS, chunks=2)
    gpus = np.concatenate([plan.flows.src_gpu, plan.flows.dst_gpu])
    assert set(gpus[gpus >= 0].tolist()) == {4, 5, 6, 7}  # (the switch is not a GPU)
    one, other = (
        simulate_collective(tree, np.array([h]), Op.ALL_REDUCE, GIB, algorithm=Algorithm.NVLS, chunks=2).time_s
        for h in (0, 1)
    )
    assert one == other


@pytest.mark.parametrize(("hosts", "factor"), [(2, 1.0), (3, 2 / 3), (4, 0.5), (9, 0.5)])
def test_nvls_tree_runs_at_the_double_binary_trees_pace_when_the_network_binds(hosts: int, factor: float):
    """NVLink 10x the rail: the trees bind. Per piece a host sends each half of a shard up and down
    its trees: 2 pieces per rail at 2 hosts, 3 at the busiest of 3, 4 (an interior node sends up
    once and down twice) from 4: algbw = factor x the host's network (g rails)."""
    gpus, size = 4, 64 * GIB
    result = simulate_collective(
        _tree(hosts, gpus, nvlink=10 * gpus * NIC),
        np.arange(hosts),
        Op.ALL_REDUCE,
        size,
        algorithm=Algorithm.NVLSTREE,
        chunks=2,
    )
    assert result.algbw_bytes_per_s == pytest.approx(factor * gpus * NIC, rel=2e-3)


def test_nvls_tree_runs_at_the_nvlink_sharp_pace_when_nvlink_binds():
    gpus, size = 4, 64 * GIB
    tree = _tree(4, gpus, nvlink=NIC)  # NVLink as slow as one rail
    result = simulate_collective(tree, np.arange(4), Op.ALL_REDUCE, size, algorithm=Algorithm.NVLSTREE, chunks=2)
    assert result.algbw_bytes_per_s == pytest.approx(NIC * gpus / (gpus + 1), rel=2e-3)
    assert result.binding_tier == "nvlink"


@pytest.mark.parametrize(
    ("algorithm", "nodes"),
    [
        (Algorithm.NVLS, 1),
        (Algorithm.HIERARCHICAL, 2),
        (Algorithm.HIERARCHICAL, 16),
        (Algorithm.HIERARCHICAL, 2048),
        (Algorithm.NVLSTREE, 2),
        (Algorithm.NVLSTREE, 3),
        (Algorithm.NVLSTREE, 16),
        (Algorithm.NVLSTREE, 128),
    ],
)
def test_sprayed_non_blocking_simulation_matches_the_analytic_model(algorithm: Algorithm, nodes: int):
    """The sim cost (the analytic efficiencies on the links, its latency and ramp) against the
    analytic model at 1 GiB on p5: within 5% from 1 to 2,048 nodes."""
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", nodes)
    sizes = np.array([GIB])
    analytic = ANALYTIC.table(Op.ALL_REDUCE, sizes, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE)
    simulated = SIM.table(Op.ALL_REDUCE, sizes, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE)
    assert simulated.time_s[0] == pytest.approx(analytic.time_s[0], rel=0.05)


def test_nvls_tree_on_2048_p5_nodes_reaches_the_analytic_bandwidth():
    """16,384 GPUs, three tiers, sprayed: the analytic model's NVLS tree algbw (half the network)."""
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 2048)
    cal = DEFAULT_CALIBRATION
    (bound,) = [c for c in candidates(Op.ALL_REDUCE, fabric, cal) if c.algorithm is Algorithm.NVLSTREE]
    g = fabric.devices_per_node
    spec = FatTreeSpec(
        num_hosts=2048,
        gpus_per_host=g,
        nics_per_host=g,
        nic_bytes_per_s=fabric.network_bytes_per_s / g * cal.network_efficiency,
        scaleup_bytes_per_s=fabric.scaleup_bytes_per_s * nvls_port_efficiency(cal.nvls_efficiency, g),
    )
    tree = build(spec)
    result = simulate_collective(tree, np.arange(2048), Op.ALL_REDUCE, 64 * GIB, algorithm=Algorithm.NVLSTREE, chunks=1)
    assert tree.num_tiers == 3
    assert result.algbw_bytes_per_s == pytest.approx(bound.algbw_bytes_per_s, rel=0.05)


def test_nvls_needs_one_host_and_nvls_tree_several():
    tree = _tree(2)
    with pytest.raises(ClusterSimError) as refused:
        collective_flows(tree, np.arange(2), Op.ALL_REDUCE, GIB, Algorithm.NVLS)
    assert (
        str(refused.value) == "nvls runs inside one host of 2 or more GPUs, not 2 hosts of 4; across hosts use nvlstree"
    )
    assert (refused.value.field, refused.value.value) == ("algorithm", "nvls")
    assert collective_flows(_tree(1, gpus=2), np.arange(1), Op.ALL_REDUCE, GIB, Algorithm.NVLS).op is Op.ALL_REDUCE
    with pytest.raises(ClusterSimError) as refused:
        collective_flows(tree, np.arange(1), Op.ALL_REDUCE, GIB, Algorithm.NVLSTREE)
    assert str(refused.value) == "nvlstree runs across 2 or more hosts; inside one use nvls"
    assert (refused.value.field, refused.value.value) == ("algorithm", "nvlstree")
    with pytest.raises(ClusterSimError, match="runs all_gather as ring, not hierarchical"):
        collective_flows(tree, np.arange(2), Op.ALL_GATHER, GIB, Algorithm.HIERARCHICAL)


def test_the_default_algorithm_is_the_one_nccl_would_pick_on_the_fabric():
    p5 = fabric_for_instance(CATALOG, "p5.48xlarge", 4)
    p4d = fabric_for_instance(CATALOG, "p4d.24xlarge", 4)  # no NVLink SHARP
    assert default_algorithm(Op.ALL_REDUCE) is Algorithm.RING
    assert default_algorithm(Op.ALL_REDUCE, p5, GIB) is Algorithm.NVLSTREE
    assert default_algorithm(Op.ALL_REDUCE, fabric_for_instance(CATALOG, "p5.48xlarge", 1), GIB) is Algorithm.NVLS
    picked = default_algorithm(Op.ALL_REDUCE, p4d, GIB)
    assert picked is ANALYTIC.table(Op.ALL_REDUCE, np.array([GIB]), p4d).algorithm[0]
    assert picked not in (Algorithm.NVLS, Algorithm.NVLSTREE)
    assert default_algorithm(Op.ALLTOALL, p5, GIB) is Algorithm.PAIRWISE
