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
