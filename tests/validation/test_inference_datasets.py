"""A ground-truth inference case with a null length: the mean of the dataset it names, or skipped as
"input unknown" (never an assumed number)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.datasets import ENV_VAR
from clustersim.validation.cases import bundled_dir
from clustersim.validation.inference import assumed_lengths, case_estimate, predict_inference_case
from clustersim.validation.run import validate_cases

CATALOG = load_catalog(use_env=False)
CASES = {
    case["id"]: case
    for case in (json.loads(line) for line in (bundled_dir() / "inference.jsonl").read_text().splitlines())
}
MLPERF = CASES["mlperf40_llama2-70b_dgx-h100_8xh100_offline"]


def with_workload(case: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return dict(case, workload=dict(case["workload"], **changes))


def test_the_mlperf_rows_name_openorca_and_leave_the_prompt_length_null():
    mlperf = [case for case in CASES.values() if case["source"].startswith("mlcommons/inference_results_v4.0")]
    assert len(mlperf) == 6
    assert all(c["workload"]["input_tokens"] is None and c["workload"]["dataset"] == "openorca" for c in mlperf)


def test_a_null_input_is_the_mean_of_the_named_dataset_and_the_case_says_so():
    estimate = case_estimate(MLPERF, CATALOG)
    assert estimate.input_tokens == pytest.approx(222.33)  # openorca's mean prompt, 24,576 samples
    assert estimate.output_tokens == pytest.approx(291.9)  # stated by the case: it wins over the dataset's
    assert assumed_lengths(MLPERF, CATALOG) == {"workload.input_tokens": pytest.approx(222.33)}
    assert assumed_lengths(CASES["trtllm_perf_llama3.3-70b_h100_tp2_fp8_isl128_osl128"]) == {}
    assert assumed_lengths(with_workload(MLPERF, dataset="orca")) == {}  # unknown: skipped, nothing assumed


def test_the_prediction_follows_the_datasets_mean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    shipped = predict_inference_case(MLPERF, "output_tokens_per_s", CATALOG)
    stated = predict_inference_case(with_workload(MLPERF, input_tokens=222.33), "output_tokens_per_s", CATALOG)
    assert shipped == pytest.approx(stated, rel=1e-12)  # the mean is used as if the case stated it
    longer = tmp_path / "longer.toml"
    longer.write_text('[openorca.input]\nmean = { value = 400, source = "a test" }\n', encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(longer))
    assert case_estimate(MLPERF, CATALOG).input_tokens == 400
    assert predict_inference_case(MLPERF, "output_tokens_per_s", CATALOG) < 0.95 * shipped  # longer prompts


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        (
            {"dataset": None},
            "input unknown: case mlperf40_llama2-70b_dgx-h100_8xh100_offline: workload.input_tokens "
            "is null and the case names no workload.dataset",
        ),
        ({"dataset": "orca"}, "workload.dataset 'orca' is not a known dataset"),
        (
            {"dataset": "cnn_dailymail", "input_tokens": 800, "output_tokens": None},
            "output unknown: case mlperf40_llama2-70b_dgx-h100_8xh100_offline: workload.output_tokens is null and the "
            "dataset 'cnn_dailymail' has no published mean output length",
        ),
    ],
)
def test_nothing_known_is_an_error_naming_the_field_and_the_datasets(changes: dict[str, Any], reason: str):
    with pytest.raises(ClusterSimError) as info:
        case_estimate(with_workload(MLPERF, **changes), CATALOG)
    assert reason in str(info.value)
    which = "output" if "output unknown" in reason else "input"
    assert info.value.field == f"workload.{which}_tokens"
    assert f"datasets with a mean {which} length: " in str(info.value) and "openorca" in str(info.value)


def test_validate_skips_a_case_with_no_length_and_no_dataset(tmp_path: Path):
    path = tmp_path / "inference.jsonl"
    unknown = dict(with_workload(MLPERF, dataset=None), id="no-input")
    path.write_text(json.dumps(MLPERF) + "\n" + json.dumps(unknown) + "\n", encoding="utf-8")
    report = validate_cases([path], CATALOG)
    assert [c.id for c in report.cases] == [MLPERF["id"]]
    (skipped,) = report.skipped
    assert skipped.id == "no-input" and skipped.reason.startswith("input unknown: case no-input: workload.input_tokens")
