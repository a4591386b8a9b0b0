"""The MoE layer's cost per token (calibration.toml ``moe_token_layer_s``), fitted on three MoE shapes of two sources.

TensorRT-LLM's perf-overview @00f37686 serves Qwen3-30B-A3B (128 experts of width 768 on hidden 2048, top 8) and
Llama 4 Scout (16 experts of width 8192 on hidden 5120, top 1, a shared expert), NVFP4 on B200 and GB200, and
MLPerf Inference v4.1-v5.1 serves Mixtral 8x7B (8 experts of width 14,336 on hidden 4,096, top 2; FP8 on H100 and
H200, NVFP4 on B200). The recorded value is the best of a scan of the mean over the three shapes of each one's
MAPE; each shape is also scored at the value the other two pick (left out), and the dense rows do not depend on it.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import InferenceCalibration, default_calibration
from clustersim.validation.cases import Case, project_dir, read_cases
from clustersim.validation.inference import predict_inference_case
from clustersim.validation.manifest import read_manifest
from clustersim.validation.specs import INFERENCE

CATALOG = load_catalog(use_env=False)
CAL = default_calibration()
CASES = read_cases(project_dir() / "inference.jsonl")
QWEN3 = [c for c in CASES if c.id.startswith("trtllm_perf_qwen3-30b-a3b_")]
MIXTRAL = [c for c in CASES if c.id.startswith("mlperf") and "mixtral-8x7b" in c.id]
SCOUT = [c for c in CASES if c.id.startswith("trtllm_perf_llama4-scout_")]
GRID = np.arange(1.40e-7, 2.301e-7, 5e-9)  # the recorded scan's range, at a coarser step


def _mape(cases: list[Case], cal: InferenceCalibration = CAL) -> float:
    errors = [
        predict_inference_case(c, "output_tokens_per_s", CATALOG, cal) / c.measured["output_tokens_per_s"] - 1
        for c in cases
    ]
    return float(np.mean(np.abs(errors)))


def _at(value: float) -> InferenceCalibration:
    return dataclasses.replace(CAL, moe_token_layer_s=float(value))


SHAPES = (QWEN3, SCOUT, MIXTRAL)


def _objective(cal: InferenceCalibration) -> float:
    return float(np.mean([_mape(cases, cal) for cases in SHAPES]))


def test_the_three_shapes_are_what_the_entry_says_it_was_fitted_on() -> None:
    assert len(QWEN3) == len(SCOUT) == 20 and len(MIXTRAL) == 10
    assert {c.source.split()[0] for c in QWEN3 + SCOUT} == {"NVIDIA/TensorRT-LLM"}
    rounds = {f"mlcommons/inference_results_v{r}" for r in ("4.1", "5.0", "5.1")}
    assert {c.source.split()[0] for c in MIXTRAL} == rounds
    entry = read_manifest(INFERENCE, use_env=False)["moe_token_layer_s"]
    assert set(entry.fitted_on) == {c.id for c in QWEN3 + SCOUT + MIXTRAL}
    # the residual is calibrate_inference.py's objective over the 50 cases (its MoE group); the scan's, per shape
    assert entry.residual == pytest.approx(_mape(QWEN3 + SCOUT + MIXTRAL), rel=0.02)


def test_the_three_shapes_within_tolerance_in_sample() -> None:
    # 11.3%, 13.5% (Scout) and 4.4% at the shipped 1.82e-7; the former per-output-element prior left Mixtral at
    # 25.7%, every row 17-38% too slow
    assert _mape(QWEN3) < 0.13
    assert _mape(MIXTRAL) < 0.06
    assert _mape(SCOUT) < 0.17
    # without the term both are far too fast: the cost is real on both
    off = _at(0.0)
    assert _mape(QWEN3, off) > 0.5 and _mape(MIXTRAL, off) > 0.3


def test_the_shipped_value_is_the_best_of_the_scan() -> None:
    shipped = _objective(CAL)
    for step in (-5e-9, 5e-9):
        assert _objective(_at(CAL.moe_token_layer_s + step)) > shipped


def test_each_shape_at_the_value_the_other_two_pick() -> None:
    """Left out, each shape at the value the other two pick: Qwen3 14.8%, Scout 16.0%, Mixtral 7.9%."""
    mapes = [np.array([_mape(cases, _at(v)) for v in GRID]) for cases in SHAPES]
    for own, bar in zip(range(3), (0.16, 0.17, 0.09), strict=True):
        others = np.mean([m for k, m in enumerate(mapes) if k != own], axis=0)
        assert mapes[own][int(np.argmin(others))] < bar
    qwen3, _, mixtral = mapes
    # Qwen3 and Mixtral alone pick values within a third of each other (within 4% until Blackwell's decode
    # attention got its own HBM fraction: the Blackwell-only Qwen3 rows then need less), and the shipped value
    # lies between the two picks: neither alone sets it (Scout is nearly flat in it)
    picked = sorted((GRID[int(np.argmin(qwen3))], GRID[int(np.argmin(mixtral))]))
    assert picked[1] - picked[0] < picked[1] / 3
    assert picked[0] < CAL.moe_token_layer_s < picked[1]


def test_dense_rows_do_not_depend_on_it() -> None:
    dense = [c for c in CASES if c.model is not None and not c.model.moe][:12]
    assert len(dense) == 12
    for case in dense:
        assert predict_inference_case(case, "output_tokens_per_s", CATALOG, _at(0.0)) == predict_inference_case(
            case, "output_tokens_per_s", CATALOG, CAL
        )
