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
        0.21,
        "left out, the FP8 cost per expert slice falls to its prior on Hopper; Blackwell's MoE rows move with the "
        "release at one layout (recipes the format does not record) (issues 21 and 22)",
    ),
    ("training", "NVIDIA/NeMo"): (0.17, "long sequences with context parallelism predicted too slow (issue 22)"),
    ("training", "yanring/Megatron-MoE-ModelZoo"): (0.26, "MoE at scale and long context (issue 22)"),
    ("training", "NVIDIA-NeMo/Automodel"): (0.38, "FSDP2 + expert parallel stacks (issue 22)"),
    ("inference", "NVIDIA/TensorRT-LLM"): (0.20, "two serving sources: left out, the other alone fits (issue 24)"),
    ("inference", "mlcommons/inference_results_v4.0"): (0.165, "as TensorRT-LLM's row (issue 24)"),
    ("collective", "crazyguitar/aws-gpu-communication-benchmark"): (
        0.44,
        "left out, its op families' ramps fall to the all-reduce's and the node growth is fitted on GB200 runs "
        "(issues 21 and 23)",
    ),
    ("collective", "aws-samples/awsome-distributed-training"): (0.31, "the ramps fitted without it (issue 23)"),
    ("collective", "coreweave/nccl-tests"): (0.59, "GB200 NVL72 across racks not yet modelled right (issue 21)"),
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
    "collective": math.log(1.45),  # 40% today: left out, the ramps fall to priors (issue 23)
}
"""Per kind, the median left-out |log error| stays under this (today: training 6.9%, serving 16%, collectives 40%)."""
