"""Mamba-2's chunked scan priced at the share of the 16-bit peak its SSD kernels reach (vLLM PR #27299's H100
microbenchmark), in a training step and in a serving step; the Gated DeltaNet's delta rule as before."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import efficiency_for
from clustersim.compute.scan_kernel import SCAN_PEAK_FRACTION, scan_seconds
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
    assert float(scan_seconds(7 * 8192 * 128 * 12.35e6, 989e12)) == pytest.approx(1.0)


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
    assert float(times["scan"].forward_s[0]) == pytest.approx(float(scan.flop[0]) / (peak * SCAN_PEAK_FRACTION))
    assert float(times["scan"].backward_s[0]) == pytest.approx(scan.backward_ratio * float(times["scan"].forward_s[0]))


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
    if moves:  # a compute-bound 8K prompt: the scan a few percent of the step, inverse in the share
        assert 0.005 < half / before < 0.2
        assert quarter == pytest.approx(3 * half, rel=1e-6)
    else:
        assert half == quarter == pytest.approx(0.0)
