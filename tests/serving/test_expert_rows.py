"""The MoE layer's cost per token (calibration.toml ``moe_token_layer_s``), fitted on two sources.

TensorRT-LLM's perf-overview @00f37686 serves Qwen3-30B-A3B (128 experts of width 768 on hidden 2048, top 8;
NVFP4 on B200 and GB200) and MLPerf Inference v4.1-v5.1 serves Mixtral 8x7B (8 experts of width 14,336 on
hidden 4,096, top 2; FP8 on H100 and H200, NVFP4 on B200). The recorded value is the best of a scan of the
mean over the two sources of each one's MAPE; each source is also scored at the value the other alone picks
(left out), and the dense rows do not depend on it.
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
GRID = np.arange(1.50e-7, 2.601e-7, 5e-9)  # the recorded scan's range, at its coarser step


def _mape(cases: list[Case], cal: InferenceCalibration = CAL) -> float:
    errors = [
        predict_inference_case(c, "output_tokens_per_s", CATALOG, cal) / c.measured["output_tokens_per_s"] - 1
        for c in cases
    ]
    return float(np.mean(np.abs(errors)))


def _at(value: float) -> InferenceCalibration:
    return dataclasses.replace(CAL, moe_token_layer_s=float(value))


def _objective(cal: InferenceCalibration) -> float:
    return (_mape(QWEN3, cal) + _mape(MIXTRAL, cal)) / 2


def test_the_two_sources_are_what_the_entry_says_it_was_fitted_on() -> None:
    assert len(QWEN3) == 20 and len(MIXTRAL) == 10
    assert {c.source.split()[0] for c in QWEN3} == {"NVIDIA/TensorRT-LLM"}
    rounds = {f"mlcommons/inference_results_v{r}" for r in ("4.1", "5.0", "5.1")}
    assert {c.source.split()[0] for c in MIXTRAL} == rounds
    entry = read_manifest(INFERENCE, use_env=False)["moe_token_layer_s"]
    assert set(entry.fitted_on) == {c.id for c in QWEN3 + MIXTRAL}
    # the residual is calibrate_inference.py's objective over the 30 cases (its MoE group); the scan's, per source
    assert entry.residual == pytest.approx(_mape(QWEN3 + MIXTRAL), rel=0.02)


def test_both_sources_within_tolerance_in_sample() -> None:
    # 11.4% and 4.2% at the shipped 1.84e-7; the former per-output-element prior left Mixtral at 25.7%, every row
    # 17-38% too slow
    assert _mape(QWEN3) < 0.13
    assert _mape(MIXTRAL) < 0.05
    # without the term both are far too fast: the cost is real on both
    off = _at(0.0)
    assert _mape(QWEN3, off) > 0.5 and _mape(MIXTRAL, off) > 0.3


def test_the_shipped_value_is_the_best_of_the_scan() -> None:
    shipped = _objective(CAL)
    for step in (-5e-9, 5e-9):
        assert _objective(_at(CAL.moe_token_layer_s + step)) > shipped


def test_each_source_at_the_value_the_other_alone_picks() -> None:
    """Left out: 15.3% (Qwen3 at Mixtral's 2.13e-7) and 6.6% (Mixtral at Qwen3's 1.62e-7)."""
    qwen3 = np.array([_mape(QWEN3, _at(v)) for v in GRID])
    mixtral = np.array([_mape(MIXTRAL, _at(v)) for v in GRID])
    assert qwen3[int(np.argmin(mixtral))] < 0.16
    assert mixtral[int(np.argmin(qwen3))] < 0.07
    # each source alone picks a value within a third of the other's (they were within 4% until Blackwell's decode
    # attention got its own HBM fraction: the Blackwell-only Qwen3 rows then need less), and the shipped value
    # lies between the two picks: neither source alone sets it
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
