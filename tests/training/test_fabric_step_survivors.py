"""Tests that kill what mutation testing of ``training/fabric_step`` left alive (benchmarks/mutation.py):
the shape of an EP group's per-node dispatch (network copy ratio, ranks a node fans out to), and the
ranks of a group and the JSON record of a simulated kind."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.dispatch import gpu_copy_ratio, network_copy_ratio
from clustersim.compute.software import software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.network.collectives import Algorithm, Op, busbw_factor
from clustersim.network.flowsim.cluster import fat_tree_for_instance
from clustersim.network.flowsim.results import LinkReport
from clustersim.system import system_for_instance
from clustersim.training.fabric_step import KindOnFabric, StepCollective, StepOnFabric, ep_dispatch_shape, rank_gpus
from clustersim.workload.transformer import MoE

SYSTEM = system_for_instance(load_catalog(use_env=False), "p5.48xlarge", 4)  # 8 GPUs a node
PER_NODE, PER_EXPERT = True, False  # DeepEP / HybridEP against NCCL's all-to-all
MOE = MoE(experts=64, top_k=6)


def _ratio(nodes: int) -> float:
    return float(network_copy_ratio(MOE.experts, MOE.top_k, nodes)[()])


def _per_gpu(ranks: int) -> float:
    return float(gpu_copy_ratio(MOE.experts, MOE.top_k, ranks)[()])


def test_a_group_fans_out_to_its_ranks_on_one_node():
    assert software_for(None, SYSTEM.accelerator.family).ep_dispatch_per_node and SYSTEM.scaleup_devices == 8
    # 16 consecutive ranks: 8 a node over 2 nodes; 12 still need 2 nodes (8 + 4).
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 16, 1) == (pytest.approx(_ratio(2)), 8, pytest.approx(_per_gpu(16)))
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 12, 1) == (pytest.approx(_ratio(2)), 8, pytest.approx(_per_gpu(12)))
    # 4 apart: 2 of the group's ranks a node, 8 ranks over 4 nodes.
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 8, 4) == (pytest.approx(_ratio(4)), 2, pytest.approx(_per_gpu(8)))
    # 16 apart, wider than a node: one rank a node.
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 4, 16) == (pytest.approx(_ratio(4)), 1, pytest.approx(_per_gpu(4)))
    assert _ratio(2) != _ratio(4)


def test_a_plain_all_to_all_sends_every_copy_and_a_per_node_one_on_one_node_one_per_gpu():
    assert ep_dispatch_shape(SYSTEM, PER_EXPERT, MOE, 16, 1) == (1.0, 1, 1.0)
    # 6 of 64 experts over 8 GPUs of 8: a GPU misses all 6 with probability C(56, 6) / C(64, 6).
    miss = math.comb(56, 6) / math.comb(64, 6)
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 8, 1) == (pytest.approx(8 * (1 - miss) / 6), 1, 1.0)
    assert ep_dispatch_shape(SYSTEM, PER_NODE, MOE, 4, 2) == (pytest.approx(_per_gpu(4)), 1, 1.0)
    assert _per_gpu(4) < _per_gpu(8) < 1.0  # more experts a GPU, more of a token's copies merged


def test_a_groups_ranks_are_its_row_and_a_pipeline_pair_is_two():
    pairs = StepCollective("pp", Op.SENDRECV, 1e6, np.array([[0, 16], [1, 17], [2, 18]]), 16, 2.0, 1e-3, 1e-3)
    assert (pairs.group_ranks, pairs.num_groups) == (2, 3)
    rings = StepCollective("dp", Op.ALL_REDUCE, 1e6, np.arange(8).reshape(2, 4), 8, 1.0, 1e-3, 1e-3)
    assert (rings.group_ranks, rings.num_groups) == (4, 2)


def test_a_kinds_record_carries_its_times_per_collective_and_per_step():
    pairs = StepCollective("pp", Op.SENDRECV, 1e6, np.array([[0, 16], [1, 17]]), 16, 4.0, 2e-5, 1e-5)
    links = LinkReport(np.array([0.5]), np.array([0.75]), np.array([1], np.int8), {"leaf": 0.5}, [("l0", 0.75)], "leaf")
    record = KindOnFabric(pairs, Algorithm.DIRECT, 3e-5, 4e-5, links, 1, 1).to_dict()
    assert record == {
        "kind": "pp",
        "op": Op.SENDRECV.value,
        "algorithm": Algorithm.DIRECT.value,
        "links": "ideal",
        "bandwidth_time_s": 0.0,
        "num_groups": 2,
        "group_ranks": 2,
        "stride": 16,
        "size_bytes": 1e6,
        "per_step": 4.0,
        "time_s": 3e-5,
        "busbw_bytes_per_s": pytest.approx(1e6 / 3e-5 * busbw_factor(Op.SENDRECV, 2)),
        "ideal_time_s": 1e-5,
        "analytic_time_s": 2e-5,
        "sim_over_ideal": pytest.approx(3.0),
        "sim_over_analytic": pytest.approx(1.5),
        "together_time_s": 4e-5,
        "step_time_s": pytest.approx(4 * 3e-5),  # a step runs the send 4 times
        "analytic_step_time_s": pytest.approx(4 * 2e-5),
        "steps_simulated": 1,
        "steps_total": 1,
        "max_link_utilization": 0.75,
        "tier_utilization": {"leaf": 0.5},
        "hottest_links": [{"link": "l0", "utilization": 0.75}],
        "binding_tier": "leaf",
    }


def test_the_steps_record_names_the_run_with_every_kind_at_once():
    pairs = StepCollective("pp", Op.SENDRECV, 1e6, np.array([[0, 16]]), 16, 4.0, 2e-5, 1e-5)
    links = LinkReport(np.array([0.5]), np.array([0.75]), np.array([1], np.int8), {"leaf": 0.5}, [("l0", 0.75)], "leaf")
    kind = KindOnFabric(pairs, Algorithm.DIRECT, 3e-5, 4e-5, links, 1, 1)
    layout = Layout(tp=8, pp=2, dp=2, zero=1)
    step = StepOnFabric("t", layout, "spray", [kind], links, 5e-5, np.array([5e-5]), np.array([0]))
    assert step.to_dict() == {
        "title": "t",
        "layout": layout.model_dump(mode="json"),
        "routing": "spray",
        "links": "ideal",
        "collectives": [kind.to_dict()],
        "together": {
            "makespan_s": 5e-5,
            "max_link_utilization": 0.75,
            "tier_utilization": {"leaf": 0.5},
            "hottest_links": [{"link": "l0", "utilization": 0.75}],
            "binding_tier": "leaf",
        },
        "max_link_utilization": 0.75,
    }


def test_a_placement_of_the_wrong_size_is_refused_with_the_host_count():
    tree = fat_tree_for_instance(load_catalog(use_env=False), "p5.48xlarge", 4, fabric_hosts=64)
    with pytest.raises(ClusterSimError) as err:
        rank_gpus(tree, np.arange(3), 32)
    assert (err.value.field, err.value.value) == ("nodes", 3)
    assert str(err.value).startswith("3 hosts of 8 GPUs hold 24 ranks, not the layout's 32")


def test_the_routing_and_its_seed_reach_every_kind():
    """16 hosts at random on a 2:1 fabric: spraying keeps every kind at its pace; ECMP's hash collides the
    pipeline sends and the DP rings on the spine links, and where depends on the seed."""
    from clustersim.network.flowsim.cluster import Placement, place
    from clustersim.network.flowsim.routing import Routing
    from clustersim.system import system_for_instance
    from clustersim.training.fabric_step import step_collectives, step_on_fabric
    from clustersim.training.job import TrainingJob
    from clustersim.workload import zoo

    catalog, model = load_catalog(use_env=False), zoo.load_model("llama3-8b", use_env=False)
    layout = Layout(tp=8, pp=2, dp=8, zero=1, sequence_parallel=True)
    system = system_for_instance(catalog, "p5.48xlarge", 16)
    collectives = step_collectives(model, system, layout, TrainingJob(global_batch=64, seq_len=model.seq_len))
    tree = fat_tree_for_instance(catalog, "p5.48xlarge", 16, fabric_hosts=256, oversubscription=2)
    hosts = place(tree, 16, Placement.RANDOM, seed=5)

    def times(routing: Routing, seed: int) -> dict[str, float]:
        step = step_on_fabric(
            collectives, tree, hosts, layout=layout, title="t", routing=routing, seed=seed, ideal=True
        )
        return {k.collective.kind: k.time_s for k in step.kinds}

    spray, ecmp = times(Routing.SPRAY, 1), times(Routing.ECMP, 1)
    assert spray == times(Routing.SPRAY, 2)  # spraying has no hash
    assert ecmp["tp"] == spray["tp"]  # inside a host: no network path to pick
    assert ecmp["pp"] > 1.5 * spray["pp"] and ecmp["dp reduce-scatter"] > 1.5 * spray["dp reduce-scatter"]
    assert ecmp == times(Routing.ECMP, 1) and ecmp != times(Routing.ECMP, 2)
