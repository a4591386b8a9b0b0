"""Fused MoE kernels (``fused_expert_mlp``): TensorRT-LLM's CUTEDSL backend pays no per-token MoE cost.

The physics: a fused profile's step is its unfused step less exactly the routed tokens' ``moe_token_layer_s`` over
the MoE layers; a dense model's step does not change. The evidence, held out of every fit: MLPerf Inference v6.0's
17 DeepSeek-R1 offline runs, whose configs set ``moe_backend: CUTEDSL``, are within 10% MAPE with the setting the
cases state and over 30% too slow without it. The refusals: a dense model, a GPU other than Blackwell, 16-bit
weights; a training setting in a serving case's ``software``.
"""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import (
    ServingSystem,
    StepTimes,
    default_calibration,
    parse_precision,
    serving_system_for_accelerator,
)
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.serving.fused_experts import moe_token_cost_s
from clustersim.validation.cases import project_dir, read_cases
from clustersim.validation.inference import case_deployment, predict_inference_case
from clustersim.workload.zoo import load_model
from tests.serving.test_moe_blackwell import _step

CATALOG = load_catalog(use_env=False)
CAL = default_calibration()
CASES = read_cases(project_dir() / "inference.jsonl")
V6_OFFLINE = [c for c in CASES if c.id.startswith("mlperf60_deepseek-r1") and c.id.endswith("_offline")]


TOKENS = np.array([64.0, 512.0, 4096.0])  # decoding sequences in one step (beside one 2,048-token prompt)


def _system(accelerator: str) -> ServingSystem:
    return serving_system_for_accelerator(CATALOG, accelerator, tp=1)


def _steps(model: str, fused: bool) -> StepTimes:
    """One B200 step of ``model`` in NVFP4 (test_moe_blackwell's), with or without the fused kernels."""
    profile = engine_profile("tensorrt-llm").model_copy(update={"fused_expert_mlp": fused})
    return _step(load_model(model), decode=TOKENS, engine=profile)  # type: ignore[arg-type]


def test_a_fused_step_is_the_unfused_one_less_the_routed_tokens_cost() -> None:
    model = load_model("qwen3-30b-a3b")
    unfused, fused = _steps("qwen3-30b-a3b", False), _steps("qwen3-30b-a3b", True)
    saved = (TOKENS + 2048.0) * model.moe_layers * CAL.moe_token_layer_s  # one rank: every token routed here
    np.testing.assert_allclose(unfused.gemm_compute_s - fused.gemm_compute_s, saved, rtol=1e-9)
    assert np.all(fused.step_s < unfused.step_s)
    assert moe_token_cost_s(engine_profile("tensorrt-llm"), CAL) == CAL.moe_token_layer_s


def test_a_dense_model_is_refused_and_its_step_unchanged() -> None:
    np.testing.assert_allclose(_steps("llama3.1-8b", True).step_s, _steps("llama3.1-8b", False).step_s)
    profile = engine_profile("tensorrt-llm").model_copy(update={"fused_expert_mlp": True})
    request = Request(input_tokens=1024, output_tokens=1024, precision=parse_precision("nvfp4"))
    with pytest.raises(ClusterSimError, match=r"fused_expert_mlp: llama3\.1-8b is dense"):
        estimate_offline(load_model("llama3.1-8b"), _system("b200"), request, engine=profile)


@pytest.mark.parametrize(
    ("accelerator", "precision", "message"),
    [("h100-sxm", "fp8", "run on blackwell GPUs, not"), ("b200", "bf16", "8- or 4-bit weights")],
)
def test_the_kernels_need_blackwell_and_an_8_or_4_bit_format(accelerator: str, precision: str, message: str) -> None:
    profile = engine_profile("tensorrt-llm").model_copy(update={"fused_expert_mlp": True})
    request = Request(input_tokens=1024, output_tokens=1024, precision=parse_precision(precision))
    with pytest.raises(ClusterSimError, match=message) as caught:
        estimate_offline(load_model("qwen3-30b-a3b"), _system(accelerator), request, engine=profile)
    assert caught.value.field == "fused_expert_mlp" and caught.value.value is True


def test_a_case_states_it_in_software_and_a_training_setting_there_is_refused() -> None:
    case = V6_OFFLINE[0]
    assert case.software is not None and case.software.fused_expert_mlp
    assert case_deployment(case, CATALOG).engine.fused_expert_mlp
    plain = case.model_copy(update={"software": case.software.model_copy(update={"fused_expert_mlp": None})})
    assert not case_deployment(plain, CATALOG).engine.fused_expert_mlp
    raw = case.model_dump(mode="json")
    raw["software"]["fp8_attention"] = True
    with pytest.raises(ClusterSimError, match=r"software\.fp8_attention is a training setting") as caught:
        case_deployment(raw, CATALOG)
    assert caught.value.field == "software.fp8_attention"


def _offline_mape(fused: bool | None) -> float:
    errors = []
    for case in V6_OFFLINE:
        stated = (
            case
            if fused is None
            else case.model_copy(
                update={"software": case.software.model_copy(update={"fused_expert_mlp": fused})}  # type: ignore[union-attr]
            )
        )
        predicted = predict_inference_case(stated, "output_tokens_per_s", CATALOG)
        errors.append(predicted / case.measured["output_tokens_per_s"] - 1)
    return float(np.mean(np.abs(errors)))


def test_mlperf_v6_deepseek_r1_offline_runs_need_the_fused_kernels() -> None:
    """Held out: 17 runs of NVIDIA and seven partners on B200, B300, GB200 and GB300 (8 to 288 GPUs)."""
    assert len(V6_OFFLINE) == 17
    assert all(c.software is not None and c.software.fused_expert_mlp for c in V6_OFFLINE)
    assert _offline_mape(None) < 0.10
    assert _offline_mape(False) > 0.30
