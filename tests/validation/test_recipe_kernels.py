"""Megatron-Bridge's FP8 attention and fused expert MLP: priced where a run used them, refused where it could not."""

from __future__ import annotations

import json

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import efficiency_for, efficiency_table
from clustersim.errors import ClusterSimError
from clustersim.training.estimate import estimate_training
from clustersim.validation.cases import project_dir
from clustersim.validation.training import case_setup, estimate_case

CATALOG = load_catalog(use_env=False)
GB300_30B = "mbridge2606_qwen3-30b-a3b_gb300_8gpu_mbs8_ep8_mxfp8"


def _case(case_id: str) -> dict:
    with (project_dir() / "training.jsonl").open() as lines:
        return next(c for c in map(json.loads, lines) if c["id"] == case_id)


def _with(case: dict, **software: object) -> dict:
    return dict(case, software=dict(case["software"], **software))


def _ops(case: dict) -> dict[str, tuple[float, float]]:
    estimate = estimate_case(case, CATALOG)
    return {op.name: (float(op.forward_s), float(op.backward_s)) for op in estimate.operations}


def test_the_26_06_recipes_settings_are_stated_and_move_their_runs_toward_the_measurement():
    case = _case(GB300_30B)
    assert case["software"]["fp8_attention"] is True and case["software"]["fused_expert_mlp"] is True
    plain = _with(case, fp8_attention=False, fused_expert_mlp=False)
    measured = case["measured"]["tokens_per_s_per_device"]
    with_kernels = estimate_case(case, CATALOG).tokens_per_s_per_device
    without = estimate_case(plain, CATALOG).tokens_per_s_per_device
    # measured 45,275 tokens/s a GPU (a held-out GB300 run): the recipe's kernels speed it and bring it closer
    assert without < with_kernels
    assert abs(with_kernels / measured - 1) < min(0.05, abs(without / measured - 1))


def test_fp8_attention_runs_the_core_at_the_fp8_rate_and_touches_nothing_else():
    case = _with(_case(GB300_30B), fused_expert_mlp=False)
    on, off = _ops(case), _ops(_with(case, fp8_attention=False))
    system = case_setup(case, CATALOG).system
    rate = system.peak_flop_per_s(Dtype.FP8) / system.peak_flop_per_s(Dtype.BF16)
    # the products run at the FP8 rate, the exponentials as before: the time saved is the products' (1 - 1 / rate),
    # the backward's 2.5 times the forward's (its products are 2.5x, its exponentials the same)
    saved_forward = off["attention core"][0] - on["attention core"][0]
    assert off["attention core"][0] / rate < on["attention core"][0] < off["attention core"][0]
    assert off["attention core"][1] - on["attention core"][1] == pytest.approx(2.5 * saved_forward)
    assert all(on[name] == pytest.approx(off[name]) for name in on if name != "attention core")


def test_the_fused_expert_mlp_drops_the_expert_activation_pass_and_the_per_slice_quantization():
    case = _with(_case(GB300_30B), fp8_attention=False)
    on, off = _ops(case), _ops(_with(case, fused_expert_mlp=False))
    setup = case_setup(case, CATALOG)
    model, layout = setup.model, setup.layout
    eff = efficiency_for(setup.system.accelerator, efficiency_table(use_env=False))
    # one slice per local expert and matrix, each paying expert_gemm_s unfused
    slices = model.moe.experts / layout.ep * model.ffn_type.num_matrices
    assert off["experts"][0] - on["experts"][0] == pytest.approx(slices * eff.expert_gemm_s, rel=1e-6)
    assert on["bias and activation"][0] < 0.5 * off["bias and activation"][0]  # only Q, K, V's bias passes remain
    assert on["attention core"] == pytest.approx(off["attention core"])
    assert on["token permutation"] == pytest.approx(off["token permutation"])


def test_a_profile_asking_for_the_fused_mlp_falls_back_off_blackwell_and_in_16_bits():
    gb300 = case_setup(_case(GB300_30B), CATALOG)
    hopper = json.loads(json.dumps(_case(GB300_30B)))
    hopper["system"] = {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8}
    hopper["software"]["fused_expert_mlp"] = False
    base = estimate_case(hopper, CATALOG)
    setup = case_setup(hopper, CATALOG)
    fused_profile = setup.software.model_copy(update={"fused_expert_mlp": True})
    asked = estimate_training(setup.model, setup.system, setup.layout, setup.job, software=fused_profile)
    assert np.isclose(asked.step_s, base.step_s)  # Transformer Engine runs the experts unfused on Hopper
    assert gb300.software.fused_expert_mlp


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"precision": "bf16"}, "software.fp8_attention needs an FP8 or 4-bit precision, got 'bf16'"),
        ({"system": {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8}}, "runs on blackwell GPUs only"),
    ],
)
def test_a_case_stating_a_kernel_its_run_could_not_use_is_refused(change: dict, message: str):
    case = dict(_case(GB300_30B), **change)
    with pytest.raises(ClusterSimError, match=message):
        case_setup(case, CATALOG)


def test_a_dense_model_cannot_state_the_fused_expert_mlp():
    case = _case(GB300_30B)
    dense = dict(case, model={k: v for k, v in case["model"].items() if k != "moe"})
    with pytest.raises(ClusterSimError, match="fused_expert_mlp needs a MoE model"):
        case_setup(_with(dense, fp8_attention=False), CATALOG)


MLPERF_GB300 = "mlperft60_deepseek-v3_gb300_256gpu_nvidia_tp1pp4vp4ep32_mxfp8"
MLPERF_GB200 = "mlperft60_deepseek-v3_gb200_512gpu_nvidia_tp2pp4vp4ep32_mxfp8"


def test_an_fp8_jobs_output_head_runs_in_bf16_unless_the_software_quantizes_it():
    case = _case(MLPERF_GB300)
    assert case["software"]["quantized_head"] is True  # the GB300 configs' FP8_OUTPUT_PROJ=True
    quantized, bf16 = _ops(case), _ops(_with(case, quantized_head=False))
    system = case_setup(case, CATALOG).system
    rate = system.peak_flop_per_s(Dtype.FP8) / system.peak_flop_per_s(Dtype.BF16)
    # the logits GEMM at the BF16 rate takes longer, by less than the rate (an FP8 GEMM pays its casts), and nothing
    # else moves
    assert quantized["logits"][0] < bf16["logits"][0] < rate * quantized["logits"][0]
    assert all(quantized[name] == pytest.approx(bf16[name]) for name in quantized if name != "logits")
    # a 16-bit job's head is the job's own format either way
    bf16_job = dict(_with(case, quantized_head=None, fp8_attention=None, fused_expert_mlp=None), precision="bf16")
    plain = estimate_case(bf16_job, CATALOG)
    assert plain.step_s > estimate_case(case, CATALOG).step_s


def test_a_16_bit_case_cannot_state_a_quantized_head():
    case = dict(_with(_case(MLPERF_GB300), fp8_attention=None, fused_expert_mlp=None), precision="bf16")
    with pytest.raises(ClusterSimError, match=r"software\.quantized_head needs an FP8 or 4-bit precision"):
        case_setup(case, CATALOG)


def test_a_stated_tp_overlap_is_honoured_and_unstated_is_the_frameworks():
    case = _case(MLPERF_GB200)
    assert case["parallel"]["tp"] == 2 and case["parallel"]["tp_overlap"] is False  # the recipe's tp_comm_overlap
    exposed = {t.name: t.exposed_s for t in estimate_case(case, CATALOG).terms}
    overlapped_case = dict(case, parallel=dict(case["parallel"], tp_overlap=True))
    unstated_case = dict(case, parallel={k: v for k, v in case["parallel"].items() if k != "tp_overlap"})
    overlapped = {t.name: t.exposed_s for t in estimate_case(overlapped_case, CATALOG).terms}
    unstated = {t.name: t.exposed_s for t in estimate_case(unstated_case, CATALOG).terms}
    assert exposed["tp comm"] > 0.5 and overlapped["tp comm"] < 0.1 * exposed["tp comm"]
    assert unstated == pytest.approx(overlapped)  # Megatron's profile overlaps TP on Blackwell
