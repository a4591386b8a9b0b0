"""What mutation testing of ``network.cost``, ``network.work``, ``network.fabric`` and ``compute.stages`` found
unpinned: the cost model's arguments reaching NeuronLink and NCCL tables, the work bound's edges and words, a
fabric's refusals at their edges, a multi-token-prediction block on the pipeline's even split."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.stages import stage_split
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.analytic import DEFAULT_CALIBRATION
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.cost import ANALYTIC, AnalyticCost
from clustersim.network.fabric import Fabric, Torus
from clustersim.network.topology import fabric_for_instance
from clustersim.network.work import (
    DEFAULT_MAX_SECONDS,
    MEMORY_BOUND_BYTES,
    WorkEstimate,
    _round_up,
    check_work,
    duration,
)
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
SIZES = np.array([1e6, 1e9])
LINK = 48e9  # one NeuronLink, one direction (trn1)
HALF = AnalyticCost(
    dataclasses.replace(DEFAULT_CALIBRATION, network_efficiency=DEFAULT_CALIBRATION.network_efficiency / 2)
)


def test_neuronlinks_table_and_time_take_the_op_sizes_and_the_calibration_given():
    torus = fabric_for_instance(CATALOG, "trn1.32xlarge", 2)
    table = ANALYTIC.table(Op.ALL_REDUCE, SIZES, torus, algorithm=Algorithm.HIERARCHICAL)
    assert np.array_equal(table.time_s, ANALYTIC.time_s(Op.ALL_REDUCE, SIZES, torus))
    assert list(table.algorithm) == [Algorithm.HIERARCHICAL] * 2
    gather = ANALYTIC.time_s(Op.ALL_GATHER, SIZES, torus)
    assert np.all(gather < table.time_s)  # an all-gather moves half an all-reduce's bytes
    slow = HALF.time_s(Op.ALL_REDUCE, SIZES, torus)
    assert np.all(slow > table.time_s) and np.array_equal(HALF.table(Op.ALL_REDUCE, SIZES, torus).time_s, slow)
    with pytest.raises(ClusterSimError, match="cannot use ring; valid: hierarchical"):
        ANALYTIC.table(Op.ALL_REDUCE, SIZES, torus, algorithm=Algorithm.RING)
    with pytest.raises(ClusterSimError, match=r"NeuronLink collectives have no NCCL protocols \(got ll\)"):
        ANALYTIC.table(Op.ALL_REDUCE, SIZES, torus, protocol=Protocol.LL)


def test_nccls_table_takes_the_algorithm_and_protocol_asked():
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 2)
    ring = ANALYTIC.table(Op.ALL_REDUCE, SIZES, fabric, algorithm=Algorithm.RING)
    chosen = ANALYTIC.table(Op.ALL_REDUCE, SIZES, fabric)
    assert list(ring.algorithm) == [Algorithm.RING] * 2 and ring.time_s[-1] > chosen.time_s[-1]
    ll = ANALYTIC.table(Op.ALL_REDUCE, SIZES, fabric, protocol=Protocol.LL)
    assert list(ll.protocol) == [Protocol.LL] * 2 and ll.time_s[-1] > 10 * chosen.time_s[-1]
    assert HALF.table(Op.ALL_REDUCE, SIZES, fabric, algorithm=Algorithm.RING).time_s[-1] > ring.time_s[-1]


def _estimate(events: float = 1e6, seconds: float = 1.0, memory_bytes: float = 0.0) -> WorkEstimate:
    return WorkEstimate(what="a run", events=events, unit="flow-events", seconds=seconds, memory_bytes=memory_bytes,
                        default_bound=1e9)  # fmt: skip


def test_the_work_bound_refuses_past_its_edges_only_with_its_words():
    check_work(_estimate(memory_bytes=MEMORY_BOUND_BYTES))  # at the memory bound: run
    with pytest.raises(ClusterSimError) as found:
        check_work(_estimate(memory_bytes=MEMORY_BOUND_BYTES + 1), max_events=5.0)
    assert str(found.value) == (
        "a run: ~1e6 flow-events, ~1 s on a 2-core, 24 GiB machine, ~8 GiB of arrays; more than the 8 GiB of arrays "
        "a run may hold on this 2-core, 24 GiB machine: simulate fewer jobs, nodes or steps"
    )
    assert (found.value.field, found.value.value) == ("--max-events", 5.0)
    with pytest.raises(ClusterSimError) as found:
        check_work(_estimate(events=2e9))
    assert str(found.value) == (
        "a run: ~2e9 flow-events, ~1 s on a 2-core, 24 GiB machine; more than the default bound of 1e9 flow-events: "
        "pass --max-events 2e9 to run it anyway, or make it smaller"
    )
    assert (found.value.field, found.value.value) == ("--max-events", None)
    with pytest.raises(ClusterSimError) as found:
        check_work(_estimate(events=2e6), max_events=1e6)
    assert "more than the given bound of 1e6 flow-events (default 1e9): pass --max-events 2e6" in str(found.value)
    assert found.value.value == 1e6
    check_work(_estimate(seconds=DEFAULT_MAX_SECONDS))  # at the time bound: run
    with pytest.raises(ClusterSimError) as found:
        check_work(_estimate(seconds=DEFAULT_MAX_SECONDS + 1))
    assert "longer than the default bound of 3.0 min here (and 1e9 flow-events)" in str(found.value)
    assert (found.value.field, found.value.value) == ("--max-events", None)
    check_work(_estimate(seconds=10 * DEFAULT_MAX_SECONDS), max_events=1e7)  # a given bound replaces the time's


def test_a_duration_reads_in_the_unit_of_its_size():
    cases = {0.04: "0.04 s", 0.96: "1 s", 1.0: "1 s", 9.6: "10 s", 10.0: "10 s", 119.4: "119 s",
             120.0: "2.0 min", 7199.0: "120.0 min", 7200.0: "2.0 h", 3 * 86400 - 1: "72.0 h", 3 * 86400: "3 days",
             1e7: "116 days"}  # fmt: skip
    assert {s: duration(s) for s in cases} == cases


def test_an_estimate_names_its_memory_from_a_tenth_of_a_gib():
    assert _estimate(memory_bytes=2**30 / 10).describe().endswith("machine, ~0.1 GiB of arrays")
    assert _estimate(memory_bytes=2**30 / 10 - 1).describe().endswith("machine")
    assert _estimate(memory_bytes=3 * 2**30).describe().endswith(", ~3 GiB of arrays")


def _fabric(**changes: object) -> Fabric:
    base = {"name": "f", "devices_per_node": 8, "num_nodes": 2, "scaleup_bytes_per_s": 450e9,
            "network_bytes_per_s": 400e9, "in_network_reduction": False}  # fmt: skip
    return Fabric(**{**base, **changes})  # type: ignore[arg-type]


def test_a_fabric_is_refused_at_each_edge_with_its_own_words():
    refusals = {
        (("devices_per_node", 0),): "devices per node must be at least 1, got 0",
        (("num_nodes", 0),): "nodes must be at least 1, got 0",
        (("devices_per_node", 1), ("num_nodes", 1)): "a collective needs at least 2 devices",
        (("scaleup_bytes_per_s", 0.0),): "f: scale-up bandwidth must be positive",
        (("network_bytes_per_s", 0.0),): "f: more than one node needs a network bandwidth",
        (("network_latency_s", -1e-6),): "f: network latency must be at least 0 s, got -1e-06",
    }
    for changes, words in refusals.items():
        with pytest.raises(ClusterSimError) as found:
            _fabric(**dict(changes))
        assert str(found.value) == words
    # just inside each edge: one device on each of two nodes, a byte a second, no latency
    assert _fabric(devices_per_node=1, num_nodes=2).num_ranks == 2
    assert _fabric(scaleup_bytes_per_s=0.5, network_bytes_per_s=0.5, network_latency_s=0.0).num_nodes == 2
    assert _fabric(num_nodes=1, network_bytes_per_s=0.0).num_ranks == 8


def test_a_prediction_block_counts_as_a_layer_on_the_even_split():
    model = load_model("deepseek-v3", use_env=False)  # 61 layers and one MTP block
    assert model.mtp_layers == 1
    others, last = stage_split(model, LayoutArrays.of([Layout(tp=1, pp=2, dp=1, ep=1)]))
    assert (float(others[0]), float(last[0])) == (31.0, 31.0)  # ceil(62 / 2): the block is placed, not dropped


def test_the_largest_durations_and_the_bounds_rounding_edges():
    assert duration(1e10) == "115,741 days"
    assert _round_up(0.0) == 0.0 and _round_up(math.inf) == math.inf and _round_up(1234.0) == 1300.0


def test_a_torus_counts_its_links_and_hops_by_its_shape():
    closed, line, pair = Torus((4, 4), (True, True), LINK), Torus((4,), (False,), LINK), Torus((2,), (False,), LINK)
    assert [t.links_per_chip for t in (closed, line, pair)] == [4, 1, 1]
    assert Torus((2, 2), (True, True), LINK).links_per_chip == 2  # a closed pair is one link, not two
    assert Torus((3,), (True,), LINK).links_per_chip == 2
    assert line.mean_hops == pytest.approx(6 / 3) and Torus((4,), (True,), LINK).mean_hops == pytest.approx(4 / 3)
    assert pair.mean_hops == 1.0 and Torus((), (), LINK).mean_hops == 0.0
    assert Torus((2,), (False,), LINK, chip_stride=2).mean_hops == 2.0


def test_a_torus_is_refused_at_each_edge_with_its_own_words():
    refusals = {
        (("link_bytes_per_s", 0.0),): "NeuronLink bandwidth must be positive, got 0.0 B/s",
        (("ranks_per_chip", 0),): "ranks per chip, chip stride and ring instances must be at least 1, got 0, 1, 1",
        (("chip_stride", 0),): "ranks per chip, chip stride and ring instances must be at least 1, got 1, 0, 1",
        (("ring_nodes", 0),): "ranks per chip, chip stride and ring instances must be at least 1, got 1, 1, 0",
        (("ring_nodes", 2),): "2 instances on a NeuronLink ring need its link bandwidth",
    }
    for changes, words in refusals.items():
        with pytest.raises(ClusterSimError) as found:
            Torus((4,), (False,), **{"link_bytes_per_s": LINK, **dict(changes)})  # type: ignore[arg-type]
        assert str(found.value) == words
    assert Torus((4,), (False,), 0.5, ring_nodes=2, ring_link_bytes_per_s=0.5).num_chips == 4
    with pytest.raises(ClusterSimError) as found:
        _fabric(devices_per_node=3, torus=Torus((4,), (False,), LINK, ranks_per_chip=2))
    assert str(found.value) == "f: 3 devices per node do not fill chips of 2 ranks"


def test_a_group_sees_the_part_of_the_torus_its_members_span():
    whole = Torus((4, 4), (True, True), LINK, ranks_per_chip=2)
    two = whole.group(2, 2)  # a rank on each of two neighbouring chips: an open pair, the chip's four links kept
    assert two == Torus((2,), (False,), LINK, ranks_per_chip=1, chip_stride=1, chip_links=4)
    assert whole.group(3, 1) == Torus((3,), (False,), LINK, chip_links=4)  # three ranks share no chip evenly
    assert whole.group(1, 8).chip_stride == 1  # one member: no stride to keep
    assert whole.group(2, 4).chip_stride == 2  # two members two chips apart
