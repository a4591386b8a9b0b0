"""Which engine profile a ground-truth inference case gets, and what an unknown framework is told."""

from __future__ import annotations

import json

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import bundled_dir
from clustersim.validation.inference import case_estimate

CATALOG = load_catalog(use_env=False)
CASES = {
    case["id"]: case
    for case in (json.loads(line) for line in (bundled_dir() / "inference.jsonl").read_text().splitlines())
}
BLOG = CASES["trtllm_h200blog_llama2-70b_h200_tp1_bs32_isl2048_osl128"]


@pytest.mark.parametrize(
    ("version", "engine", "batching"),
    [
        ("TensorRT-LLM (H200 launch blog, 2023-11)", "tensorrt-llm-2023", "static"),
        ("TensorRT-LLM v0.9.0", "tensorrt-llm", "continuous"),
        ("MLPerf Inference v4.0, NVIDIA submission", "tensorrt-llm-mlperf-v4", "continuous"),  # its harness's round
        ("MLPerf Inference v3.1, NVIDIA submission", "tensorrt-llm-mlperf", "continuous"),  # the harness, no round
    ],
)
def test_the_case_is_served_by_the_profile_of_its_release(version: str, engine: str, batching: str):
    estimate = case_estimate(dict(BLOG, software={"framework": "tensorrt-llm", "version": version}), CATALOG)
    assert (estimate.engine, estimate.batching) == (engine, batching)


def test_an_unknown_framework_names_the_case_and_the_known_ones():
    case = dict(BLOG, software={"framework": "lmdeploy", "version": "0.4"})
    with pytest.raises(ClusterSimError, match=r"^case trtllm_h200blog.*: unknown software.framework") as info:
        case_estimate(case, CATALOG)
    assert "tensorrt-llm" in str(info.value) and info.value.field == "software.framework"


def test_a_neuron_framework_on_a_gpu_case_is_refused_naming_engine_and_family():
    case = dict(BLOG, software={"framework": "transformers-neuronx", "version": "Neuron SDK 2.18.1"})
    with pytest.raises(
        ClusterSimError,
        match=r"^case trtllm_h200blog.*: engine 'transformers-neuronx' does not run on "
        r"h200-sxm \(hopper\)",
    ) as info:
        case_estimate(case, CATALOG)
    assert info.value.field == "engine"
