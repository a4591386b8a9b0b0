"""MoE parallel folding: expert groups built from all tp x cp x dp ranks of a stage (Megatron-Core)."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.memory import params_per_device
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, expert_tp
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
MIXTRAL = load_model("mixtral-8x7b", use_env=False)  # 8 experts, 32 layers


def test_ep_wider_than_dp_folds_over_the_tensor_parallel_ranks():
    assert expert_tp(2, 1, 4, 8) == 1  # 8 experts over tp 2 x dp 4: each expert whole on one rank
    assert expert_tp(2, 1, 8, 4) == 2  # ep inside dp: experts split like the dense layers
    assert expert_tp(4, 1, 4, 8) == 2
    layout = Layout(tp=2, dp=4, ep=8, sequence_parallel=True)
    layout.check(MIXTRAL, num_devices=8, global_batch=8, seq_len=4096)  # valid with folding
    with pytest.raises(ClusterSimError, match=r"ep 8 must divide the ranks the experts fold over, tp\*cp\*dp = 4"):
        Layout(tp=2, dp=2, ep=8).check(MIXTRAL, num_devices=4, global_batch=8, seq_len=4096)


def test_a_folded_expert_is_held_whole_by_one_rank():
    mlp = MIXTRAL.mlp_params()
    folded = LayoutArrays.of([Layout(tp=2, dp=4, ep=8)])
    classic = LayoutArrays.of([Layout(tp=2, dp=8, ep=8)])
    # Same dense part per rank (tp 2); routed experts: 8/8 whole (folded) vs 8/8 split over tp 2 (classic).
    difference = params_per_device(MIXTRAL, folded) - params_per_device(MIXTRAL, classic)
    assert float(difference[0]) == pytest.approx(MIXTRAL.layers * (mlp - mlp / 2), rel=1e-12)


def test_folded_expert_traffic_runs_over_neighbouring_ranks():
    system = system_for_instance(CATALOG, "p5.48xlarge", 1)
    job = TrainingJob(global_batch=8, seq_len=4096)
    folded = estimate_training(MIXTRAL, system, Layout(tp=2, dp=4, ep=8, sequence_parallel=True), job)
    ep = {t.name: t for t in folded.terms}["ep comm"]
    assert ep.link_s > 0 and np.isfinite(folded.step_s)
    # Tensor parallelism shards the tokens each rank dispatches (sequence parallel): per micro-batch
    # (2 of them here, 1 with dp 8) tp 2 sends half as much as tp 1.
    tp1 = estimate_training(MIXTRAL, system, Layout(dp=8, ep=8), job)
    assert ep.link_s / 2 < {t.name: t for t in tp1.terms}["ep comm"].link_s


def test_a_stated_expert_tp_degree_is_checked_kept_and_folds_the_expert_groups():
    """``etp`` (Megatron-Core's expert_tensor_parallel_size) where a layout states it: ep * etp must divide the
    stage's tp * cp * dp ranks, a dense model has no experts to split, and the degree survives the arrays."""
    layout = Layout(tp=4, dp=8, ep=8, etp=1, sequence_parallel=True)
    layout.check(MIXTRAL, num_devices=32, global_batch=8, seq_len=4096)
    assert "etp 1" in layout.describe()
    arrays = LayoutArrays.of([layout, Layout(tp=4, dp=8, ep=8, sequence_parallel=True)])
    assert arrays.etp.tolist() == [1, 4] and arrays.layout(0) == layout and arrays.layout(1).etp is None
    assert arrays.select(np.array([1, 0])).layout(1) == layout
    # Stated, the expert group is etp apart (ranks 0-7: one node); derived inside dp, tp * cp apart as before.
    assert arrays.ep_stride.tolist() == [1, 4]
    with pytest.raises(ClusterSimError, match=r"ep\*etp = 8\*3 must divide .* tp\*cp\*dp = 32"):
        Layout(tp=4, dp=8, ep=8, etp=3).check(MIXTRAL, num_devices=32, global_batch=8, seq_len=4096)
    dense = load_model("llama3-8b", use_env=False)
    with pytest.raises(ClusterSimError, match="etp 2 needs a mixture-of-experts model") as refused:
        Layout(tp=4, dp=8, etp=2).check(dense, num_devices=32, global_batch=8, seq_len=4096)
    assert refused.value.field == "etp"


def test_whole_experts_inside_a_node_send_their_tokens_over_nvlink_and_hold_tp_times_the_weights():
    """Grok-1 style: tp 4, ep 8 on 4 nodes. Derived, each expert is split over tp 4 and the EP group strides
    over 4 nodes; with etp 1 the experts are whole and the group is one node's 8 GPUs: the all-to-all leaves
    the network (cheaper) and each GPU holds 4x the expert weights."""
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(global_batch=64, seq_len=4096)
    spread = estimate_training(MIXTRAL, system, Layout(tp=4, dp=8, ep=8, sequence_parallel=True), job)
    whole = estimate_training(MIXTRAL, system, Layout(tp=4, dp=8, ep=8, etp=1, sequence_parallel=True), job)
    ep_spread, ep_whole = ({t.name: t for t in e.terms}["ep comm"].link_s for e in (spread, whole))
    assert ep_whole < 0.5 * ep_spread
    routed = MIXTRAL.moe_layers * MIXTRAL.mlp_params()  # one expert per rank (8 experts, ep 8)
    spread_params, whole_params = params_per_device(MIXTRAL, LayoutArrays.of([spread.layout, whole.layout]))
    assert whole_params - spread_params == pytest.approx(routed * (1 - 1 / 4), rel=1e-9)


def test_a_stated_token_dispatcher_survives_the_arrays_and_is_shown():
    stated = [Layout(tp=4, dp=8, ep=8, ep_dispatcher=d) for d in ("alltoall", "deepep")]
    arrays = LayoutArrays.of([*stated, Layout(tp=4, dp=8, ep=8)])
    assert [arrays.layout(i) for i in range(2)] == stated and arrays.layout(2).ep_dispatcher is None
    assert "dispatch alltoall" in stated[0].describe() and "dispatch" not in arrays.layout(2).describe()
