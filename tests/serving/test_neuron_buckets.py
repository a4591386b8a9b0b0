"""Static-shape buckets by engine: NxD Inference's automatic rule (powers of two below 2**round(log2 L), then
the max length L, neuronx_distributed_inference/modules/autobucketing.py generate_buckets) against
transformers-neuronx's doubling; NxD Inference's sequence-parallel prefill; and the engine list the CLI's
help reads from engines.toml."""

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.engine_names import engine_help
from clustersim.serving.engines import (
    EngineProfile,
    bucket_tokens,
    engine_profile,
    engine_profiles,
    mean_bucket_tokens,
    prompt_bucket_tokens,
)
from clustersim.workload.transformer import Transformer

NXD = engine_profile("nxd-inference")
TNX = engine_profile("transformers-neuronx")


def documented_buckets(longest: int, low: int = 128) -> list[int]:
    """NxD Inference's automatic buckets as its feature guide and autobucketing.py state them."""
    if longest == low:
        return [longest]
    return [2**i for i in range(int(math.log2(low)), round(math.log2(longest)))] + [longest]


def test_the_nxd_engines_bucket_by_the_rounded_rule_and_transformers_neuronx_by_doubling() -> None:
    assert NXD.bucket_rule == engine_profile("vllm-neuron").bucket_rule == "rounded"
    assert TNX.bucket_rule == engine_profile("optimum-neuron-tnx").bucket_rule == "doubling"
    assert engine_profile("optimum-neuron").bucket_rule == "single"  # enable_bucketing False: one bucket


def test_a_single_bucket_pads_every_prompt_and_decode_to_the_compiled_length() -> None:
    one = engine_profile("optimum-neuron")
    assert prompt_bucket_tokens(1500, one, 1750) == 1750
    assert prompt_bucket_tokens(100, one, 1750) == 1750
    assert float(mean_bucket_tokens(1500, 1750, one)) == pytest.approx(1750.0)
    assert float(bucket_tokens(1500, one)) == 1500  # the compiled length unknown: no padding


def test_a_long_prompt_pads_to_the_max_length_not_the_next_power_of_two() -> None:
    # the 405B tutorial's 10,000-token prompt with 1,785 output tokens: buckets 128 ... 8192, then 11,785
    assert documented_buckets(11785)[-2:] == [8192, 11785]
    assert list(bucket_tokens([100, 129, 8192, 8193, 10000], NXD, 11785)) == [128, 256, 8192, 11785, 11785]
    assert prompt_bucket_tokens(10000, NXD, 11785) == 11785
    assert prompt_bucket_tokens(10000, TNX, 11785) == 16384  # transformers-neuronx: the next power of two
    # a max length just past a power of two drops that power: 640 -> buckets 128, 256, 640
    assert list(bucket_tokens([200, 300, 512], NXD, 640)) == [256, 640, 640]
    assert list(bucket_tokens([200, 300, 512], TNX, 640)) == [256, 512, 512]


@given(st.integers(129, 40000), st.integers(1, 40000))
def test_the_bucket_is_the_smallest_documented_one_that_holds_the_length(longest: int, length: int) -> None:
    length = min(length, longest)
    expected = min(b for b in documented_buckets(longest) if b >= length)
    assert float(bucket_tokens(length, NXD, longest)) == expected


def test_decode_positions_attend_over_their_rounded_buckets() -> None:
    # positions 128..640 under L = 640: (128, 256] over 256, (256, 640] over 640
    assert float(mean_bucket_tokens(128, 640, NXD)) == pytest.approx((128 * 256 + 384 * 640) / 512)
    assert float(mean_bucket_tokens(128, 640, TNX)) == pytest.approx((128 * 256 + 256 * 512 + 128 * 640) / 512)


def test_the_engine_help_lists_every_packaged_profile_from_the_file() -> None:
    text = engine_help()
    for name in engine_profiles(use_env=False):
        assert f" {name}," in f" {text}" or f" {name} (" in f" {text}", name
    assert "tensorrt-llm-mlperf-v4" in text and "tensorrt-llm-mlperf-v5" in text
    assert "default: the accelerator's (tensorrt-llm on GPUs, vllm-neuron on Trainium)" in text


def test_sequence_parallel_prefill_splits_the_prompt_norms_over_the_tp_ranks() -> None:
    catalog = load_catalog(use_env=False)
    system = serving_system_for_accelerator(catalog, "trainium2", tp=64, devices_per_node=64, instance="trn2.48xlarge")
    llama = Transformer(name="llama3-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=128256)
    assert NXD.sequence_parallel_prefill and not TNX.sequence_parallel_prefill
    replicated = NXD.model_copy(update={"sequence_parallel_prefill": False})

    def step(engine: EngineProfile, decoding: float, prompt: float):  # type: ignore[no-untyped-def]
        return step_times(
            llama, system, Dtype.BF16, Dtype.BF16, decode_sequences=decoding, decode_context_tokens=2048.0,
            prefill_tokens=prompt, prefill_sequences=1.0 if prompt else 0.0, prompt_tokens=1024.0, engine=engine,
        )  # fmt: skip

    split, whole = step(NXD, 0.0, 1024.0), step(replicated, 0.0, 1024.0)
    assert float(split.elementwise_s) == pytest.approx(float(whole.elementwise_s) / 64)
    assert float(split.gemm_compute_s) == float(whole.gemm_compute_s)  # the GEMMs are the same
    assert float(split.step_s) < float(whole.step_s)
    # decode tokens are not split: token generation has no sequence parallelism
    assert float(step(NXD, 4.0, 0.0).elementwise_s) == float(step(replicated, 4.0, 0.0).elementwise_s)
