"""Mamba-2's chunked scan priced at the slower of the share of the 16-bit peak its SSD kernels reach and a multiple of
the FP32 rate (vLLM PR #27299's H100 microbenchmark; on Blackwell at the B300's measured share of the H100's rate on
Triton's chunked kernels, FlashInfer PRs #4078 and #3866), in a training step and in a serving step; the Gated
DeltaNet's delta rule as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.compute.efficiency import efficiency_for
from clustersim.compute.scan_kernel import (
    BLACKWELL_SCAN_FP32_RATIO,
    SCAN_FP32_RATIO,
    SCAN_PEAK_FRACTION,
    fp32_bound_note,
    scan_fp32_ratio,
    scan_seconds,
)
from clustersim.system import system_for_instance
from clustersim.training.pricing import operation_times
from clustersim.workload.operation import OpKind
from clustersim.workload.ops import layer_operations
from clustersim.workload.zoo import load_model


def test_the_share_is_the_benchmarks_tokens_at_megatrons_scan_count_over_the_h100_peak() -> None:
    # 12.06M, 12.62M, 12.92M and 11.80M tokens/s at 4K-32K tokens; 7 x 8192 x 128 FLOPs a token; 989 TFLOP/s BF16
    tokens_per_s = np.mean([12.06e6, 12.62e6, 12.92e6, 11.80e6])
    share = SCAN_PEAK_FRACTION
    assert share == pytest.approx(tokens_per_s * 7 * 8192 * 128 / 989e12, rel=1e-3)
    assert share == pytest.approx(0.0917, abs=5e-4)
    assert float(scan_seconds(7 * 8192 * 128 * 12.35e6, 989e12, np.nan, "hopper")) == pytest.approx(1.0)


def test_the_fp32_ratio_is_the_benchmarks_rate_over_the_h100s_fp32_and_both_bounds_meet_there() -> None:
    ratio = SCAN_FP32_RATIO
    assert ratio == pytest.approx(12.35e6 * 7 * 8192 * 128 / 67e12, rel=1e-3)
    assert ratio == pytest.approx(1.352, abs=1e-3)
    second = 7 * 8192 * 128 * 12.35e6  # one second of the benchmark's work on an H100
    assert float(scan_seconds(second, 989e12, 67e12, "hopper")) == pytest.approx(1.0)
    assert float(scan_seconds(second, 989e12, np.inf, "hopper")) == pytest.approx(1.0)  # the tensor share alone
    assert float(scan_seconds(second, np.inf, 67e12, "hopper")) == pytest.approx(1.0)  # the FP32 bound alone
    assert scan_fp32_ratio("hopper") == scan_fp32_ratio("ampere") == scan_fp32_ratio("trainium") == ratio


def test_blackwell_runs_the_scan_at_the_b300s_measured_share_of_the_h100s_rate() -> None:
    # FLA's Triton chunked kernels: 2.065, 1.048, 0.531 ms on a B300 where an H100 takes 1.954, 0.997, 0.508
    share = np.mean([1.954 / 2.065, 0.997 / 1.048, 0.508 / 0.531])
    assert share == pytest.approx(0.951, abs=1e-3)
    h100_rate = 12.35e6 * 7 * 8192 * 128
    assert scan_fp32_ratio("blackwell") == BLACKWELL_SCAN_FP32_RATIO
    ratio = scan_fp32_ratio("blackwell")
    assert ratio == pytest.approx(h100_rate * share / 75e12, rel=1e-9)
    assert ratio == pytest.approx(1.149, abs=1e-3)
    # a B300 (75 TFLOP/s of FP32) runs one second of the H100 benchmark's work in 1 / 0.951 s, slower than the H100
    seconds = float(scan_seconds(h100_rate, 2250e12, 75e12, "blackwell"))
    assert seconds == pytest.approx(1 / share, rel=1e-9)
    assert seconds > float(scan_seconds(h100_rate, 989e12, 67e12, "hopper"))


@given(
    flop=st.floats(1e6, 1e15),
    peak=st.floats(1e12, 1e16),
    fp32=st.one_of(st.just(float("nan")), st.floats(1e12, 1e15)),
)
def test_the_scan_takes_the_slower_bound_and_an_unrecorded_fp32_rate_never_binds(
    flop: float, peak: float, fp32: float
) -> None:
    tensor = flop / (peak * SCAN_PEAK_FRACTION)
    for family, ratio in (("hopper", SCAN_FP32_RATIO), ("blackwell", BLACKWELL_SCAN_FP32_RATIO)):
        seconds = float(scan_seconds(flop, peak, fp32, family))
        assert seconds >= tensor * (1 - 1e-12)
        if np.isnan(fp32):
            assert seconds == pytest.approx(tensor)
        else:
            assert seconds == pytest.approx(max(tensor, flop / (fp32 * ratio)))


def _layer(model_id: str) -> dict[str, object]:
    one = np.ones(1)
    kwargs = {"tokens": 8192 * one, "seq_len": 8192, "tp": one, "sp_split": one, "ep": 8 * one, "fused_attention": True}
    return {op.name: op for op in layer_operations(load_model(model_id, use_env=False), **kwargs)}


def test_a_training_step_runs_the_scan_at_that_share_of_the_16_bit_peak() -> None:
    system = system_for_instance(load_catalog(), "p5.48xlarge", 1)
    ops = _layer("nemotron-3-nano-30b-a3b")
    scan = ops["scan"]
    assert scan.kind is OpKind.SCAN
    eff = efficiency_for(system.accelerator)
    times = {t.name: t for t in operation_times(list(ops.values()), system, eff, Dtype.FP8)}
    peak = system.peak_flop_per_s(Dtype.BF16) * system.compute_clock_ratio
    # an H100: the FP32 bound meets the tensor share (within the catalog's 989.4 against the benchmark's 989)
    tensor = float(scan.flop[0]) / (peak * SCAN_PEAK_FRACTION)
    assert float(times["scan"].forward_s[0]) == pytest.approx(tensor, rel=1e-3)
    assert float(times["scan"].backward_s[0]) == pytest.approx(scan.backward_ratio * float(times["scan"].forward_s[0]))


@pytest.mark.parametrize(
    ("instance", "fp32_binds"),
    [("p6-b200.48xlarge", True), ("p5.48xlarge", None), ("trn1.32xlarge", False)],
)
def test_blackwell_runs_the_scan_at_its_fp32_rate_and_trainium_at_its_tensor_share(
    instance: str, fp32_binds: bool | None
) -> None:
    # a B200's tensor rate grew 2.25x over an H100's, its FP32 rate 1.12x: the FP32 bound (86 TFLOP/s) binds;
    # an H100's two bounds meet; a Trainium's FP32 figure is its tensor engine's quarter rate, so its share binds
    system = system_for_instance(load_catalog(), instance, 1)
    scan = _layer("nemotron-3-nano-30b-a3b")["scan"]
    eff = efficiency_for(system.accelerator)
    (times,) = operation_times([scan], system, eff, Dtype.BF16)
    clock = system.compute_clock_ratio
    tensor = float(scan.flop[0]) / (system.peak_flop_per_s(Dtype.BF16) * clock * SCAN_PEAK_FRACTION)
    cores = float(scan.flop[0]) / (system.fp32_flop_per_s * clock * scan_fp32_ratio(system.accelerator.family))
    assert float(times.forward_s[0]) == pytest.approx(max(tensor, cores))
    if fp32_binds is None:
        assert cores == pytest.approx(tensor, rel=1e-3)
    elif fp32_binds:
        assert cores > 2.2 * tensor  # 2.25 x 1.352 / (75 / 67 x 1.149)
        assert float(scan.flop[0]) / float(times.forward_s[0]) / clock == pytest.approx(75e12 * 1.149, rel=1e-3)
    else:
        assert tensor > 2 * cores


def test_the_delta_rule_stays_an_attention_kernel() -> None:
    ops = _layer("qwen3-next-80b-a3b")
    assert ops["delta rule"].kind is OpKind.ATTENTION and "scan" not in ops


@pytest.mark.parametrize(("model_id", "moves"), [("nemotron-3-nano-30b-a3b", True), ("qwen3-next-80b-a3b", False)])
def test_a_serving_prefill_runs_a_mamba2_scan_at_its_share_and_a_delta_rule_at_the_peak(
    model_id: str, moves: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clustersim.compute import scan_kernel
    from clustersim.serving.engine import serving_system_for_instance, step_times

    model = load_model(model_id, use_env=False)
    system = serving_system_for_instance(load_catalog(), "p5.48xlarge", tp=8)

    def prefill_s() -> float:
        prompt = {"prefill_tokens": 8192.0, "prefill_sequences": 1.0, "prompt_tokens": 8192.0, "engine": "vllm"}
        idle = {"decode_sequences": 0.0, "decode_context_tokens": 0.0}
        parts = step_times(model, system, Dtype.BF16, Dtype.BF16, **idle, **prompt)
        return float(parts.step_s)

    before = prefill_s()
    share = scan_kernel.SCAN_PEAK_FRACTION
    monkeypatch.setattr(scan_kernel, "SCAN_PEAK_FRACTION", share / 2)
    half = prefill_s() - before  # the scan's own time at the packaged share (it doubles)
    monkeypatch.setattr(scan_kernel, "SCAN_PEAK_FRACTION", share / 4)
    quarter = prefill_s() - before
    monkeypatch.setattr(scan_kernel, "SCAN_PEAK_FRACTION", share)
    monkeypatch.setattr(scan_kernel, "SCAN_FP32_RATIO", scan_kernel.SCAN_FP32_RATIO / 2)
    cores_half = prefill_s() - before  # the other bound, which meets the share on an H100
    if moves:  # a compute-bound 8K prompt: the scan a few percent of the step, inverse in the share
        assert 0.005 < half / before < 0.2
        assert quarter == pytest.approx(3 * half, rel=1e-3)
        assert cores_half == pytest.approx(half, rel=1e-2)
    else:
        assert half == quarter == cores_half == pytest.approx(0.0)


def test_a_chip_without_an_fp32_figure_runs_the_scan_at_its_tensor_share() -> None:
    import dataclasses

    system = system_for_instance(load_catalog(), "p6-b200.48xlarge", 1)
    rates = {k: v for k, v in system.accelerator.dense_flop_per_s.items() if k is not Dtype.FP32}
    bare = dataclasses.replace(system, accelerator=system.accelerator.model_copy(update={"dense_flop_per_s": rates}))
    assert np.isnan(bare.fp32_flop_per_s) and system.fp32_flop_per_s == pytest.approx(75e12)
    scan = _layer("nemotron-3-nano-30b-a3b")["scan"]
    (times,) = operation_times([scan], bare, efficiency_for(bare.accelerator), Dtype.BF16)
    peak = bare.peak_flop_per_s(Dtype.BF16) * bare.compute_clock_ratio
    assert float(times.forward_s[0]) == pytest.approx(float(scan.flop[0]) / (peak * SCAN_PEAK_FRACTION))


def test_a_power_capped_device_slows_both_bounds_of_the_scan_with_its_clock() -> None:
    import dataclasses

    system = system_for_instance(load_catalog(), "p6-b200.48xlarge", 1)
    capped = dataclasses.replace(system, board_power_watts=700.0)  # a B200 held at 700 W of its 1,000
    assert capped.compute_clock_ratio < 0.95
    scan = _layer("nemotron-3-nano-30b-a3b")["scan"]
    (full,) = operation_times([scan], system, efficiency_for(system.accelerator), Dtype.BF16)
    (slow,) = operation_times([scan], capped, efficiency_for(capped.accelerator), Dtype.BF16)
    # the FP32 bound binds on a B200 at either power; it runs at the capped clock
    assert float(slow.forward_s[0]) == pytest.approx(float(full.forward_s[0]) / capped.compute_clock_ratio)


def test_the_note_names_the_fp32_bound_only_where_it_binds() -> None:
    nano = load_model("nemotron-3-nano-30b-a3b", use_env=False)
    note = fp32_bound_note(nano, "b200", "blackwell", 2250e12, 75e12)
    assert note is not None
    assert "on b200 run at their FP32 bound, 86 TFLOP/s, not the 206 their share of the 16-bit" in note
    gb300 = fp32_bound_note(nano, "gb300", "blackwell", 2500e12, 80e12)
    assert gb300 is not None and "FP32 bound, 92 TFLOP/s, not the 229" in gb300
    assert fp32_bound_note(nano, "h100-sxm", "hopper", 989.4e12, 67e12) is None  # the two bounds meet (within 1%)
    assert fp32_bound_note(nano, "trainium1", "trainium", 190e12, 47.5e12) is None  # the tensor share binds
    assert fp32_bound_note(nano, "gb300", "blackwell", 2500e12, float("nan")) is None  # no FP32 rate recorded
    qwen = load_model("qwen3-30b-a3b", use_env=False)
    assert fp32_bound_note(qwen, "b200", "blackwell", 2250e12, 75e12) is None  # no Mamba-2


def test_a_training_estimate_of_a_mamba_hybrid_on_blackwell_says_the_fp32_bound_binds() -> None:
    def notes(instance: str, model: str) -> list[str]:
        args = ["train", model, "--instance", instance, "--nodes", "2", "--ep", "8"]  # the fastest layout that fits
        result = CliRunner().invoke(app, [*args, "--global-batch", "64", "--json"], env={"CLUSTERSIM_CATALOG": ""})
        assert result.exit_code == 0, result.output
        return [n for n in json.loads(result.output)["notes"] if n.startswith("scan:")]

    assert len(notes("p6-b200.48xlarge", "nemotron-3-nano-30b-a3b")) == 1
    assert notes("p5.48xlarge", "nemotron-3-nano-30b-a3b") == []  # an H100's bounds meet
    assert notes("p6-b200.48xlarge", "qwen3-30b-a3b") == []  # no Mamba-2 layers


def test_a_serving_estimate_of_a_mamba_hybrid_on_blackwell_says_the_fp32_bound_binds() -> None:
    def notes(instance: str, model: str) -> list[str]:
        args = ["serve", model, "--instance", instance, "--tp", "1", "--precision", "fp8", "--engine", "vllm", "--json"]
        result = CliRunner().invoke(app, args, env={"CLUSTERSIM_CATALOG": ""})
        assert result.exit_code == 0, result.output
        return [n for n in json.loads(result.output)["notes"] if n.startswith("scan:")]

    (note,) = notes("p6-b200.48xlarge", "nemotron-3-nano-30b-a3b")
    assert "on b200 run at their FP32 bound, 86 TFLOP/s" in note
    assert notes("p5.48xlarge", "nemotron-3-nano-30b-a3b") == []
    assert notes("p6-b200.48xlarge", "qwen3-30b-a3b") == []
