"""One layer's operations and their times read the framework profile: its eager element-wise kernels and the share of
the hardware's GEMM rate its kernels reach (``clustersim.training.layer_times``)."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.execution import Layout, Recompute
from clustersim.system import system_for_accelerator
from clustersim.training.estimate import TrainingJob, estimate_training
from clustersim.workload.zoo import load_model

LLAMA_8B = load_model("llama3-8b", use_env=False)
H100 = system_for_accelerator(load_catalog(use_env=False), "h100-sxm", devices=8, devices_per_node=8)
LAYOUT = Layout(tp=1, pp=1, dp=8, micro_batch=1, zero=1, recompute=Recompute.NONE, sequence_parallel=False)
MEGATRON = software_for("megatron", "hopper")


def _layer(software: SoftwareProfile) -> dict[str, tuple[float, float]]:
    job = TrainingJob(global_batch=64, seq_len=4096, precision=Dtype.BF16)
    estimate = estimate_training(LLAMA_8B, H100, LAYOUT, job, software=software)
    return {op.name: (op.forward_s, op.backward_s) for op in estimate.operations if op.scope == "layer"}


def test_an_eager_stack_runs_its_element_wise_ops_as_kernels_of_their_own():
    fused, eager = _layer(MEGATRON), _layer(MEGATRON.model_copy(update={"eager_elementwise": True}))
    assert "eager element-wise" in eager and "eager element-wise" not in fused
    assert eager["eager element-wise"][0] > 0


def test_a_profiles_kernel_efficiency_divides_every_gemms_time():
    full, half = _layer(MEGATRON), _layer(MEGATRON.model_copy(update={"kernel_efficiency": 0.5}))
    assert MEGATRON.kernel_efficiency == 1.0
    for gemm in ("qkv", "output projection", "mlp"):
        assert half[gemm][0] == pytest.approx(2 * full[gemm][0], rel=1e-9)
    assert half["norms and residuals"] == pytest.approx(full["norms and residuals"], rel=1e-9)  # memory-bound
