"""A deployment's memory plan, CUDA graph padding and step sums, pinned where mutation testing found them loose
(``benchmarks/mutation.py`` group ``serving_setup``): the refusal of a model too big for its devices (its sizes,
advice and field, on one instance and on several), the KV cache over pipeline stages, the graph sizes' edges, and
the memory-bound and scaled step sums."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.bench_sizing import (
    _round_batch,
    _round_tokens,
    bench_caps,
    engine_gib,
    kv_gib_per_token,
    sized_engine,
)
from clustersim.serving.buckets import mean_bucket_tokens, prompt_bucket_tokens
from clustersim.serving.eager_launches import kernels_per_layer
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.formats import BlockFp4
from clustersim.serving.graphs import graph_rows
from clustersim.serving.memory import kv_bytes_per_token, matmul_params
from clustersim.serving.memory_plan import memory_plan
from clustersim.serving.reserved_memory import rule_reserved_fraction
from clustersim.serving.steps import StepTimes
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
GIB = 2**30


def _refusal(model: str, precision: Dtype, *, tp: int, nodes: int = 1, pp: int = 1) -> ClusterSimError:
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=tp, pp=pp, nodes=nodes)
    with pytest.raises(ClusterSimError) as caught:
        memory_plan(load_model(model, use_env=False), system, precision, precision)
    assert caught.value.field == "model"
    return caught.value


def test_a_model_too_big_for_its_replica_is_told_to_use_more_of_the_instance():
    error = str(_refusal("llama3.1-405b", Dtype.BF16, tp=2))
    assert error.startswith("model: llama3.1-405b at bf16 needs ")
    weights, workspace, usable = (float(x) for x in re.findall(r"([\d.]+) GiB", error)[:3])
    assert weights > usable > workspace > 0  # 810 GB of weights over 2 H100s
    assert error.endswith("use a larger tp or pp (up to the 8 devices of one instance), fp8, or more memory")


def test_a_model_too_big_for_a_whole_instance_says_whether_fp8_would_fit():
    """Llama 3.1 405B in BF16 on all 8 H100s of a p5: 101 GiB of weights a device, where 8-bit weights (51 GiB) fit."""
    error = str(_refusal("llama3.1-405b", Dtype.BF16, tp=8))
    assert "it does not fit one instance even over all its 8 devices: fp8 weights (" in error
    fp8 = float(re.search(r"fp8 weights \(([\d.]+) GiB per device\) would fit", error).group(1))
    assert 45 < fp8 < 55 and error.endswith(
        "or use more instances (--nodes) or an instance with more memory per device"
    )
    assert "its weights are fp8 already" in str(_refusal("deepseek-v3", Dtype.FP8, tp=8))


def test_a_model_too_big_for_several_instances_names_them_all():
    error = str(_refusal("deepseek-v3", Dtype.BF16, tp=8, pp=2, nodes=2))
    assert "it does not fit the 2 instances even over all their 16 devices: fp8 weights (" in error


def test_each_pipeline_stage_holds_its_share_of_the_kv_cache():
    model = load_model("llama3.1-70b", use_env=False)
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=4, pp=2)
    plan = memory_plan(model, system, Dtype.BF16, Dtype.BF16, default_calibration())
    assert plan.kv_bytes_per_token == kv_bytes_per_token(model, Dtype.BF16, 4, 2)
    assert plan.kv_bytes_per_token == pytest.approx(kv_bytes_per_token(model, Dtype.BF16, 4, 1) / 2)
    assert plan.kv_capacity_tokens == pytest.approx(plan.kv_budget_bytes / plan.kv_bytes_per_token)


def test_a_trainium_deployment_plans_on_its_own_engine():
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(CATALOG, "trn1.32xlarge", tp=8)
    plan = memory_plan(model, system, Dtype.BF16, Dtype.BF16)
    assert plan.memory_bytes == pytest.approx(system.system.memory_bytes)  # the Neuron engines reserve none


@pytest.mark.parametrize(
    ("sequences", "groups", "rows"),
    [
        (0.5, 1, 0.5 * 8),  # under one sequence: that share of the smallest graph
        (1.0, 1, 8.0),
        (1.5, 1, 8.0),  # more than one sequence: the smallest graph itself
        (40.0, 1, 64.0),  # between the two largest sizes: the largest
        (8.0, 1, 8.0),  # exactly a size: that size
        (9.0, 1, 16.0),
        (64.0, 1, 64.0),  # the largest size itself
        (65.0, 1, 65.0),  # beyond the largest: as it is
        (20.0, 2, 32.0),  # 10 a rank, padded to 16 each
        (130.0, 2, 130.0),  # 65 a rank: beyond the largest
    ],
)
def test_a_decode_step_pads_to_the_smallest_graph_that_holds_it(sequences, groups, rows):
    assert float(graph_rows((8, 16, 32, 64), sequences, groups)) == rows


def _times(**values: float) -> StepTimes:
    names = ("gemm_compute_s", "gemm_memory_s", "decode_attention_s", "prefill_attention_s", "elementwise_s")
    names += ("communication_s", "overhead_s")
    return StepTimes(**{name: np.array([values.get(name, 0.0)]) for name in names})


def test_the_memory_bound_time_is_the_weight_reads_that_bind_the_decode_attention_and_the_elementwise():
    bound = _times(gemm_compute_s=1.0, gemm_memory_s=3.0, decode_attention_s=5.0, elementwise_s=7.0, overhead_s=11.0)
    assert float(bound.memory_bound_s[0]) == 15.0
    compute = _times(gemm_compute_s=3.0, gemm_memory_s=1.0, decode_attention_s=5.0, elementwise_s=7.0)
    assert float(compute.memory_bound_s[0]) == 12.0
    two = StepTimes.in_sequence([bound, compute])
    assert float(two.memory_bound_s[0]) == 27.0 and float(two.gemm_s[0]) == 6.0


def test_a_launch_on_a_share_of_the_steps_scales_every_part():
    parts = StepTimes.in_sequence([_times(gemm_compute_s=2.0, gemm_memory_s=1.0), _times(gemm_memory_s=4.0)])
    half = parts.scaled(np.array([0.5]))
    assert len(half.launches) == 2 and float(half.launches[1].gemm_memory_s[0]) == 2.0
    assert float(half.gemm_s[0]) == 3.0 and float(half.step_s[0]) == 3.0


# ---- the kernels an eager step launches a layer ------------------------------------------------------------------


def _kernels(model: str, precision: Dtype, tp: int) -> float:
    return kernels_per_layer(load_model(model, use_env=False), precision, tp)


def test_deepseek_v3s_layers_launch_their_latent_attention_and_experts():
    """61 layers: latent attention with a query rank (10 launches, 5 of them GEMMs), 58 MoE layers (router, top-k, sort,
    two grouped GEMMs, activation, weighted sum and a shared expert's 3: 10, and 4 quantizing launches in FP8) and 3
    dense MLPs (3, and 2 in FP8); two norms, and two all-reduces at TP 8."""
    assert _kernels("deepseek-v3", Dtype.FP8, 8) == pytest.approx((2 + 2) + 10 + 5 + (58 * 14 + 3 * 5) / 61)
    assert _kernels("deepseek-v3", Dtype.BF16, 1) == pytest.approx(2 + 10 + (58 * 10 + 3 * 3) / 61)


def test_qwen3_nexts_gated_attention_and_delta_rule_layers_are_averaged():
    """12 gated attention layers with query/key norms (5 + 1 + 1) and 36 Gated DeltaNet layers (15); every layer a
    MoE MLP with a shared expert (10)."""
    assert _kernels("qwen3-next-80b-a3b", Dtype.BF16, 1) == pytest.approx(2 + (12 * 7 + 36 * 15) / 48 + 10)
    fp8 = 2 + (12 * 7 + 36 * 15) / 48 + (12 * 2 + 36 * 3) / 48 + 10 + 4
    assert _kernels("qwen3-next-80b-a3b", Dtype.FP8, 1) == pytest.approx(fp8)


def test_nemotron_hs_mamba_layers_without_an_mlp_launch_one_norm_and_one_all_reduce_fewer():
    """28 layers: 4 attention and 24 Mamba-2 (9); 4 of them carry no MLP (a dense MLP's 3 on the other 24)."""
    share = 24 / 28
    expected = (2 + 2) * (1 + share) / 2 + (4 * 5 + 24 * 9) / 28 + 3 * share
    assert _kernels("nemotron-h-8b", Dtype.BF16, 2) == pytest.approx(expected)


def test_a_latent_moe_launches_its_two_projections():
    """Nemotron 3 Super: 8 attention and 40 Mamba-2 layers, 40 latent MoE MLPs (7, two shared experts' 3 each and 2
    projections, and 2 + 2 x 2 + 2 quantizing launches in FP8), 8 MLP-free layers."""
    share = 40 / 48
    mixers = (8 * 5 + 40 * 9) / 48
    bf16 = 2 * (1 + share) / 2 + mixers + 40 * 15 / 48
    assert _kernels("nemotron-3-super-120b-a12b", Dtype.BF16, 1) == pytest.approx(bf16)
    fp8 = 2 * (1 + share) / 2 + mixers + (8 * 2 + 40 * 2) / 48 + 40 * 23 / 48
    assert _kernels("nemotron-3-super-120b-a12b", Dtype.FP8, 1) == pytest.approx(fp8)


# ---- trtllm-bench's sizing -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "batch"),
    [(0.5, 64), (64, 64), (65, 96), (255.5, 256), (256, 256), (257, 384), (1023, 1024), (1024, 1024), (1025, 1280)],
)
def test_the_bench_rounds_a_batch_up_by_its_steps(raw, batch):
    """Under 256 to 32 (at least 64), under 1,024 to 128, beyond to 256 (tensorrt_llm/bench/build/tuning.py)."""
    assert _round_batch(raw) == batch


@pytest.mark.parametrize(
    ("raw", "tokens"),
    [(100, 2048), (2049, 2304), (4095, 4096), (4096, 4096), (4097, 4608), (8191, 8192), (8192, 8192), (8193, 9216)],
)
def test_the_bench_rounds_the_tokens_a_step_up_by_its_steps(raw, tokens):
    """Under 4,096 to 256 (at least 2,048), under 8,192 to 512, beyond to 1,024."""
    assert _round_tokens(raw) == tokens


def test_the_bench_counts_the_engine_and_the_cache_as_its_config_states_them():
    dsv3 = load_model("deepseek-v3", use_env=False)
    params = float(dsv3.num_params())
    assert engine_gib(dsv3, Dtype.BF16) == pytest.approx(2 * params / 2**30)
    assert engine_gib(dsv3, Dtype.FP8) == pytest.approx(params / 2**30)
    dense, expert = matmul_params(dsv3)
    packed = params - (dense + dsv3.moe.experts * expert) * (1 - 0.5 - 1 / 16)
    assert engine_gib(dsv3, BlockFp4.NVFP4) == pytest.approx(packed * 0.5 / 2**30)
    llama = load_model("llama3.3-70b", use_env=False)
    dense, _ = matmul_params(llama)
    assert engine_gib(llama, BlockFp4.NVFP4) == pytest.approx((llama.num_params() - dense * 0.4375) * 0.5 / 2**30)
    # latent attention seen as 128 heads of hidden / heads = 56, at least the tensor-parallel ranks' heads
    assert kv_gib_per_token(dsv3, Dtype.FP8, 8) == pytest.approx(2 * 61 * 128 * 56 * 1 / 2**30)
    assert kv_gib_per_token(llama, Dtype.BF16, 16) == pytest.approx(2 * 80 * 16 * 128 * 2 / 2**30)


def test_a_pipeline_splits_the_bench_batch_over_its_stages_and_counts_every_device():
    llama = load_model("llama3.3-70b", use_env=False)
    system = serving_system_for_instance(CATALOG, "p5en.48xlarge", tp=2, pp=2, dp=1)
    batch, tokens = bench_caps(llama, system, Dtype.FP8, Dtype.FP8, (1024.0, 1024.0, 1024.0), 0.95)
    free = 4 * system.system.memory_bytes / 2**30 - engine_gib(llama, Dtype.FP8)
    requests = free * 0.95 / (kv_gib_per_token(llama, Dtype.FP8, 2) * 2048)
    raw = min(requests, 4096) / 2
    assert 256 < raw < 1024 and batch == 128 * -(-raw // 128)  # 757 a stage: 768 (the whole group's 1,515: 1,536)
    assert tokens == 2048  # 2 x 757 tokens a step, raised to the bench's floor


def test_a_sized_profile_keeps_no_per_chip_caps_and_stays_within_its_own():
    llama = load_model("llama3.3-70b", use_env=False)
    system = serving_system_for_instance(CATALOG, "p5en.48xlarge", tp=1, dp=1)
    base = engine_profile("tensorrt-llm", system.family)
    lowered = base.model_copy(update={"max_batch_sequences_on": {"h200-sxm": 96}, "max_tokens_per_step_on": {}})
    sized = sized_engine(lowered, llama, system, Dtype.FP8, Dtype.FP8, (1024.0, 1024.0, 1024.0))
    assert sized.max_batch_sequences == 96 and sized.max_batch_sequences_on == {}
    assert sized.max_tokens_per_step_on == {} and sized.benchmark_sizing == "fixed"


# ---- Neuron's static-shape buckets -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Buckets:
    bucket_min_tokens: int | None = 128
    bucket_rule: str = "doubling"
    compiled_sequence_tokens: int | None = None
    context_buckets: tuple[int, ...] | None = None


@pytest.mark.parametrize(
    ("profile", "mean"),
    [
        # positions 100..300: 28 in the 128 bucket, 128 in the 256, 44 in the 512 one (at most the cap)
        (Buckets(), (28 * 128 + 128 * 256 + 44 * 300) / 200),
        (Buckets(compiled_sequence_tokens=1024), (28 * 128 + 128 * 256 + 44 * 512) / 200),
        # NxD's rule on a 700-token compile: no bucket from 2**round(log2 700) = 512 up, so 44 attend over 700
        (Buckets(bucket_rule="rounded", compiled_sequence_tokens=700), (28 * 128 + 128 * 256 + 44 * 700) / 200),
        (Buckets(bucket_rule="single", compiled_sequence_tokens=700), 700.0),
        (Buckets(bucket_min_tokens=None), 200.0),
    ],
)
def test_a_decoding_sequence_attends_over_its_positions_buckets(profile, mean):
    assert float(mean_bucket_tokens(100.0, 300.0, profile)) == pytest.approx(mean, rel=1e-12)


def test_a_sequence_of_one_position_takes_its_bucket_and_a_longer_one_is_refused():
    assert float(mean_bucket_tokens(300.0, 300.0, Buckets(compiled_sequence_tokens=1024))) == 512.0
    with pytest.raises(ClusterSimError) as caught:
        mean_bucket_tokens(100.0, 2000.0, Buckets(compiled_sequence_tokens=1024))
    assert (caught.value.field, caught.value.value) == ("compiled_sequence_tokens", 1024)
    assert str(caught.value) == "a request of 2000 tokens is longer than the engine's compiled_sequence_tokens 1024"


def test_a_prompt_pads_to_its_context_bucket_by_the_engines_rule():
    assert prompt_bucket_tokens(300.0, Buckets(), 4096.0) == 512.0  # the next power of two
    assert prompt_bucket_tokens(300.0, Buckets(bucket_rule="rounded"), 700.0) == 700.0  # 512 is no bucket under 700
    assert prompt_bucket_tokens(200.0, Buckets(bucket_rule="rounded"), 700.0) == 256.0
    assert prompt_bucket_tokens(300.0, Buckets(bucket_rule="single"), 700.0) == 700.0
    listed = Buckets(context_buckets=(256, 1024, 2048), compiled_sequence_tokens=4096)
    assert prompt_bucket_tokens(300.0, listed, 0.0) == 1024.0 and prompt_bucket_tokens(256.0, listed, 0.0) == 256.0
    with pytest.raises(ClusterSimError) as caught:
        prompt_bucket_tokens(3000.0, listed, 0.0)
    assert (caught.value.field, caught.value.value) == ("context_buckets", 2048)
    assert str(caught.value) == (
        "a prompt of 3000 tokens is longer than the engine's largest context bucket 2048 (context_buckets [256, 1024, "
        "2048])"
    )
    with pytest.raises(ClusterSimError) as caught:
        prompt_bucket_tokens(5000.0, listed, 0.0)
    assert (caught.value.field, caught.value.value) == ("compiled_sequence_tokens", 4096)


# ---- SGLang's reserved memory by its GPU-memory rule ---------------------------------------------------------------


def _sglang_reserved(gib: float, *, tp: int = 1, pp: int = 1, dp: int = 1, chunk: int = 8192) -> float:
    return rule_reserved_fraction("sglang-gpu-memory", gib * GIB, tp=tp, pp=pp, attention_dp=dp, chunk_tokens=chunk)


def _share(gib: float, reserved_mib: float) -> float:
    return 1.0 - round(max(gib * 1024 - reserved_mib, 0.0) / (gib * 1024), 3)


@pytest.mark.parametrize(
    ("gib", "tp", "pp", "dp", "chunk", "reserved_mib"),
    [
        # 141 GiB H200, TP4 x PP2: the larger graph batch from four ranks, 1,024 MiB per 8 ranks of every stage
        (141, 4, 2, 1, 8192, 512 + 1.5 * 8192 + 2 * 512 + 1024 * 8 / 8),
        # TP2 x DP-attention 2 (4 ranks): the large graph batch, its buffers again per group (3 x 512 x 2, and half
        # that again above a batch of 300)
        (141, 2, 1, 2, 8192, 512 + 1.5 * 8192 + 2 * 512 + 1024 * 4 / 8 + 3 * 512 * 2 + 1.5 * 512 * 2),
        # three ranks: the small graph batch (256 below 160 GiB)
        (141, 3, 1, 1, 8192, 512 + 1.5 * 8192 + 2 * 256 + 1024 * 3 / 8),
        # 40 GiB below the 60 GiB floor's threshold, a chunk under 2,048 counted as 2,048
        (40, 1, 1, 1, 1024, 512 + 1.5 * 2048 + 2 * 32 + 1024 / 8),
        # 60 GiB exactly: the next class (256) and no 10 GiB floor (it starts above 60 GiB)
        (60, 1, 1, 1, 8192, 512 + 1.5 * 8192 + 2 * 256 + 1024 / 8),
    ],
)
def test_sglang_keeps_back_its_metadata_prefill_graph_buffers_and_parallel_share(gib, tp, pp, dp, chunk, reserved_mib):
    assert _sglang_reserved(gib, tp=tp, pp=pp, dp=dp, chunk=chunk) == pytest.approx(_share(gib, reserved_mib))


def test_sglang_keeps_at_least_ten_gib_back_above_sixty():
    assert _sglang_reserved(61, chunk=2048) == pytest.approx(_share(61, 10 * 1024))
