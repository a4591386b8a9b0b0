"""Accuracy as a user meets it: each source predicted by constants fitted without it.

The packaged residuals (``clustersim.intervals``) are the left-out predictions of leave-one-source-out
cross-validation, made again whenever the calibration or the cases change (a test checks their
fingerprint). Here each source's mean |log error| there must stay under the issue's bar (15%), or
under its own recorded figure where the model is known to miss it, each with the issue that owns it.
A change that lowers a figure should lower its bar; a bar may rise only with a reason here.
"""

from __future__ import annotations

import math

import pytest

from clustersim.intervals.residuals import load_residuals

BAR = math.log(1.15)  # issue 10's per-source target, as a mean |log error|

KNOWN_MISSES: dict[tuple[str, str], tuple[float, str]] = {
    ("training", "NVIDIA-NeMo/Megatron-Bridge"): (
        0.17,
        "left out, the FP8 cost per expert slice falls to its prior on Hopper; its MoE rows move with the release "
        "at one layout, and their token dispatcher (alltoall or HybridEP/DeepEP per recipe), expert all-to-all "
        "overlap and MTP are switches its rows do not record (issues 21 and 22; 0.171 before expert TP 1 became "
        "Megatron's default)",
    ),
    ("training", "NVIDIA/dgxc-benchmarking"): (
        0.24,
        "NeMo 25.04's DeepSeek-V3 on GB200 measures 249 TFLOP/s per GPU where the model, which has no term for a "
        "young release's host overhead, predicts about 3x that (0.276 before its cases stated ETP and MTP, 0.256 "
        "before they stated the alltoall token dispatcher, issue 22)",
    ),
    ("inference", "mlcommons/inference_results_v4.0"): (
        0.17,
        "the v4.0 harness's TensorRT-LLM build: v4.1's runs of the same systems measure 12-14% faster and are "
        "predicted within 4%; 0.165 before the project's own TensorRT-LLM runs were cross-validated with them "
        "(issue 24)",
    ),
    ("inference", "gpustack/gpustack"): (
        0.56,
        "vLLM and SGLang on one H100 behind an API server: its 1-8 client runs fit within 2-12% since each layer "
        "pays a fixed cost per step (stop 39), but its saturated bursts (1,000 requests at once) are 33-250% too "
        "fast, the 128-token / 4-token run's TPOT 525 ms measured (no mechanism here explains it), and its Qwen3 "
        "FP8 checkpoints scale 128 x 128 blocks, which Hopper dequantizes outside the tensor cores (0.550 before "
        "stop 39; issue 24)",
    ),
    ("inference", "Michaelvll/llm-ie-benchmarks"): (
        0.57,
        "DeepSeek-R1 on 8 H200 under vLLM 0.8.4 and SGLang 0.4.5, 50 Poisson requests: 14-120% too fast "
        "(block-scaled FP8 and MLA; 0.554, 0.528 before the MoE cost per token was scanned again beside "
        "Blackwell's decode-attention fraction, 0.37 before a MoE layer's cost became one per token; issue 24)",
    ),
    ("collective", "crazyguitar/aws-gpu-communication-benchmark"): (
        0.17,
        "left out, the all-reduce's node growth falls to its ring prior (1.0 for a fitted 0.78) and the other op "
        "families' ramps to the all-reduce's (issue 23)",
    ),
    ("collective", "aws-neuron/aws-neuron-sdk"): (
        0.78,
        "nccom-test's examples from older Neuron runtimes pay a 58 us-2.3 ms floor per collective at mid sizes "
        "that the torus model, priced from the newest example, does not (issue 21)",
    ),
}
"""(kind, source) -> (mean |log error| bar, why and which issue owns it)."""


def _by_source() -> dict[tuple[str, str], list[float]]:
    out: dict[tuple[str, str], list[float]] = {}
    for row in load_residuals().residuals:
        out.setdefault((row.kind, row.source), []).append(abs(row.r))
    return out


def test_every_source_predicted_without_its_own_cases_meets_its_bar() -> None:
    figures = {key: sum(rs) / len(rs) for key, rs in _by_source().items()}
    assert {kind for kind, _ in figures} == {"training", "inference", "collective"}
    over = {
        f"{kind} {source}": round(value, 3)
        for (kind, source), value in figures.items()
        if value > KNOWN_MISSES.get((kind, source), (BAR, ""))[0]
    }
    assert not over, f"left-out mean |log error| over the bar: {over}"


def test_a_known_miss_is_still_a_miss() -> None:
    """A bar above the issue's target is kept only while the source still needs it."""
    figures = {key: sum(rs) / len(rs) for key, rs in _by_source().items()}
    for key, (bar, why) in KNOWN_MISSES.items():
        assert key in figures, f"{key}: no residuals (remove it from KNOWN_MISSES)"
        assert figures[key] > BAR, f"{key} now meets the issue's bar: remove it from KNOWN_MISSES ({why})"
        assert bar > BAR and why


@pytest.mark.parametrize("kind", ["training", "inference", "collective"])
def test_the_median_left_out_error_of_each_kind(kind: str) -> None:
    errors = sorted(abs(r.r) for r in load_residuals().of_kind(kind))
    assert errors and errors[len(errors) // 2] < MEDIAN_BAR[kind]


MEDIAN_BAR = {
    "training": math.log(1.10),
    "inference": math.log(1.20),
    "collective": math.log(1.15),  # 8.5% today (40% before GB200 NVL72 had its own model, issue 21)
}
"""Per kind, the median left-out |log error| stays under this (today: training 7.2%, serving 9.6%, collectives 8.5%)."""
