"""Neuron serving engines on Trainium: their profiles, refusals across accelerator families, static-shape
buckets, static batches, and the published Trainium runs they are fitted on."""

import json
import re

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.engines import (
    bucket_tokens,
    engine_for,
    engine_for_software,
    engine_profile,
    engine_profiles,
    engines_on,
    mean_bucket_tokens,
)
from clustersim.serving.estimate import Batching, Request, estimate_offline
from clustersim.validation.cases import bundled_case_files, project_case_files, read_cases
from clustersim.validation.inference import case_estimate, fits_reference_calibration
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
NEURON = ("nxd-inference", "optimum-neuron", "optimum-neuron-tnx", "transformers-neuronx", "vllm-neuron")
LLAMA3_70B = Transformer(
    name="llama3-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256, ffn_type="swiglu"
)
LLAMA3_8B = Transformer(
    name="llama3-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256, ffn_type="swiglu"
)


def trn1(tp: int = 32):
    return serving_system_for_accelerator(CATALOG, "trainium1", tp=tp, devices_per_node=32, instance="trn1.32xlarge")


def neuron_cases() -> list:
    paths = [p for p in [*bundled_case_files(), *project_case_files()] if p.name == "inference.jsonl"]
    found = []
    for path in paths:
        for case in read_cases(path):
            framework = case.software.framework if case.software else None
            if framework and "trainium" in engine_for_software(framework, case.software.version).accelerator_families:
                found.append(case)
    return found


# --- the profiles -----------------------------------------------------------------------------------------


def test_the_neuron_profiles_run_on_trainium_only_with_their_sources_and_the_fitted_pair():
    profiles = engine_profiles(use_env=False)
    assert engines_on("trainium") == list(NEURON)
    for name in NEURON:
        profile = profiles[name]
        assert profile.accelerator_families == ("trainium",) and profile.framework == name.removesuffix("-tnx")
        assert "aws-neuron" in profile.families_source or "optimum-neuron" in profile.families_source
        # one pair fitted on Trainium runs of two sources, never the GPU reference's 1.0 and calibration overheads
        assert profile.kernel_efficiency < 1.0 and profile.step_overhead_s is not None
        assert profile.fitted and "aws-neuron-sdk" in profile.fitted and "optimum-neuron" in profile.fitted
    assert len({(profiles[n].kernel_efficiency, profiles[n].step_overhead_s) for n in NEURON}) == 1
    assert engine_for(None, "trainium").name == "vllm-neuron"  # AWS serves Trainium online through vLLM
    static = {n for n in NEURON if profiles[n].benchmark_batching is Batching.STATIC}
    assert static == {"transformers-neuronx", "nxd-inference", "optimum-neuron-tnx"}
    # optimum-neuron compiles one bucket at its sequence length by default: no power-of-two buckets
    assert profiles["optimum-neuron"].bucket_rule == "single"
    assert {profiles[n].bucket_min_tokens for n in NEURON} == {128}
    assert profiles["vllm-neuron"].kv_block_tokens == 32  # vllm-neuron's block_size default


def test_a_case_of_each_neuron_framework_gets_its_profile():
    assert engine_for_software("transformers-neuronx", "Neuron SDK 2.18.1").name == "transformers-neuronx"
    assert engine_for_software("vllm-neuron", "Neuron SDK 2.21").name == "vllm-neuron"
    assert engine_for_software("optimum-neuron", "optimum-neuron 0.4.1.dev0").name == "optimum-neuron"
    # before 0.2 optimum-neuron ran transformers-neuronx graphs (its TGI server)
    tgi = engine_for_software("optimum-neuron", "optimum-neuron 0.0.25.dev0 (neuronx-tgi)")
    assert tgi.name == "optimum-neuron-tnx"


# --- refusals across families -------------------------------------------------------------------------------


def test_the_python_api_serves_trainium_on_the_neuron_default_never_on_tensorrt_llm():
    system = trn1()
    request = Request(128, 128, Dtype.BF16)
    assert estimate_offline(LLAMA3_70B, system, request, batch=4).engine == "vllm-neuron"
    for gpu in ("tensorrt-llm", "vllm", "sglang"):
        with pytest.raises(ClusterSimError, match=rf"^engine '{gpu}' does not run on trainium accelerators") as caught:
            estimate_offline(LLAMA3_70B, system, request, batch=4, engine=gpu)
        assert f"engines for trainium: {', '.join(NEURON)}" in str(caught.value)
    # a GPU profile object handed straight to the step physics is refused too
    with pytest.raises(ClusterSimError, match="engine 'tensorrt-llm' does not run on trainium"):
        step_times(
            LLAMA3_70B,
            system,
            Dtype.BF16,
            Dtype.BF16,
            decode_sequences=1.0,
            decode_context_tokens=200.0,
            prefill_tokens=0.0,
            prefill_sequences=0.0,
            prompt_tokens=128.0,
            engine=engine_profile("tensorrt-llm"),
        )


@pytest.mark.parametrize("engine", NEURON)
def test_a_neuron_engine_on_a_gpu_is_refused_naming_engine_family_and_the_valid_ones(engine):
    system = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=8)
    with pytest.raises(ClusterSimError) as caught:
        estimate_offline(LLAMA3_70B, system, Request(128, 128, Dtype.BF16), engine=engine)
    message = str(caught.value)
    assert message.startswith(f"engine '{engine}' does not run on hopper accelerators (as profiled it runs on trainium")
    rounds = ("v4", "v4-1", "v5", "v5-1", "v6-0")
    mlperf = ", ".join(["tensorrt-llm-mlperf", *(f"tensorrt-llm-mlperf-{r}" for r in rounds)])
    engines = f"sglang, sglang-v0-3, sglang-v0-5, tensorrt-llm, tensorrt-llm-2023, {mlperf}, vllm, vllm-v0"
    assert f"engines for hopper: {engines}" in message
    assert "\n" not in message
    assert caught.value.field == "engine" and caught.value.value == engine


def test_an_unknown_engine_is_refused_naming_the_known_ones():
    with pytest.raises(UnknownNameError, match=r"unknown engine 'neuron-vllm'; did you mean vllm-neuron"):
        estimate_offline(LLAMA3_70B, trn1(), Request(128, 128), engine="neuron-vllm")


def test_a_case_with_a_gpu_engine_on_trainium_is_refused_naming_the_case():
    case = {
        "id": "x",
        "kind": "inference",
        "source": "test",
        "model": LLAMA3_8B.__dict__ | {"ffn_type": "swiglu"},
        "system": {"accelerator": "trainium1", "devices": 32, "devices_per_node": 32, "instance": "trn1.32xlarge"},
        "parallel": {"tp": 32},
        "precision": "bf16",
        "workload": {"input_tokens": 128, "output_tokens": 128, "scenario": "concurrency", "batch": 1},
        "measured": {"output_tokens_per_s": 100.0},
        "software": {"framework": "vllm", "version": "0.9"},
    }
    model = {k: case["model"][k] for k in ("name", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab")}
    case["model"] = model | {"ffn_type": "swiglu"}
    with pytest.raises(ClusterSimError, match=r"^case x: engine 'vllm' does not run on trainium1 \(trainium\)"):
        case_estimate(case, CATALOG)
    assert not fits_reference_calibration(case)  # vLLM's runs judge its profile's priors, never the reference fit
    case["software"] = {"framework": "tensorrt-llm", "version": "TensorRT-LLM 0.15.0"}
    assert fits_reference_calibration(case)  # the reference engine's case is the GPU fit's (and refused when scored)
    case["software"] = {"framework": "transformers-neuronx", "version": "Neuron SDK 2.18.1"}
    assert not fits_reference_calibration(case)  # Trainium runs never move the GPU calibration
    case["parallel"], case["workload"]["batch"] = {"tp": 16, "dp": 2}, 3
    with pytest.raises(ClusterSimError, match=r"workload\.batch 3 is not a whole number of static batches over dp 2"):
        case_estimate(case, CATALOG)


# --- static shapes and static batches ------------------------------------------------------------------------


def test_buckets_are_powers_of_two_from_128_up_to_the_compiled_length():
    tnx = engine_profile("transformers-neuronx")
    assert list(bucket_tokens([1, 128, 129, 1500, 2048, 2049], tnx)) == [128, 128, 256, 2048, 2048, 4096]
    assert float(bucket_tokens(1500, tnx, longest=1750)) == 1750  # the last bucket is the sequence length
    # optimum-neuron's one bucket is the compiled length: unknown, no padding; known, every length pads to it
    assert list(bucket_tokens([129, 1500], engine_profile("optimum-neuron"))) == [129, 1500]
    assert list(bucket_tokens([129, 1500], engine_profile("optimum-neuron"), 1750)) == [1750, 1750]
    # positions 128..1152 attend over 256, 512, 1024 and the compiled 1152:
    # (128 x 256 + 256 x 512 + 512 x 1024 + 128 x 1152) / 1024
    assert float(mean_bucket_tokens(128, 1152, tnx)) == pytest.approx(816.0)
    assert float(mean_bucket_tokens(128, 1152, engine_profile("optimum-neuron"))) == pytest.approx(1152.0)
    assert float(mean_bucket_tokens(128, 1152, tnx.model_copy(update={"bucket_min_tokens": None}))) == 640.0


def test_a_prompt_just_past_a_bucket_costs_the_whole_next_bucket():
    system = trn1()
    tnx = engine_profile("transformers-neuronx")
    unpadded = tnx.model_copy(update={"bucket_min_tokens": None})

    def ttft(prompt: int, engine) -> float:
        request = Request(prompt, 64, Dtype.BF16, batching=Batching.STATIC)
        return estimate_offline(LLAMA3_70B, system, request, batch=4, engine=engine).ttft_s

    assert ttft(1025, tnx) == pytest.approx(ttft(2048, tnx), rel=1e-9)  # both run the 2048 bucket
    assert ttft(1025, unpadded) < 0.7 * ttft(2048, unpadded)
    assert ttft(1024, tnx) == pytest.approx(ttft(1024, unpadded), rel=1e-9)  # a prompt on a bucket is not padded


def test_a_static_batch_prefills_together_and_decodes_to_the_end():
    system = trn1()
    tnx = engine_profile("transformers-neuronx")
    request = Request(2048, 2048, Dtype.BF16, batching=Batching.STATIC)
    one, four = (estimate_offline(LLAMA3_70B, system, request, batch=b, engine=tnx) for b in (1, 4))
    # the whole batch is one context-encoding step: compute-bound, so about 4x the single prompt's TTFT
    assert four.ttft_s / one.ttft_s == pytest.approx(4.0, rel=0.25)
    # decoding is weight-read bound: four sequences cost little more per step than one
    assert 1.0 < four.tpot_s / one.tpot_s < 1.3
    assert four.output_tokens_per_s == pytest.approx(4 * 2048 / (four.ttft_s + 2048 * four.tpot_s), rel=1e-9)


# --- published Trainium runs ----------------------------------------------------------------------------------


def test_the_trainium_cases_come_from_two_sources_and_are_scored():
    cases = neuron_cases()
    sources = {case.source.split()[0] for case in cases}
    assert sources == {"aws-neuron/aws-neuron-sdk", "huggingface/optimum-neuron"}
    assert {c.system.accelerator for c in cases if c.system} == {"trainium1", "trainium2"}
    for case in cases:
        assert case_estimate(case, CATALOG).output_tokens_per_s > 0


@pytest.mark.parametrize(
    ("case_id", "tolerance"),
    [
        # in sample (the Neuron pair is fitted on them): transformers-neuronx on trn1, Neuron 2.18.1
        ("neuron218_trn1_llama3-70b_tp32_bs4_in128_out128", 0.10),
        ("neuron218_trn1_llama3-70b_tp32_bs1_in2048_out2048", 0.10),
        ("neuron218_trn1_llama2-7b_tp32_bs8_in128_out8064", 0.15),
        # vLLM on NxD Inference, Llama 3.1 405B on one trn2.48xlarge (TP 64): 25.46 tok/s measured
        ("nxdi_trn2_llama3.1-405b_tp64_c1_in10000_out1785", 0.25),
        # the vLLM Neuron plugin (Neuron 2.32), Llama 3.1 8B at TP 8, two requests in flight: 184.4 tok/s; +21%
        # since the 2026-12-02 fit on TTFT and throughput (Trainium2 efficiency 0.978: the plugin's decode too
        # fast, where optimum-neuron's trn2 decode at the same constants is within 10%; it was +8.6% held out)
        ("vllmneuron232_trn2_llama3.1-8b_tp8_c2_in512_out128", 0.25),
        # optimum-neuron's TGI on transformers-neuronx, Llama 3 70B on trn1 (Neuron 2.18.0): 38.3 tok/s, another source
        ("optimum_tgi_sdk2180_trn1_llama3-70b_tp32_bs1_c1_in1500_out245", 0.15),
    ],
)
def test_published_trainium_runs_within_tolerance(case_id, tolerance):
    case = next(c for c in neuron_cases() if c.id == case_id)
    predicted = case_estimate(case, CATALOG).output_tokens_per_s
    assert predicted == pytest.approx(case.measured["output_tokens_per_s"], rel=tolerance)


def test_trn1_tpot_is_weight_read_and_collective_bound_and_follows_the_model_size():
    # TPOT P50 of the 2.18 tables: Llama-2-7b bs1 6.70 ms, Llama-3-70B bs1 24.5-26.5 ms (TP 32 on trn1.32xlarge)
    cases = {c.id: c for c in neuron_cases()}
    small = case_estimate(cases["neuron218_trn1_llama2-7b_tp32_bs1_in128_out8064"], CATALOG)
    large = case_estimate(cases["neuron218_trn1_llama3-70b_tp32_bs1_in128_out128"], CATALOG)
    assert small.tpot_s == pytest.approx(0.0067, rel=0.25) and large.tpot_s == pytest.approx(0.0265, rel=0.25)
    assert large.memory_bound_share < 0.6 and large.communication_s > 0  # not HBM alone: 160 all-reduces a token
    assert json.loads(json.dumps(large.to_json()))["engine"] == "transformers-neuronx"
    assert np.isfinite(large.ttft_s)


def test_the_recorded_fit_is_the_error_at_the_packaged_pair():
    # engines.toml's fitted note records the MAPE of benchmarks/calibrate_neuron_serving.py over every Trainium
    # case; a change to the physics or the cases that moves it means: rerun the script and update the notes
    fitted = engine_profile("vllm-neuron").fitted or ""
    recorded = float(re.search(r"MAPE of the output token rate ([\d.]+)% over all", fitted).group(1))  # type: ignore[union-attr]
    cases = neuron_cases()
    assert f"the {len(cases)} Trainium serving cases" in fitted
    errors = [abs(case_estimate(c, CATALOG).output_tokens_per_s / c.measured["output_tokens_per_s"] - 1) for c in cases]
    assert 100 * float(np.mean(errors)) == pytest.approx(recorded, abs=0.06)


def test_an_engine_that_never_mixes_prefill_and_decode_runs_them_as_two_launches():
    system = trn1()
    mixed = engine_profile("vllm-neuron").model_copy(update={"mixed_steps": True})
    apart = engine_profile("vllm-neuron")
    assert not apart.mixed_steps and engine_profile("vllm").mixed_steps

    def step(engine, decoding: float, prompts: float):
        return step_times(
            LLAMA3_70B,
            system,
            Dtype.BF16,
            Dtype.BF16,
            decode_sequences=np.array([decoding]),
            decode_context_tokens=1500.0,
            prefill_tokens=np.array([prompts * 1024.0]),
            prefill_sequences=np.array([prompts]),
            prompt_tokens=1024.0,
            engine=engine,
        )

    both = step(apart, 8.0, 2.0)
    assert len(both.launches) == 2
    # exactly a decode launch and a prefill launch, each paying its weight reads and step overhead
    assert both.step_s == pytest.approx(step(mixed, 8.0, 0.0).step_s + step(mixed, 0.0, 2.0).step_s, rel=1e-12)
    assert both.step_s > step(mixed, 8.0, 2.0).step_s
    # a steady state's fraction of a prompt per step is one single-prompt launch on that share of the steps
    share = step(apart, 8.0, 0.25)
    assert share.step_s == pytest.approx(step(mixed, 8.0, 0.0).step_s + 0.25 * step(mixed, 0.0, 1.0).step_s, rel=1e-12)
    assert step(apart, 8.0, 0.0).step_s == pytest.approx(step(mixed, 8.0, 0.0).step_s, rel=1e-12)  # nothing to split


def test_validate_counts_the_trainium_serving_cases_in_sample_as_the_neuron_pair_is_fitted_on_them():
    """The Neuron pair lives in engines.toml, outside the calibration manifests: validate must not call
    its cases held out (their left-out figures are calibrate_neuron_serving's, in the intervals)."""
    from clustersim.validation.run import validate_cases

    paths = [p for p in (*bundled_case_files(), *project_case_files()) if p.name == "inference.jsonl"]
    report = validate_cases(paths, load_catalog(use_env=False))
    fitted = report.fitted_on["inference"] or frozenset()
    trainium = [s.id for s in report.cases if "trn" in s.id or "neuron" in s.id.split("_")[0]]
    assert trainium and set(trainium) <= fitted
    gpu_only = [s.id for s in report.cases if s.id.startswith("trtllm_perf_llama3.1-8b_h200")]
    assert gpu_only and not set(gpu_only) & fitted  # the project's H200 columns stay held out
