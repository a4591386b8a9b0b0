"""The collective model: nccl-tests definitions, closed forms, physics invariants, validation targets."""

import dataclasses
import json
import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Network
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.network import Algorithm, Op, Protocol, busbw_factor, fabric_for_instance, parse_op, predict_collective
from clustersim.network.analytic import DEFAULT_CALIBRATION, collective_time_s
from clustersim.network.fabric import Fabric
from clustersim.network.topology import cluster_limit
from clustersim.validation.cases import bundled_dir
from clustersim.validation.collective import predict_collective_case

CATALOG = load_catalog(use_env=False)
NO_RAMP = dataclasses.replace(
    DEFAULT_CALIBRATION,
    ramp_intra_node_bytes=0.0,
    ramp_bytes={"reduce": 0.0, "gather": 0.0, "alltoall": 0.0},
)
GROUND_TRUTH = bundled_dir() / "collectives.jsonl"


def p5(nodes):
    return fabric_for_instance(CATALOG, "p5.48xlarge", nodes)


def test_busbw_factors_are_nccl_tests():
    assert busbw_factor(Op.ALL_REDUCE, 8) == pytest.approx(14 / 8)
    assert busbw_factor(Op.ALL_GATHER, 16) == pytest.approx(15 / 16)
    assert busbw_factor(Op.ALLTOALL, 16) == pytest.approx(15 / 16)
    assert busbw_factor(Op.BROADCAST, 16) == 1.0
    assert busbw_factor(Op.SENDRECV, 2) == 1.0


def test_op_names():
    assert parse_op("allreduce") is Op.ALL_REDUCE
    assert parse_op("All-Gather") is Op.ALL_GATHER
    with pytest.raises(UnknownNameError, match="all_reduce"):
        parse_op("all_reduse")


def test_ring_matches_its_closed_form_in_one_node():
    size = 2.0**30
    table = predict_collective(
        Op.ALL_REDUCE, size, p5(1), algorithm=Algorithm.RING, protocol=Protocol.SIMPLE, cal=NO_RAMP
    )
    latency = (8.4 + 14 * 3.4) * 1e-6
    expected = latency + 2 * 7 / 8 * size / (450e9 * DEFAULT_CALIBRATION.nvlink_efficiency)
    assert table.time_s[0] == pytest.approx(expected, rel=1e-9)
    assert table.busbw_bytes_per_s[0] == pytest.approx(table.algbw_bytes_per_s[0] * 14 / 8)


def test_tree_matches_its_closed_form_on_two_nodes():
    size = 2.0**30
    fabric = p5(2)
    table = predict_collective(
        Op.ALL_REDUCE, size, fabric, algorithm=Algorithm.TREE, protocol=Protocol.SIMPLE, cal=NO_RAMP
    )
    # NCCL's table plus EFA v2's 20 us on the one network hop up and the one down (H100: no flush).
    latency = (8.4 + 2 * (7 * 4.0 + 1 * (14.0 + 20.0))) * 1e-6
    network = 400e9 * DEFAULT_CALIBRATION.network_efficiency
    nvlink = 450e9 * DEFAULT_CALIBRATION.nvlink_efficiency
    assert table.time_s[0] == pytest.approx(latency + size / min(nvlink / 2, network), rel=1e-9)


def test_single_node_nvls_is_about_1_3x_ring():
    ring = predict_collective(Op.ALL_REDUCE, 4 * 2.0**30, p5(1), algorithm=Algorithm.RING).busbw_bytes_per_s[0]
    nvls = predict_collective(Op.ALL_REDUCE, 4 * 2.0**30, p5(1), algorithm=Algorithm.NVLS).busbw_bytes_per_s[0]
    assert ring == pytest.approx(370e9, rel=0.03)
    assert nvls / ring == pytest.approx(1.3, abs=0.05)


def test_small_messages_use_ll_and_large_use_simple():
    table = predict_collective(Op.ALL_REDUCE, [1024, 2.0**32], p5(1))
    assert table.protocol == [Protocol.LL, Protocol.SIMPLE]
    assert table.algorithm[1] is Algorithm.NVLS


def test_nvls_needs_a_switch_that_reduces():
    a100 = fabric_for_instance(CATALOG, "p4de.24xlarge", 1)
    with pytest.raises(ClusterSimError, match="cannot use nvls"):
        predict_collective(Op.ALL_REDUCE, 1e9, a100, algorithm=Algorithm.NVLS)


ops = st.sampled_from(list(Op))
instances = st.sampled_from(["p4d.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "dgx-a100"])
node_counts = st.sampled_from([1, 2, 3, 4, 16, 128, 2500])


def _fits(instance, nodes):
    """Within the instance's largest catalogued cluster (p4d: 500 instances), which a job may not exceed."""
    limit = cluster_limit(CATALOG, instance)
    return limit is None or nodes <= limit.max_nodes


@settings(max_examples=60, deadline=None)
@given(op=ops, instance=instances, nodes=node_counts)
def test_time_never_falls_as_size_grows(op, instance, nodes):
    assume(_fits(instance, nodes))
    fabric = fabric_for_instance(CATALOG, instance, nodes)
    sizes = np.logspace(0, 11, 60)
    times = predict_collective(op, sizes, fabric).time_s
    assert np.all(np.diff(times) >= -1e-15)


@settings(max_examples=60, deadline=None)
@given(op=ops, nodes=node_counts.filter(lambda n: n > 1), size=st.floats(1, 1e11), scale=st.floats(1.0, 16.0))
def test_more_bandwidth_is_never_slower(op, nodes, size, scale):
    base = p5(nodes)
    faster_network = dataclasses.replace(base, network_bytes_per_s=base.network_bytes_per_s * scale)
    faster_nvlink = dataclasses.replace(base, scaleup_bytes_per_s=base.scaleup_bytes_per_s * scale)
    t = predict_collective(op, size, base).time_s[0]
    assert predict_collective(op, size, faster_network).time_s[0] <= t * (1 + 1e-12)
    assert predict_collective(op, size, faster_nvlink).time_s[0] <= t * (1 + 1e-12)


@settings(max_examples=60, deadline=None)
@given(op=ops, instance=instances, nodes=node_counts, size=st.floats(1e3, 1e11))
def test_busbw_exceeds_the_links_only_where_named(op, instance, nodes, size):
    assume(_fits(instance, nodes))
    table = predict_collective(op, size, fabric_for_instance(CATALOG, instance, nodes))
    if table.busbw_exceeds_links[0]:
        assert table.algorithm[0] in (Algorithm.NVLS, Algorithm.NVLSTREE, Algorithm.TREE, Algorithm.HIERARCHICAL)
        assert nodes <= 3  # a tree over 2 or 3 nodes moves less than a ring (SimAI calcTreeBusBw)


def test_twenty_thousand_gpus_run_the_nvlstree_closed_form():
    """1 GiB all-reduce on 2,500 p5 nodes: a ring's 39,998 steps cost 0.38 s of latency alone, so a
    tree wins: NVLink SHARP inside the node, network-bound across at half of a node's achieved 388 GB/s
    (above the plain tree's NVLink chain at 185 GB/s), with a ramp grown with the node count."""
    size, nodes, n = 2.0**30, 2500, 20_000
    table = predict_collective(Op.ALL_REDUCE, size, p5(nodes))
    assert table.fabric.num_ranks == n
    expected = ([Algorithm.NVLSTREE], [Protocol.SIMPLE], ["network (tree)"])
    assert (table.algorithm, table.protocol, table.bound) == expected
    cal = DEFAULT_CALIBRATION
    latency = (25.0 + 2 * math.log2(nodes) * (20.9 + 20.0)) * 1e-6  # NVLS, then up and down the tree over EFA
    algbw = min(450e9 * cal.nvls_efficiency, 0.5 * 400e9 * cal.network_efficiency)  # 194 GB/s
    half = cal.ramp_bytes["reduce"] * (nodes / 2) ** cal.ramp_node_exponent["reduce"]
    time = latency + size / algbw * (1 + (half / size) ** cal.ramp_exponent)
    assert table.time_s[0] == pytest.approx(time, rel=1e-9)
    assert table.busbw_bytes_per_s[0] == pytest.approx(size / time * 2 * (n - 1) / n, rel=1e-9)
    ring_latency = (8.4 + (2 * (n - 1) - 2 * (nodes - 1)) * 6.0 + 2 * (nodes - 1) * (14.0 + 20.0)) * 1e-6
    ring = predict_collective(Op.ALL_REDUCE, size, p5(nodes), algorithm=Algorithm.RING, protocol=Protocol.SIMPLE)
    assert ring.time_s[0] > ring_latency > 0.27


def test_bad_fabrics_are_clear_errors():
    with pytest.raises(ClusterSimError, match="nodes must be at least 1"):
        p5(0)
    with pytest.raises(ClusterSimError, match="sizes"):
        predict_collective(Op.ALL_REDUCE, -1, p5(2))
    with pytest.raises(ClusterSimError, match="network"):
        Fabric("x", 8, 2, 450e9, 0.0, False)


def test_validation_targets_on_measured_busbw():
    """Issue 10's bars: at most 8% MAPE from 64 MiB up, at most 15% for every source from 1 MiB up."""
    # GB200 NVL72 (CoreWeave's runs) is held out and not yet modelled right: the newest-hardware issue's target.
    cases = [json.loads(line) for line in GROUND_TRUTH.read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c["system"].get("accelerator") != "gb200"]
    errors = {
        c["id"]: predict_collective_case(c, "busbw_GBps", CATALOG) / c["measured"]["busbw_GBps"] - 1 for c in cases
    }
    large = [abs(errors[c["id"]]) for c in cases if c["size_bytes"] >= 64 * 2**20]
    assert len(large) > 50
    assert np.mean(large) <= 0.08
    by_source: dict[str, list[float]] = {}
    for c in cases:
        if c["size_bytes"] >= 2**20:
            source = c["source"].split(" ")[0] + " " + str(c["system"].get("instance"))
            by_source.setdefault(source, []).append(abs(errors[c["id"]]))
    assert len(by_source) >= 4  # p4de and p5 of awsome-distributed-training count apart
    assert all(np.mean(e) <= 0.15 for e in by_source.values()), {k: np.mean(e) for k, e in by_source.items()}
    assert max(abs(e) for e in errors.values()) <= 0.4  # the worst: a dip in the measured all-gather at 256 MiB


# ---- the network adapter: latency, protocols, flush ---------------------------------------------------------


def test_adapter_figures_come_from_the_catalog_with_their_sources():
    expected = {  # instance: (latency, LL/LL128 across nodes, flushes)
        "p4de.24xlarge": (17e-6, False, True),  # EFA v1, A100
        "p5.48xlarge": (20e-6, True, False),  # EFA v2, H100
        "p5en.48xlarge": (18e-6, True, False),  # EFA v3, H200
        "dgx-a100": (0.0, True, True),  # InfiniBand: NCCL's tables hold its latency
    }
    for instance, (latency, ll, flush) in expected.items():
        fabric = fabric_for_instance(CATALOG, instance, 2)
        assert fabric.network_latency_s == pytest.approx(latency), instance
        assert (fabric.network_ll_protocols, fabric.network_flush) == (ll, flush), instance
    v1, v2 = CATALOG.typed("efa-v1", Network), CATALOG.typed("efa-v2", Network)
    assert v1.latency_s is not None and "awsome-distributed-training" in v1.latency_s.source
    assert v2.latency_s is not None and "nccl_ofi_model.cpp" in v2.latency_s.source
    assert v1.nccl_ll_protocols is not None and not v1.nccl_ll_protocols.value
    assert "aws-ofi-nccl" in v1.nccl_ll_protocols.source


def test_two_p4de_all_reduce_small_messages_pay_the_simple_tree_latency():
    """8 B on 2 x p4de: NCCL runs Simple only over EFA v1, so the tree's Simple latency, each network hop
    paying EFA's 17 us twice (A100 flushes every receive): 8.4 + 2 x (7 x 4.0 + 14 + 2 x 17) = 160.4 us,
    where AWS measured 160.6-165.0 us (awsome-distributed-training nccl-tests README)."""
    fabric = fabric_for_instance(CATALOG, "p4de.24xlarge", 2)
    table = predict_collective(Op.ALL_REDUCE, 8.0, fabric)
    assert (table.algorithm, table.protocol) == ([Algorithm.TREE], [Protocol.SIMPLE])
    cal = DEFAULT_CALIBRATION
    algbw = min(300e9 * cal.nvlink_efficiency / 2, 50e9 * cal.network_efficiency)
    half = cal.ramp_bytes["reduce"]
    expected = 160.4e-6 + 8.0 / algbw * (1 + (half / 8.0) ** cal.ramp_exponent)
    assert table.time_s[0] == pytest.approx(expected, rel=1e-9)
    assert 160.6e-6 <= table.time_s[0] <= 165.0e-6
    with pytest.raises(ClusterSimError, match="cannot use tree/ll"):
        predict_collective(Op.ALL_REDUCE, 8.0, fabric, algorithm=Algorithm.TREE, protocol=Protocol.LL)
    # 2 x p5: LL crosses EFA v2, once per hop and no flush: 6.8 + 2 x (7 x 0.6 + 5.0 + 20) = 65.2 us
    # (measured 65-75 us at 8 B-1 KiB).
    p5_table = predict_collective(Op.ALL_REDUCE, 8.0, p5(2))
    assert (p5_table.algorithm, p5_table.protocol) == ([Algorithm.TREE], [Protocol.LL])
    assert p5_table.time_s[0] == pytest.approx(65.2e-6, rel=1e-3)


@settings(max_examples=60, deadline=None)
@given(op=ops, instance=instances)
def test_latency_grows_with_the_network_hops(op, instance):
    fabrics = [fabric_for_instance(CATALOG, instance, n) for n in (1, 2, 4, 16, 128)]
    times = [predict_collective(op, 1.0, fabric).time_s[0] for fabric in fabrics]
    assert times == sorted(times)


@settings(max_examples=60, deadline=None)
@given(op=ops, nodes=node_counts.filter(lambda n: n > 1), size=st.floats(1, 1e11), extra=st.floats(0, 1e-4))
def test_an_adapter_that_is_slower_to_answer_never_makes_a_collective_faster(op, nodes, size, extra):
    base = p5(nodes)
    t = predict_collective(op, size, base).time_s[0]
    for worse in (
        dataclasses.replace(base, network_latency_s=base.network_latency_s + extra),
        dataclasses.replace(base, network_flush=True),
        dataclasses.replace(base, network_ll_protocols=False),
    ):
        assert predict_collective(op, size, worse).time_s[0] >= t * (1 - 1e-12)


def test_case_fields():
    case = {
        "id": "x",
        "op": "all_reduce",
        "size_bytes": 2**30,
        "system": {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8, "nodes": 1},
        "algorithm": "ring",
    }
    busbw = predict_collective_case(case, "busbw_GBps", CATALOG)
    algbw = predict_collective_case(case, "algbw_GBps", CATALOG)
    time_us = predict_collective_case(case, "time_us", CATALOG)
    assert busbw == pytest.approx(algbw * 14 / 8)
    assert time_us == pytest.approx(2**30 / (algbw * 1e9) * 1e6)
    assert math.isfinite(time_us)


@settings(max_examples=40, deadline=None)
@given(
    op=st.sampled_from(list(Op)),
    instance=st.sampled_from(["p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "trn1.32xlarge"]),
    nodes=st.integers(1, 64),
    tuned=st.booleans(),
)
def test_fast_time_is_the_time_predict_collective_picks(op, instance, nodes, tuned):
    fabric = fabric_for_instance(CATALOG, instance, nodes)
    cal = dataclasses.replace(DEFAULT_CALIBRATION, network_efficiency=0.7) if tuned else DEFAULT_CALIBRATION
    sizes = 8.0 * 2.0 ** np.arange(31)
    expected = predict_collective(op, sizes, fabric, cal=cal).time_s
    assert np.allclose(collective_time_s(op, sizes, fabric, cal), expected, rtol=1e-12)
