"""A compile's own context-encoding buckets (NxD Inference's --context-encoding-buckets: EngineProfile.context_buckets):
a prompt pads to the smallest that holds it, a longer one is refused, and bad lists are refused in one line."""

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.buckets import prompt_bucket_tokens
from clustersim.serving.engines import EngineProfile, engine_for_software, engine_profile
from clustersim.validation.cases import default_paths, read_all
from clustersim.validation.inference import case_estimate

NXD = engine_profile("nxd-inference")
# aws-neuron-sdk libraries/nxd-inference/tutorials/trn2-llama3.1-405b-speculative-tutorial.rst: --seq-len 12800,
# --context-encoding-buckets 2048 4096 10240 12288, --token-generation-buckets 12800
TUTORIAL = {"context_buckets": [2048, 4096, 10240, 12288], "compiled_sequence_tokens": 12800}


def profile(**fields: object) -> EngineProfile:
    return EngineProfile.model_validate({**NXD.model_dump(), **fields})


def test_a_prompt_pads_to_the_smallest_listed_bucket_that_holds_it() -> None:
    listed = profile(**TUTORIAL)
    assert prompt_bucket_tokens(10000.0, listed, 11785.0) == 10240.0
    assert prompt_bucket_tokens(2048.0, listed, 11785.0) == 2048.0
    assert prompt_bucket_tokens(2049.0, listed, 11785.0) == 4096.0
    # the automatic rule at the same compile pads the 10,000-token prompt to the whole 12,800
    assert prompt_bucket_tokens(10000.0, profile(compiled_sequence_tokens=12800), 11785.0) == 12800.0
    with pytest.raises(ClusterSimError, match="largest context bucket 4096"):
        prompt_bucket_tokens(5000.0, profile(context_buckets=[2048, 4096]), 8192.0)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"context_buckets": [4096, 2048]}, "ascending"),
        ({"context_buckets": []}, "ascending"),
        ({"context_buckets": [4096, 16384], "compiled_sequence_tokens": 12800}, "beyond compiled_sequence_tokens"),
        ({"context_buckets": [2048], "bucket_min_tokens": None}, "static shapes"),
    ],
)
def test_bad_bucket_lists_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        profile(**fields)


def test_the_405b_tutorials_buckets_price_its_prompt_as_it_ran() -> None:
    # The tutorial's LLMPerf run measures a TTFT of 2.442 s for its 10,000-token prompt, which ran as 10,240.
    catalog = load_catalog(use_env=False)
    case = next(c for c in read_all(default_paths("inference.jsonl")) if c.id.startswith("nxdi_trn2_llama3.1-405b"))
    assert case.software is not None
    assert case.workload is not None and case.workload.context_buckets == list(TUTORIAL["context_buckets"])
    base = engine_for_software(case.software.framework, case.software.version)
    listed = EngineProfile.model_validate({**base.model_dump(), **TUTORIAL})
    unstated = case.model_copy(
        update={
            "workload": case.workload.model_copy(update={"context_buckets": None, "compiled_sequence_tokens": None})
        }
    )
    automatic = case_estimate(unstated, catalog).ttft_s  # the engine's own rule pads it to the request's 11,785
    compiled = case_estimate(case, catalog).ttft_s  # the case states its compile's buckets, as an override would
    assert compiled == pytest.approx(case_estimate(unstated, catalog, engine_override=listed).ttft_s, rel=1e-12)
    assert compiled == pytest.approx(automatic * 10240 / 11785, rel=0.05)  # the prefill launch scales with its bucket
    assert abs(compiled / case.measured["ttft_s"] - 1) < abs(automatic / case.measured["ttft_s"] - 1)


def test_a_cases_bucket_list_is_refused_in_one_line_naming_the_field() -> None:
    catalog = load_catalog(use_env=False)
    case = next(c for c in read_all(default_paths("inference.jsonl")) if c.id.startswith("nxdi_trn2_llama3.1-405b"))
    assert case.workload is not None
    for bad, words in (([4096, 2048], "ascending"), ([2048, 20000], "beyond compiled_sequence_tokens 12800")):
        wrong = case.model_copy(update={"workload": case.workload.model_copy(update={"context_buckets": bad})})
        with pytest.raises(ClusterSimError, match=words) as caught:
            case_estimate(wrong, catalog)
        assert caught.value.field == "workload.context_buckets" and "\n" not in str(caught.value)
