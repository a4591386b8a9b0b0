"""ZeRO's parameter all-gathers in an 8-bit job's own format (Megatron's fp8_param_gather, on in every FP8 preset of
NeMo 2 and Megatron-Bridge): a byte and MXFP8's scale per 32 an element instead of two, for the distributed
optimizer's gather each step and FSDP's every layer; BF16 and NVFP4 jobs gather 16 bits; a case states it or not."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.memory import FP8_GATHERED_WEIGHT_BYTES, WEIGHT_BYTES, gathered_weight_bytes
from clustersim.compute.software import software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, Recompute
from clustersim.system import system_for_accelerator
from clustersim.training.estimate import TrainingJob, estimate_training
from clustersim.validation.training import case_setup
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_8B = load_model("llama3-8b", use_env=False)
MEGATRON = software_for("megatron", "hopper")
SYSTEM = system_for_accelerator(CATALOG, "h100-sxm", devices=64, devices_per_node=8, network_bits_per_s=400e9)


def _dp_link(zero: int, precision: Dtype, gather: bool) -> float:
    layout = Layout(tp=1, pp=1, dp=64, micro_batch=1, zero=zero, recompute=Recompute.NONE, sequence_parallel=False)
    software = MEGATRON.model_copy(update={"fp8_param_gather": gather})
    job = TrainingJob(global_batch=64, seq_len=4096, precision=precision)
    estimate = estimate_training(LLAMA_8B, SYSTEM, layout, job, software=software)
    return next(t.link_s for t in estimate.terms if t.name == "dp comm")


def test_an_fp8_gather_moves_a_byte_and_a_scale_per_32_elements_and_16_bit_jobs_two_bytes() -> None:
    assert gathered_weight_bytes(Dtype.FP8, True) == FP8_GATHERED_WEIGHT_BYTES == 1.03125
    assert gathered_weight_bytes(Dtype.FP8, False) == gathered_weight_bytes(Dtype.BF16, True) == WEIGHT_BYTES
    assert gathered_weight_bytes(Dtype.FP4, True) == WEIGHT_BYTES  # NVFP4 presets gather BF16


@pytest.mark.parametrize("zero", [1, 3])
def test_the_gathers_shrink_for_an_fp8_job_only(zero: int) -> None:
    fp8, fp8_16bit = _dp_link(zero, Dtype.FP8, True), _dp_link(zero, Dtype.FP8, False)
    assert fp8 < 0.95 * fp8_16bit  # the gathers at half the bytes; the gradients' reduce-scatter unchanged
    assert fp8 > 0.5 * fp8_16bit
    assert _dp_link(zero, Dtype.BF16, True) == pytest.approx(_dp_link(zero, Dtype.BF16, False))
    assert MEGATRON.fp8_param_gather  # the presets' default


def _case(precision: str, **software: object) -> dict[str, object]:
    return {
        "id": "t_gather",
        "kind": "training",
        "source": "test",
        "model": {"name": "llama3-8b", "layers": 32, "hidden": 4096, "ffn_hidden": 14336, "heads": 32, "kv_heads": 8}
        | {"vocab": 128256, "seq_len": 4096, "ffn_type": "swiglu"},
        "system": {"accelerator": "b200", "devices": 8, "devices_per_node": 8},
        "parallel": {"tp": 1, "pp": 1, "dp": 8, "micro_batch": 1, "global_batch": 8},
        "precision": precision,
        "measured": {"step_time_s": 1.0},
        "software": {"framework": "megatron", **software},
    }


def test_a_case_states_the_gather_and_a_16_or_4_bit_job_stating_it_is_refused() -> None:
    assert case_setup(_case("mxfp8"), CATALOG).software.fp8_param_gather
    assert not case_setup(_case("mxfp8", fp8_param_gather=False), CATALOG).software.fp8_param_gather
    for precision in ("bf16", "nvfp4"):
        with pytest.raises(ClusterSimError, match="fp8_param_gather needs an FP8 or MXFP8 precision"):
            case_setup(_case(precision, fp8_param_gather=True), CATALOG)
