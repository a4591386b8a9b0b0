"""4-bit float serving (NVFP4, MXFP4) and Blackwell's published serving runs.

Bytes with block scales, FP4 GEMMs at the fp4 peak, refusals off Blackwell and by engine, and the
project's Blackwell cases (TensorRT-LLM perf-overview, MLPerf Inference v5.0) within tolerance, each
source also scored at the GEMM fraction the other source alone picks.
"""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import (
    InferenceCalibration,
    default_calibration,
    serving_system_for_accelerator,
    step_times,
)
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.serving.formats import (
    BlockFp4,
    attention_dtype,
    bytes_per_element,
    check_formats,
    default_kv,
    gemm_dtype,
    parse_precision,
)
from clustersim.serving.memory import kv_bytes_per_token, matmul_params, weight_bytes_per_device
from clustersim.validation.cases import Case, project_dir, read_cases
from clustersim.validation.inference import case_estimate, predict_inference_case
from clustersim.validation.manifest import read_manifest
from clustersim.validation.specs import INFERENCE
from clustersim.workload.transformer import Quantization, QuantMethod, Transformer

CATALOG = load_catalog(use_env=False)
CAL = default_calibration()
LLAMA3_70B = Transformer(
    name="llama3-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256, ffn_type="swiglu"
)
NVFP4, MXFP4 = BlockFp4.NVFP4, BlockFp4.MXFP4
TRTLLM, MLPERF, MLPERF51 = "NVIDIA/TensorRT-LLM", "mlcommons/inference_results_v5.0", "mlcommons/inference_results_v5.1"


def b200(tp: int = 1):
    return serving_system_for_accelerator(CATALOG, "b200", tp=tp, devices_per_node=8)


# ---- formats ---------------------------------------------------------------------------------------


def test_block_scales_are_counted_in_the_bytes():
    # NVFP4: 16 E2M1 values (8 bytes) + one E4M3 scale = 9 bytes per 16; MXFP4: 16 bytes + one E8M0 per 32.
    assert bytes_per_element(NVFP4) == 9 / 16 == 0.5625
    assert bytes_per_element(MXFP4) == 17 / 32 == 0.53125
    assert (gemm_dtype(NVFP4), gemm_dtype(MXFP4), attention_dtype(NVFP4)) == (Dtype.FP4, Dtype.FP4, Dtype.FP8)
    assert default_kv(NVFP4) is Dtype.FP8 and default_kv(Dtype.BF16) is Dtype.BF16
    assert parse_precision(" NVFP4 ") is NVFP4 and parse_precision("mxfp4") is MXFP4


def test_fp4_weights_are_4_5_bits_with_scales_and_the_rest_stays_bf16():
    dense, expert = matmul_params(LLAMA3_70B)
    rest = LLAMA3_70B.num_params() - dense
    assert expert == 0
    assert weight_bytes_per_device(LLAMA3_70B, NVFP4) == pytest.approx(dense * 4.5 / 8 + rest * 2)
    assert weight_bytes_per_device(LLAMA3_70B, MXFP4, tp=2) == pytest.approx((dense * 4.25 / 8 + rest * 2) / 2)
    # about 38 GiB for a 70B model: the layers at 4.5 bits, embeddings and logits (2 x 1.05B) at 16
    assert 37 < weight_bytes_per_device(LLAMA3_70B, NVFP4) / 2**30 < 40


def test_an_nvfp4_kv_cache_is_9_16_of_an_fp8_one():
    assert kv_bytes_per_token(LLAMA3_70B, NVFP4) == pytest.approx(kv_bytes_per_token(LLAMA3_70B, Dtype.FP8) * 0.5625)


def test_an_fp8_cache_taken_by_default_beside_fp4_weights_is_said():
    (note,) = Request(1000, 1000, NVFP4).notes(LLAMA3_70B)
    assert note.startswith("kv cache: fp8 beside nvfp4 weights") and "--kv-cache" in note
    assert Request(1000, 1000, NVFP4, Dtype.FP8).notes(LLAMA3_70B) == ()
    assert Request(1000, 1000, Dtype.FP8).notes(LLAMA3_70B) == ()
    estimate = estimate_offline(LLAMA3_70B, b200(), Request(1000, 1000, MXFP4), batch=8)
    assert estimate.kv_precision == "fp8" and estimate.notes == Request(1000, 1000, MXFP4).notes(LLAMA3_70B)
    assert estimate.notes[0].startswith("kv cache: fp8 beside mxfp4 weights")


def test_a_case_reads_its_kv_precision():
    (case,) = [c for c in read_cases(project_dir() / "inference.jsonl") if c.id == "mlperf50_llama2-70b_1xb200_offline"]
    assert case.kv_precision == "fp8" and case.precision == "nvfp4"
    fp8 = case_estimate(case, CATALOG)
    nvfp4 = case_estimate(case.model_copy(update={"kv_precision": "nvfp4"}), CATALOG)
    assert (fp8.kv_precision, nvfp4.kv_precision) == ("fp8", "nvfp4")
    assert nvfp4.kv_bytes_per_token_per_device == pytest.approx(fp8.kv_bytes_per_token_per_device * 0.5625)
    assert nvfp4.max_batch > fp8.max_batch  # more sequences fit


# ---- refusals --------------------------------------------------------------------------------------


@pytest.mark.parametrize("accelerator", ["h100-sxm", "h200-sxm", "a100-sxm4-80gb", "trainium2", "trainium3"])
@pytest.mark.parametrize("fmt", [NVFP4, MXFP4])
def test_fp4_off_blackwell_is_refused_naming_the_format_the_accelerator_and_what_is_valid(accelerator, fmt):
    acc = CATALOG.accelerator(accelerator)
    message = rf"^precision: {fmt.value} is served on Blackwell's .*{accelerator}"
    with pytest.raises(ClusterSimError, match=message) as e:
        check_formats(fmt, Dtype.FP8, acc, "tensorrt-llm")
    assert e.value.field == "precision" and e.value.value == fmt.value
    valid = re.search(r"valid on \S+: (.*)\)$", str(e.value))
    assert valid is not None and "fp4" not in valid.group(1)


def test_fp4_on_hopper_is_refused_through_the_estimate():
    hopper = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=2, devices_per_node=8)
    with pytest.raises(ClusterSimError, match=r"valid on h100-sxm: bf16, fp16, fp8\)$"):
        estimate_offline(LLAMA3_70B, hopper, Request(1000, 1000, NVFP4))
    with pytest.raises(ClusterSimError, match=r"^kv precision: a nvfp4 KV cache is served on Blackwell"):
        estimate_offline(LLAMA3_70B, hopper, Request(1000, 1000, Dtype.FP8, NVFP4))


def test_what_no_engine_can_do_is_refused():
    blackwell = CATALOG.accelerator("b200")
    with pytest.raises(ClusterSimError, match=r"^kv precision: no engine stores a KV cache in mxfp4"):
        check_formats(NVFP4, MXFP4, blackwell, "tensorrt-llm")
    with pytest.raises(ClusterSimError, match=r"^kv precision: a nvfp4 KV cache is a tensorrt-llm feature, not vllm's"):
        check_formats(NVFP4, NVFP4, blackwell, "vllm")
    with pytest.raises(ClusterSimError, match=r"^precision: nvfp4 weights are served by .* not by transformers-neur"):
        check_formats(NVFP4, Dtype.FP8, blackwell, "transformers-neuronx")
    with pytest.raises(ClusterSimError, match=r"^precision: 'fp4' is ambiguous: say nvfp4 .* or mxfp4"):
        parse_precision("fp4")
    check_formats(NVFP4, NVFP4, blackwell, "tensorrt-llm")  # both supported: no error
    check_formats(MXFP4, Dtype.FP8, CATALOG.accelerator("gb200"), "vllm")


def test_a_quantized_checkpoint_at_an_fp4_precision_is_refused():
    gptq = LLAMA3_70B.model_copy(update={"quantization": Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128)})
    with pytest.raises(ClusterSimError, match=r"^precision: nvfp4 prices weights stored as nvfp4, but llama3-70b is a"):
        weight_bytes_per_device(gptq, NVFP4)


# ---- physics ---------------------------------------------------------------------------------------


def _decode_step(precision, kv, batch):
    return step_times(
        LLAMA3_70B,
        b200(),
        precision,
        kv,
        decode_sequences=batch,
        decode_context_tokens=1500.0,
        prefill_tokens=0.0,
        prefill_sequences=0.0,
        prompt_tokens=1000.0,
    )


def test_fp4_is_never_slower_than_fp8_at_equal_batch():
    batch = np.geomspace(1, 512, 24)
    fp8, fp4 = _decode_step(Dtype.FP8, Dtype.FP8, batch), _decode_step(NVFP4, Dtype.FP8, batch)
    assert np.all(fp4.step_s <= fp8.step_s)
    # weights read: 4.5 of 8 bits on the layers; the bf16 logits matrix is read the same
    head = LLAMA3_70B.vocab * LLAMA3_70B.hidden * 2 / (b200().system.memory_bandwidth_bytes_per_s * CAL.hbm_efficiency)
    assert (fp4.gemm_memory_s - head) == pytest.approx((fp8.gemm_memory_s - head) * 0.5625)
    # a memory-bound lone sequence gains exactly the weights' read time (decode attention reads the same fp8
    # cache, and the fixed costs per step and per layer are the same), most of its step
    assert fp4.decode_attention_s == pytest.approx(fp8.decode_attention_s)
    assert fp8.step_s[0] - fp4.step_s[0] == pytest.approx(fp8.gemm_memory_s[0] - fp4.gemm_memory_s[0], rel=1e-9)
    assert fp8.step_s[0] / fp4.step_s[0] > 1.4


def test_fp4_gemms_run_at_the_fp4_peak_and_attention_at_fp8():
    system = b200()
    assert system.peak_flop_per_s(NVFP4) == pytest.approx(2 * system.peak_flop_per_s(Dtype.FP8)) == 9e15
    prefill = dict(decode_sequences=0.0, decode_context_tokens=0.0, prefill_sequences=4.0, prompt_tokens=2048.0)
    fp8 = step_times(LLAMA3_70B, system, Dtype.FP8, Dtype.FP8, prefill_tokens=8192.0, **prefill)
    fp4 = step_times(LLAMA3_70B, system, NVFP4, Dtype.FP8, prefill_tokens=8192.0, **prefill)
    assert fp4.prefill_attention_s == pytest.approx(fp8.prefill_attention_s)  # both at the fp8 peak
    # the layers at the fp4 peak and Blackwell's fp4 fraction; the bf16 logits GEMM the same in both
    head_peak = system.peak_flop_per_s(Dtype.BF16) * CAL.flop_efficiency_on("blackwell", Dtype.BF16)
    head = 2 * (4 + CAL.gemm_half_tokens) * LLAMA3_70B.vocab * LLAMA3_70B.hidden / head_peak
    rates = (9e15 * CAL.flop_efficiency_on("blackwell", Dtype.FP4)) / (
        4.5e15 * CAL.flop_efficiency_on("blackwell", Dtype.FP8)
    )
    assert fp4.gemm_compute_s - head == pytest.approx((fp8.gemm_compute_s - head) / rates)
    assert rates > 1


def test_the_family_fraction_applies_to_its_family_and_format_only():
    fraction = dict(CAL.family_flop_efficiency)["blackwell.fp4"]
    assert CAL.flop_efficiency_on("blackwell", Dtype.FP4) == fraction != CAL.flop_efficiency
    assert CAL.flop_efficiency_on("blackwell", Dtype.FP8) == CAL.flop_efficiency
    assert CAL.flop_efficiency_on("hopper", Dtype.FP8) == CAL.flop_efficiency
    moved = dataclasses.replace(CAL, family_flop_efficiency=(("blackwell.fp4", 0.2),))
    hopper = serving_system_for_accelerator(CATALOG, "h200-sxm", tp=1, devices_per_node=8)
    for system, request in ((hopper, Request(1000, 1000, Dtype.FP8)), (b200(), Request(1000, 1000, Dtype.FP8))):
        assert estimate_offline(LLAMA3_70B, system, request, batch=64, cal=moved) == estimate_offline(
            LLAMA3_70B, system, request, batch=64, cal=CAL
        )
    fp4 = Request(1000, 1000, NVFP4)
    slower = estimate_offline(LLAMA3_70B, b200(), fp4, batch=256, cal=moved)
    assert slower.gemm_compute_s > estimate_offline(LLAMA3_70B, b200(), fp4, batch=256).gemm_compute_s
    fields = dataclasses.asdict(CAL)
    with pytest.raises(ValueError, match=r"family_flop_efficiency.blackwell.fp4: 1.5 is not a fraction"):
        InferenceCalibration(**{**fields, "family_flop_efficiency": {"blackwell.fp4": 1.5}})
    with pytest.raises(ValueError, match=r"key 'blackwell' is not 'family.format' \(formats: fp64, "):
        InferenceCalibration(**{**fields, "family_flop_efficiency": {"blackwell": 0.4}})


# ---- published Blackwell runs ------------------------------------------------------------------------


def _dense_blackwell() -> dict[str, list[Case]]:
    by_source: dict[str, list[Case]] = {TRTLLM: [], MLPERF: [], MLPERF51: []}
    for case in read_cases(project_dir() / "inference.jsonl"):
        system = case.system
        if system is None or system.accelerator not in ("b200", "gb200") or case.model is None or case.model.moe:
            continue
        if case.source.split()[0] in by_source:
            by_source[case.source.split()[0]].append(case)
    return by_source


def _mape(cases: list[Case], cal: InferenceCalibration) -> float:
    errors = [
        predict_inference_case(c, "output_tokens_per_s", CATALOG, cal) / c.measured["output_tokens_per_s"] - 1
        for c in cases
    ]
    return float(np.mean(np.abs(errors)))


def _with_blackwell(fraction: float) -> InferenceCalibration:
    return dataclasses.replace(CAL, family_flop_efficiency=(("blackwell.fp4", fraction),))


def test_dense_blackwell_runs_of_the_three_sources_within_tolerance():
    by_source = _dense_blackwell()
    assert [len(by_source[s]) for s in (TRTLLM, MLPERF, MLPERF51)] == [40, 5, 8]
    assert _mape(by_source[TRTLLM], CAL) < 0.12
    assert _mape(by_source[MLPERF], CAL) < 0.05
    assert _mape(by_source[MLPERF51], CAL) < 0.08
    # Hopper's fraction on Blackwell (every source left out) is far worse, and too fast: 10-11% against 1-7%
    # (12-16% against 1-6% before a decoder's context was the in-flight mean output's, 2026-12-03; 11% against 2-7%
    # before prefill attention paid its exponentials, 2026-12-04)
    hopper = _with_blackwell(CAL.flop_efficiency)
    assert all(_mape(cases, hopper) > max(0.095, 1.5 * _mape(cases, CAL)) for cases in by_source.values())


def test_the_recorded_fit_is_the_scan_over_its_cases():
    """calibration.toml's family entry: fitted on the dense Blackwell cases of the sources, its residual the
    mean over sources of their MAPE at the shipped value, and the best value of a scan at that resolution."""
    (entry,) = [e for name, e in read_manifest(INFERENCE, use_env=False).items() if name == "family_flop_efficiency"]
    by_source = _dense_blackwell()
    assert set(entry.fitted_on) == {c.id for cases in by_source.values() for c in cases}

    def objective(cal: InferenceCalibration) -> float:
        return float(np.mean([_mape(cases, cal) for cases in by_source.values()]))

    assert entry.residual == pytest.approx(objective(CAL), rel=0.02)  # other terms of the model move it a little
    shipped = CAL.flop_efficiency_on("blackwell", Dtype.FP4)
    for step in (-0.01, 0.01):
        assert objective(_with_blackwell(shipped + step)) > objective(CAL)


def _with_kv_read(fraction: float) -> InferenceCalibration:
    return dataclasses.replace(CAL, decode_attention_hbm_efficiency=(("blackwell", fraction),))


def test_blackwell_decode_attention_reads_the_cache_at_its_own_share_of_the_bandwidth():
    fp4, fp8 = parse_precision("nvfp4"), parse_precision("fp8")
    attention = {
        fraction: float(
            step_times(
                LLAMA3_70B, b200(), fp4, fp8, decode_sequences=256.0, decode_context_tokens=1500.0,
                prefill_tokens=0.0, prefill_sequences=0.0, prompt_tokens=1000.0, cal=_with_kv_read(fraction),
            ).decode_attention_s[()]
        )
        for fraction in (CAL.kv_read_efficiency_on("blackwell"), CAL.hbm_efficiency)
    }  # fmt: skip
    (shipped, hopper_like), (slow, fast) = attention, attention.values()
    assert slow / fast == pytest.approx(hopper_like / shipped, rel=1e-6)  # memory-bound: time goes as 1 / fraction
    assert CAL.kv_read_efficiency_on("hopper") == CAL.hbm_efficiency
    # the FlashInfer benchmark of TensorRT-LLM's Blackwell decode kernel reads 4.1-5.8 TB/s of a B200's 7.7
    assert 4.1e12 <= shipped * b200().system.memory_bandwidth_bytes_per_s <= 5.8e12


def test_the_recorded_decode_attention_fraction_is_the_joint_scans_best():
    """The two-parameter scan calibration.toml records, checked around its point: the kv fraction moved by 0.02
    either way, or at hbm_efficiency as before 2026-12-02 (objective 0.0557), is worse."""
    (entry,) = [e for n, e in read_manifest(INFERENCE, use_env=False).items() if n == "decode_attention_hbm_efficiency"]
    by_source = _dense_blackwell()
    assert set(entry.fitted_on) == {c.id for cases in by_source.values() for c in cases}

    def objective(cal: InferenceCalibration) -> float:
        return float(np.mean([_mape(cases, cal) for cases in by_source.values()]))

    shipped = objective(CAL)
    assert entry.residual == pytest.approx(shipped, rel=0.02)
    kv = CAL.kv_read_efficiency_on("blackwell")
    assert objective(_with_kv_read(CAL.hbm_efficiency)) > shipped + 0.01
    for step in (-0.02, 0.02):
        assert objective(_with_kv_read(kv + step)) >= shipped


def test_each_source_at_the_fraction_the_other_two_pick():
    """Left out: the Blackwell fraction that best fits the other sources (the mean of their MAPEs), scored on one."""
    by_source = _dense_blackwell()
    grid = np.arange(0.30, 0.50, 0.01)
    mapes = {s: np.array([_mape(cases, _with_blackwell(float(f))) for f in grid]) for s, cases in by_source.items()}
    for source, own in mapes.items():
        others = np.mean([m for s, m in mapes.items() if s != source], axis=0)
        assert own[int(np.argmin(others))] < 0.12, source


def test_the_h200_columns_of_the_same_table_are_predicted_out_of_sample():
    """The Hopper fit saw the H100 columns of perf-overview @00f37686; its H200 FP8 columns are new."""
    cases = [
        c
        for c in read_cases(project_dir() / "inference.jsonl")
        if c.id.startswith("trtllm_perf_") and "_h200_tp" in c.id and "@00f37686" in c.source
    ]
    assert len(cases) == 30
    assert _mape(cases, CAL) < 0.08


# ---- the command line ----------------------------------------------------------------------------------


def test_serve_nvfp4_on_a_b200_instance_and_its_scenario_file(tmp_path):
    import json

    from typer.testing import CliRunner

    from clustersim.cli.app import app

    runner = CliRunner()
    args = ["serve", "llama3.3-70b", "--instance", "p6-b200.48xlarge", "--tp", "1", "--precision", "nvfp4"]
    result = runner.invoke(app, [*args, "--input", "1000", "--output", "1000", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["precision"], out["kv_precision"], out["device"]) == ("nvfp4", "fp8", "b200")
    assert any(note.startswith("kv cache: fp8 beside nvfp4") for note in out["notes"])
    saved = tmp_path / "fp4.toml"
    result = runner.invoke(app, [*args, "--kv-cache", "nvfp4", "--save-scenario", str(saved)])
    assert result.exit_code == 0, result.output
    assert 'precision = "nvfp4"' in saved.read_text() and 'kv_cache = "nvfp4"' in saved.read_text()
    refused = runner.invoke(
        app, ["serve", "llama3.3-70b", "--instance", "p5.48xlarge", "--precision", "mxfp4", "--json"]
    )
    assert refused.exit_code == 2
    error = json.loads(refused.stderr or refused.output)
    assert (
        error["value"] == "mxfp4"
        and "h100-sxm" in error["error"]
        and "valid on h100-sxm: bf16, fp16, fp8" in error["error"]
    )
