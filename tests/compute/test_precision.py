"""Training number formats: where each runs, the refusals, and what a quantized GEMM costs."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import efficiency_for
from clustersim.compute.precision import (
    QUANTIZED_FORMATS,
    TrainingFormat,
    formats_on,
    job_dtype,
    parse_training_format,
    training_dtype,
)
from clustersim.errors import ClusterSimError
from clustersim.system import system_for_instance
from clustersim.training.pricing import operation_times
from clustersim.workload.ops import layer_operations
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)


@pytest.mark.parametrize(
    ("accelerator", "formats"),
    [
        ("a100-sxm4-80gb", "bf16 fp16"),  # no FP8 tensor cores
        ("h100-sxm", "bf16 fp16 fp8"),  # no block-scaled (MX) or FP4 tensor cores
        ("b200", "bf16 fp16 fp8 mxfp8 nvfp4 mxfp4"),
        ("gb200", "bf16 fp16 fp8 mxfp8 nvfp4 mxfp4"),
        ("trainium2", "bf16 fp16 fp8"),  # MXFP4 / MXFP8 are Trainium3's
        ("trainium3", "bf16 fp16 fp8 mxfp8 mxfp4"),  # NVFP4 is NVIDIA's format
    ],
)
def test_each_chip_runs_the_formats_its_tensor_cores_have(accelerator: str, formats: str):
    assert [f.value for f in formats_on(CATALOG.accelerator(accelerator))] == formats.split()


@pytest.mark.parametrize(
    ("text", "accelerator", "message"),
    [
        ("nvfp4", "h100-sxm", r"precision: nvfp4 GEMMs need tensor cores that h100-sxm \(hopper\) does not have "
                              r"\(valid on h100-sxm: bf16, fp16, fp8\)"),
        ("mxfp8", "h100-sxm", r"mxfp8 .*h100-sxm .*valid on h100-sxm: bf16, fp16, fp8\)"),
        ("nvfp4", "trainium3", r"nvfp4 .*trainium3 \(trainium\).*valid on trainium3: bf16, fp16, fp8, mxfp8, mxfp4\)"),
        ("fp8", "a100-sxm4-80gb", r"fp8 .*a100-sxm4-80gb \(ampere\).*valid on a100-sxm4-80gb: bf16, fp16\)"),
        ("fp4", "b200", r"'fp4' is ambiguous: say nvfp4 .* or mxfp4"),
        ("int4", "b200", r"unknown precision 'int4' \(valid: bf16, fp16, fp8, mxfp8, nvfp4, mxfp4\)"),
    ],
)  # fmt: skip
def test_a_format_the_chip_cannot_run_is_refused_naming_format_chip_and_what_is_valid(
    text: str, accelerator: str, message: str
):
    with pytest.raises(ClusterSimError, match=message) as info:
        training_dtype(text, CATALOG.accelerator(accelerator))
    assert info.value.field == "precision" and "\n" not in str(info.value)


def test_formats_map_to_the_peak_their_gemms_run_at():
    assert parse_training_format(" MXFP8 ") is TrainingFormat.MXFP8
    peaks = [job_dtype(f) for f in TrainingFormat]
    assert peaks == [Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.FP8, Dtype.FP4, Dtype.FP4]
    assert {"fp8", "mxfp8", "nvfp4", "mxfp4"} == QUANTIZED_FORMATS


def _gemm_seconds(instance: str, precision: Dtype) -> float:
    system = system_for_instance(CATALOG, instance, 8)
    ops = layer_operations(LLAMA_70B, tokens=8192.0, seq_len=8192, tp=2.0, sp_split=2.0, ep=1.0, fused_attention=True)
    times = operation_times(ops, system, efficiency_for(system.accelerator), precision)
    gemms = {op.name for op in ops if op.kind.name == "GEMM"}
    return float(sum(t.forward_s.sum() for t in times if t.name in gemms))


def test_an_fp8_gemm_runs_at_the_fp8_peak_times_the_fitted_ratio():
    system = system_for_instance(CATALOG, "p6-b200.48xlarge", 8)
    eff = efficiency_for(system.accelerator)
    ops = [op for op in layer_operations(LLAMA_70B, tokens=8192.0, seq_len=8192, tp=2.0, sp_split=2.0, ep=1.0,
                                         fused_attention=True) if op.kind.name == "GEMM"]  # fmt: skip
    times = operation_times(ops, system, eff, Dtype.FP8)
    for op, t in zip(ops, times, strict=True):
        rate = system.peak_flop_per_s(Dtype.FP8) * eff.fp8_efficiency_ratio * eff.gemm_fraction(op.gemm_flop)
        assert float(t.forward_s) == pytest.approx(float(op.flop / rate), rel=1e-12)


def test_a_4_bit_gemm_is_faster_than_fp8_but_its_casts_keep_it_short_of_twice():
    fp8, fp4 = _gemm_seconds("p6-b200.48xlarge", Dtype.FP8), _gemm_seconds("p6-b200.48xlarge", Dtype.FP4)
    eff = efficiency_for(CATALOG.accelerator("b200"))
    # FP4 peak = 2 x FP8 peak on B200; the casts an FP8 GEMM pays (1/ratio - 1 of its time) stay
    expected = (0.5 + 1 / eff.fp8_efficiency_ratio - 1) * eff.fp8_efficiency_ratio
    assert fp4 / fp8 == pytest.approx(expected, rel=1e-9)
    assert 0.5 < fp4 / fp8 < 1.0


def test_fp4_on_a_chip_without_fp4_tensor_cores_is_an_error_not_a_price():
    with pytest.raises(ClusterSimError, match="h100-sxm has no dense fp4 figure"):
        _gemm_seconds("p5.48xlarge", Dtype.FP4)
