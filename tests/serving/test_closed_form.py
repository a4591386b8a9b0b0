"""The serving model against hand derivations: Erlang C, bytes held, and one engine step on a round device.

The device: 1 PFLOP/s dense BF16, 2 PFLOP/s FP8, 2 TB/s HBM, 80 GiB; the calibration: GEMMs at half the
peak whatever their size, weight and KV reads at half the HBM bandwidth, prefill attention at a quarter
of the peak, 10 hidden-vector passes per token and layer, 20 us per step and 1 us per sequence of
overhead; the engine: TensorRT-LLM's with 16-token KV blocks and 90% of the memory left for the cache.
So a BF16 GEMM runs at 5e14 FLOP/s and every byte read takes 1e-12 s.

The model (Llama-style): 4 layers, h = 1024, SwiGLU f = 4096, 8 query heads and 4 KV heads of 128,
V = 32768, untied: per layer 3,145,728 attention and 12,582,912 MLP weights, 33,554,432 in the logits.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import predict_collective
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from clustersim.network.topology import Topology
from clustersim.serving.engine import (
    DEFAULT_CALIBRATION,
    ServingSystem,
    kv_bytes_per_token,
    memory_plan,
    reserved_tokens,
    step_times,
    weight_bytes_per_device,
)
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Batching, Request, batch_limit, estimate_offline
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.queueing import erlang_c
from clustersim.system import System
from clustersim.workload.transformer import MoE, Transformer

REL = 1e-9
GIB = 2**30
CATALOG = load_catalog(use_env=False)
CAL = dataclasses.replace(
    DEFAULT_CALIBRATION,
    flop_efficiency=0.5,
    gemm_half_tokens=0.0,
    hbm_efficiency=0.5,
    attention_flop_efficiency=0.25,
    latent_decode_flop_efficiency=0.25,
    activation_passes=10.0,
    step_overhead_s=2e-5,
    layer_overhead_s=0.0,  # test_a_layer_overhead_is_paid_per_layer_of_each_stage_per_step prices it
    sync_overhead_s=1e-5,
    sequence_overhead_s=1e-6,
    workspace_bytes=1.0 * GIB,
    moe_token_layer_s=1e-7,
)
# The engine: KV cache in 16-token blocks, 90% of the memory left, 4096 sequences and 32768 tokens per step (fixed:
# not sized by trtllm-bench's heuristic, tests/serving/test_bench_sizing.py).
ENGINE = engine_profile("tensorrt-llm").model_copy(
    update={
        "kv_memory_fraction": 0.9,
        "kv_block_tokens": 16,
        "max_batch_sequences": 4096,
        "max_tokens_per_step": 32768,
        "benchmark_sizing": "fixed",
    }
)
GEMM, HBM = 5e14, 1e12  # FLOP/s and B/s achieved
TINY = Transformer(
    name="tiny", layers=4, hidden=1024, ffn_hidden=4096, heads=8, kv_heads=4, vocab=32768, ffn_type="swiglu"
)
DENSE = 3_145_728 + 12_582_912  # matmul weights per layer
HEAD = 32768 * 1024  # logits weights
PARAMS = 130_032_640  # 4 x (DENSE + 2 norms of 1024) + embedding and output 2 V h + final norm


def _whole_prompts(step_at, prompts_per_step: float, own: int = 0) -> tuple[float, float]:
    """By hand: the mean of ``step_at(k + own)`` over a Poisson count ``k`` of whole prompts with mean
    ``prompts_per_step``, and an arrival's mean wait for the next step, E[D^2] / 2 E[D] over the steps without
    ``own`` (clustersim.serving.whole_prompts)."""
    p = [math.exp(-prompts_per_step) * prompts_per_step**k / math.factorial(k) for k in range(120)]
    mean = sum(pk * step_at(k + own) for k, pk in enumerate(p))
    plain = [step_at(k) for k in range(len(p))]
    wait = sum(pk * d * d for pk, d in zip(p, plain, strict=True)) / (
        2 * sum(pk * d for pk, d in zip(p, plain, strict=True))
    )
    return mean, wait


def _round_gpu():
    h100 = CATALOG.accelerator("h100-sxm")

    def fig(figure, value):
        return figure.model_copy(update={"value": value})

    dense = dict(h100.dense_flop_per_s)
    dense.update({Dtype.BF16: fig(dense[Dtype.BF16], 1e15), Dtype.FP16: fig(dense[Dtype.FP16], 1e15)})
    dense[Dtype.FP8] = fig(dense[Dtype.FP8], 2e15)
    return h100.model_copy(
        update={
            "id": "round-gpu",
            "dense_flop_per_s": dense,
            "memory_bandwidth_bytes_per_s": fig(h100.memory_bandwidth_bytes_per_s, 2e12),
            "memory_bytes": fig(h100.memory_bytes, 80 * GIB),
            "exp_per_s": None,  # attention is its products alone here (test_prefill_exponentials.py prices the rest)
        }
    )


GPU = _round_gpu()


def serving(tp: int = 1, pp: int = 1, nvlink: float = 1e11, dp: int = 1) -> ServingSystem:
    devices = max(tp * pp * dp, 1)
    topology = Topology(
        name="round",
        num_devices=devices,
        devices_per_node=devices,
        scaleup_bytes_per_s=nvlink,
        network_bytes_per_s=50e9,
        in_network_reduction=False,
    )
    return ServingSystem.on(
        System(name="round", accelerator=GPU, cores_per_device=1, topology=topology), "round", tp=tp, pp=pp, dp=dp
    )


# ---- Erlang C ----------------------------------------------------------------------------------------------


def _erlang_c_exact(servers: int, load: Fraction) -> Fraction:
    """Textbook Erlang C in exact arithmetic: (a^c / c! x c / (c - a)) / (sum_{k<c} a^k / k! + that)."""
    top = load**servers / math.factorial(servers) * servers / (servers - load)
    return top / (sum(load**k / math.factorial(k) for k in range(servers)) + top)


def test_erlang_c_textbook_values():
    for rho in (0.1, 0.5, 0.9):
        assert erlang_c(1, rho) == pytest.approx(rho, rel=1e-12)  # M/M/1: P(wait) = rho
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-12)  # M/M/2, rho 0.5
    assert erlang_c(2, 1.5) == pytest.approx(9 / 14, rel=1e-12)  # M/M/2, rho 0.75
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9, rel=1e-12)
    for servers, load in ((10, Fraction(7)), (50, Fraction(45)), (100, Fraction(80)), (170, Fraction(169))):
        assert erlang_c(servers, float(load)) == pytest.approx(float(_erlang_c_exact(servers, load)), rel=1e-9)


def test_erlang_c_limits():
    assert erlang_c(4, 0.0) == 0.0 and erlang_c(4, -1.0) == 0.0
    assert erlang_c(4, 4.0) == 1.0 and erlang_c(4, 5.0) == 1.0
    assert erlang_c(2000, 1000.0) < 1e-100


# ---- bytes --------------------------------------------------------------------------------------------------


def test_kv_bytes_per_token_by_hand():
    # K and V x 4 layers x 4 KV heads x 128 x 2 bytes
    assert kv_bytes_per_token(TINY, Dtype.BF16) == 2 * 4 * 4 * 128 * 2 == 8192
    assert kv_bytes_per_token(TINY, Dtype.FP8) == 4096
    assert kv_bytes_per_token(TINY, Dtype.BF16, tp=2) == 4096  # 2 KV heads per rank
    assert kv_bytes_per_token(TINY, Dtype.BF16, tp=8) == 2048  # one head, replicated
    assert kv_bytes_per_token(TINY, Dtype.BF16, pp=2) == 4096


def test_weight_bytes_per_device_by_hand():
    assert TINY.num_params() == PARAMS
    assert weight_bytes_per_device(TINY, Dtype.BF16) == 2 * PARAMS
    # FP8 layer matmuls (4 x 15,728,640 x 1 byte), the rest (embeddings, output, norms) in BF16.
    fp8 = 4 * DENSE * 1 + (PARAMS - 4 * DENSE) * 2
    assert weight_bytes_per_device(TINY, Dtype.FP8) == fp8
    assert weight_bytes_per_device(TINY, Dtype.FP8, tp=2, pp=2) == fp8 / 4
    moe = TINY.model_copy(update={"moe": MoE(experts=4, top_k=2, shared_experts=1)})
    # attention + shared expert + router quantized, 4 routed experts quantized
    quantized = 4 * (3_145_728 + 12_582_912 + 1024 * 4 + 4 * 12_582_912)
    assert weight_bytes_per_device(moe, Dtype.FP8) == quantized + (moe.num_params() - quantized) * 2


def test_memory_plan_and_batch_limit_by_hand():
    system = serving()
    plan = memory_plan(TINY, system, Dtype.BF16, Dtype.BF16, CAL, ENGINE)
    budget = (80 * GIB - 2 * PARAMS - 1 * GIB) * 0.9
    assert plan.kv_budget_bytes == pytest.approx(budget, rel=REL)
    assert plan.kv_capacity_tokens == pytest.approx(budget / 8192, rel=REL)
    # 1000 + 200 tokens reserve 1200 rounded up to whole 16-token blocks: 1200
    limit, reason, _ = batch_limit(TINY, system, Request(1000, 200), CAL, ENGINE)
    by_capacity = math.floor(budget / 8192 / 1200)  # 7742
    by_tokens = math.floor(32768 / (1 + 1000 / 200))  # prompt and output tokens per step: 5461
    assert by_capacity > by_tokens > 4096
    assert (limit, reason) == (4096, "scheduler")  # the engine's sequence cap
    limit, reason, _ = batch_limit(TINY, serving(pp=2), Request(100, 5), CAL, ENGINE)
    assert (limit, reason) == (math.floor(32768 / (1 + 100 / 5)) * 2, "scheduler")  # 1560 per stage x 2 stages
    limit, reason, _ = batch_limit(TINY, system, Request(100_000, 1001), CAL, ENGINE)
    assert (limit, reason) == (math.floor(budget / 8192 / (101_008)), "capacity")  # 101,001 -> 101,008


# ---- one engine step ------------------------------------------------------------------------------------------


def test_batch_one_decode_step_is_a_weight_read_roofline():
    # Static batching, one sequence of 1000 + 200 tokens: each decode step reads all weights once.
    est = estimate_offline(
        TINY, serving(), Request(1000, 200, batching=Batching.STATIC), batch=1, cal=CAL, engine=ENGINE
    )
    context = 1000 + 200 / 2  # mean KV length over the decode
    compute = 2 * 1 * (4 * DENSE + HEAD) / GEMM
    weights = (4 * DENSE * 2 + HEAD * 2) / HBM
    kv = (context + 1) * 8192 / HBM  # its cache and the new token's K and V
    attention_flops = 4 * 4 * 8 * 128 * context / GEMM
    elementwise = 1 * 4 * 10 * 1024 * 2 / HBM
    overhead = 2e-5 + 1e-6
    assert est.gemm_compute_s == pytest.approx(compute, rel=REL)
    assert est.gemm_memory_s == pytest.approx(weights, rel=REL)
    assert est.decode_attention_s == pytest.approx(max(kv, attention_flops), rel=REL)
    assert est.elementwise_s == pytest.approx(elementwise, rel=REL)
    assert est.overhead_s == pytest.approx(overhead, rel=REL)
    assert (est.prefill_attention_s, est.communication_s) == (0.0, 0.0)
    step = weights + kv + elementwise + overhead
    assert est.step_s == pytest.approx(step, rel=REL)
    assert est.tpot_s == pytest.approx(step, rel=REL)
    assert est.memory_bound_share == pytest.approx((weights + kv + elementwise) / step, rel=REL)
    # The prefill step: 1000 tokens through the GEMMs, causal attention 2 L heads d n^2 at a quarter peak.
    prefill = (
        max(2 * (1000 * 4 * DENSE + HEAD) / GEMM, weights)
        + 1000 * 8192 / HBM
        + 2 * 4 * 8 * 128 * 1000**2 / 0.25e15
        + 1000 * 4 * 10 * 1024 * 2 / HBM
        + 2e-5
        + 1e-6
    )
    assert est.ttft_s == pytest.approx(prefill, rel=REL)
    assert est.output_tokens_per_s == pytest.approx(200 / (prefill + 200 * step), rel=REL)
    assert est.request_rate_per_s == pytest.approx(1 / (prefill + 200 * step), rel=REL)


def test_fp8_reads_half_the_layer_weights_and_computes_at_the_fp8_peak():
    est = estimate_offline(
        TINY, serving(), Request(1000, 200, Dtype.FP8, Dtype.BF16, Batching.STATIC), batch=1, cal=CAL, engine=ENGINE
    )
    assert est.gemm_memory_s == pytest.approx((4 * DENSE * 1 + HEAD * 2) / HBM, rel=REL)
    assert est.gemm_compute_s == pytest.approx(2 * 4 * DENSE / 1e15 + 2 * HEAD / GEMM, rel=REL)  # logits in BF16
    assert est.kv_bytes_per_token_per_device == 8192


@pytest.mark.parametrize("weights", [Dtype.BF16, Dtype.FP8])
def test_prefill_attention_computes_in_the_cache_format(weights: Dtype):
    """Causal attention 2 L heads d n^2 at a quarter of the peak of the KV cache's format, whatever the weights':
    FP8 weights beside a 16-bit cache (vLLM's and SGLang's default for an FP8 checkpoint) keep the BF16 peak."""
    causal = 2 * 4 * 8 * 128 * 1000**2
    for kv, peak in ((Dtype.BF16, 1e15), (Dtype.FP8, 2e15)):
        step = step_times(
            TINY, serving(), weights, kv, decode_sequences=0.0, decode_context_tokens=0.0, prefill_tokens=1000.0,
            prefill_sequences=1.0, prompt_tokens=1000.0, cal=CAL, engine=ENGINE,
        )  # fmt: skip
        assert float(step.prefill_attention_s) == pytest.approx(causal / (0.25 * peak), rel=REL)


def test_continuous_step_mixes_decode_and_prefill():
    # 10 sequences decode while their replacements' prompts go through the same steps: 10 / 200 = 0.05 prompts a
    # step on average, each whole (1000 tokens) in the step that carries it, so a Poisson count of them a step.
    est = estimate_offline(TINY, serving(), Request(1000, 200), batch=10, cal=CAL, engine=ENGINE)
    context = 1100
    weights = (4 * DENSE * 2 + HEAD * 2) / HBM

    def step_at(prompts: float) -> float:
        tokens = 10 + 1000 * prompts
        compute = 2 * tokens * 4 * DENSE / GEMM + 2 * (10 + prompts) * HEAD / GEMM
        kv = (10 * context + tokens) * 8192 / HBM
        prefill_attention = prompts * 2 * 4 * 8 * 128 * 1000**2 / 0.25e15
        elementwise = tokens * 4 * 10 * 1024 * 2 / HBM
        overhead = 2e-5 + 1e-6 * (10 + prompts)
        return (
            max(compute, weights)
            + max(kv, 4 * 4 * 8 * 128 * context * 10 / GEMM)
            + prefill_attention
            + (elementwise + overhead)
        )

    step, wait = _whole_prompts(step_at, 0.05)
    assert est.step_s == pytest.approx(step, rel=REL)
    assert est.output_tokens_per_s == pytest.approx(10 / step, rel=REL)
    # Whole prompts cost more than the mean share would (a step is convex in its tokens: Jensen).
    assert step > step_at(0.05) * (1 + 1e-3)
    # The first token waits for the step in progress (a long one likelier), then rides a step that also carries
    # its prompt beside the others that arrived.
    first, _ = _whole_prompts(step_at, 0.05, own=1)
    # the model keeps the counts 0-2 of so small a share and the tail past them at its mean count: exact for the
    # means of steps linear in the count past one prompt, not for the squares in the wait
    assert est.ttft_s == pytest.approx(first + wait, rel=1e-6)
    assert wait > 0.5 * step


def test_tensor_parallel_step_adds_two_all_reduces_per_layer():
    system = serving(tp=2)
    est = estimate_offline(TINY, system, Request(1000, 200, batching=Batching.STATIC), batch=1, cal=CAL, engine=ENGINE)
    all_reduce = predict_collective(Op.ALL_REDUCE, 1 * 1024 * 2, Fabric("hand", 2, 1, 1e11, 50e9, False)).time_s[0]
    assert est.communication_s == pytest.approx(2 * 4 * (all_reduce + 1e-5), rel=REL)
    assert est.gemm_memory_s == pytest.approx((4 * DENSE * 2 + HEAD * 2) / 2 / HBM, rel=REL)
    assert est.gemm_compute_s == pytest.approx(2 * (4 * DENSE + HEAD) / 2 / GEMM, rel=REL)


def test_pipeline_stages_send_once_per_step_and_a_token_takes_pp_steps():
    system = serving(pp=2)
    est = estimate_offline(TINY, system, Request(1000, 200, batching=Batching.STATIC), batch=2, cal=CAL, engine=ENGINE)
    send = predict_collective(Op.SENDRECV, 1 * 1024 * 2, Fabric("hand", 2, 1, 1e11, 50e9, False)).time_s[0]
    assert est.communication_s == pytest.approx(send, rel=REL)  # one sequence per stage
    weights = (2 * DENSE * 2 + HEAD * 2 / 2) / HBM  # 2 layers, half the logits
    assert est.gemm_memory_s == pytest.approx(weights, rel=REL)
    assert est.tpot_s == pytest.approx(2 * est.step_s, rel=REL)


def test_moe_decode_reads_only_the_experts_its_tokens_touch():
    moe = TINY.model_copy(update={"moe": MoE(experts=4, top_k=2)})
    est = estimate_offline(
        moe, serving(), Request(1000, 200, batching=Batching.STATIC), batch=1, cal=CAL, engine=ENGINE
    )
    # One token touches top_k of 4 experts: 4 x (1 - (1 - 2/4)^1) = 2 experts' weights.
    attention_router = 3_145_728 + 1024 * 4
    assert est.gemm_memory_s == pytest.approx((4 * (attention_router + 2 * 12_582_912) * 2 + HEAD * 2) / HBM, rel=REL)
    # Its one token pays the MoE layer's cost per token in each of 4 layers, whatever its top_k.
    per_token = 1 * 4 * 1e-7
    flops = 2 * (4 * (attention_router + 2 * 12_582_912) + HEAD) / GEMM
    assert est.gemm_compute_s == pytest.approx(flops + per_token, rel=REL)


# ---- the server scenario -----------------------------------------------------------------------------------


def test_server_latency_at_a_light_load_is_the_unloaded_step():
    system = serving()
    request = Request(1000, 200)
    light = estimate_server(TINY, system, request, 0.01, cal=CAL, engine=ENGINE)
    assert light.request_rate_per_s == 0.01 and light.output_tokens_per_s == pytest.approx(2.0)
    # 2 tokens/s of demand: a fraction of a sequence decodes, so a step is about the batch-1 step.
    one = estimate_offline(TINY, system, request, batch=1, cal=CAL, engine=ENGINE)
    assert light.tpot_s < one.tpot_s
    assert light.tpot_s == pytest.approx(one.tpot_s, rel=0.05)
    assert light.ttft_s < one.ttft_s


def test_max_rate_sits_on_the_binding_target():
    system = serving()
    request = Request(1000, 200)
    best = max_rate(TINY, system, request, ttft_target_s=1.0, tpot_target_s=2e-3, cal=CAL, engine=ENGINE)
    assert best.batch_limited_by == "tpot target"
    # the search interpolates the step over a grid of batches; the estimate prices its own batch exactly
    assert best.tpot_s == pytest.approx(2e-3, rel=1e-4)
    assert best.ttft_s < 1.0
    best = max_rate(TINY, system, request, ttft_target_s=5e-3, tpot_target_s=1.0, cal=CAL, engine=ENGINE)
    assert best.batch_limited_by == "ttft target"
    assert best.ttft_s == pytest.approx(5e-3, rel=1e-6)
    # The answer is the server estimate at the rate it reports.
    again = estimate_server(TINY, system, request, best.request_rate_per_s, cal=CAL, engine=ENGINE)
    assert (again.ttft_s, again.tpot_s) == (
        pytest.approx(best.ttft_s, rel=1e-12),
        pytest.approx(best.tpot_s, rel=1e-12),
    )
    with pytest.raises(ClusterSimError, match="rate: must be positive"):
        estimate_server(TINY, system, request, 0.0, cal=CAL, engine=ENGINE)


def test_server_ttft_adds_the_m_d_c_wait_for_a_slot():
    # A slow engine (1 s per step, everything else under 1 ms) with 4 slots: requests of 10 output tokens
    # hold a slot for 10 steps, so 0.3 requests/s offer a load of about 3 to 4 servers.
    slow = dataclasses.replace(CAL, step_overhead_s=1.0, sequence_overhead_s=0.0)
    four = ENGINE.model_copy(update={"max_batch_sequences": 4})
    system, request = serving(), Request(100, 10)
    full = estimate_offline(TINY, system, request, batch=4, cal=slow, engine=four)
    assert full.max_batch == 4 and 1.0 < full.step_s < 1.001
    holding = 10 * full.step_s  # a slot's time per request
    load = 0.3 * holding
    c = Fraction(4)
    a = Fraction(load)
    wait = 0.5 * float(_erlang_c_exact(4, a)) * holding / float(c - a)  # M/D/c: half the M/M/c wait
    est = estimate_server(TINY, system, request, 0.3, cal=slow, engine=four)
    # then half a step on average, and the step that carries the prompt (about 1 s each)
    assert 1.5 < est.ttft_s - wait < 1.502
    assert 1.0 < est.tpot_s < 1.001
    assert est.output_tokens_per_s == pytest.approx(3.0, rel=REL)
    with pytest.raises(ClusterSimError, match=r"exceeds the saturation rate of 0\.4 requests/s"):
        estimate_server(TINY, system, request, 0.41, cal=slow, engine=four)


def test_server_targets_at_a_percentile_hold_the_wait_tail():
    # At the 99th percentile the TTFT target binds on the wait's tail: P(wait > t) = C exp(-t / scale),
    # scale = half the M/M/c one (M/D/c); the rate that meets it is lower than the one meeting the mean.
    slow = dataclasses.replace(CAL, step_overhead_s=1.0, sequence_overhead_s=0.0)
    four = ENGINE.model_copy(update={"max_batch_sequences": 4})
    system, request = serving(), Request(100, 10)
    mean = max_rate(TINY, system, request, ttft_target_s=3.0, tpot_target_s=10.0, cal=slow, engine=four)
    tail = max_rate(
        TINY, system, request, ttft_target_s=3.0, tpot_target_s=10.0, cal=slow, engine=four, percentile=0.99
    )
    assert tail.request_rate_per_s < mean.request_rate_per_s
    step = estimate_offline(TINY, system, request, batch=4, cal=slow, engine=four).step_s
    holding = 10 * step
    load = tail.request_rate_per_s * holding
    scale = 0.5 * holding / (4 - load)
    first = tail.ttft_s - 0.5 * erlang_c(4, load) * scale * 2  # the mean TTFT less its mean wait
    quantile = scale * math.log(erlang_c(4, load) / 0.01)
    assert quantile + first == pytest.approx(3.0, rel=1e-6)
    with pytest.raises(ClusterSimError, match="percentile: must be between 0 and 1"):
        max_rate(TINY, system, request, ttft_target_s=3.0, tpot_target_s=10.0, cal=slow, percentile=99)


# ---- what the engine and the board do ---------------------------------------------------------------------


def _static(batch: int = 1, cal=CAL, engine=ENGINE, system: ServingSystem | None = None, request=None):
    request = request or Request(1000, 200, batching=Batching.STATIC)
    return estimate_offline(TINY, system or serving(), request, batch=batch, cal=cal, engine=engine)


def test_a_per_head_decode_kernel_reads_each_kv_head_once_per_query_head():
    # 8 query heads over 4 KV heads: an older kernel (no GQA kernel) reads every KV head twice.
    gqa, per_head = _static(batch=4), _static(batch=4, engine=ENGINE.model_copy(update={"gqa_decode_kernel": False}))
    context = 1100
    assert gqa.decode_attention_s == pytest.approx((4 * context + 4) * 8192 / HBM, rel=REL)
    assert per_head.decode_attention_s == pytest.approx((4 * context * 2 + 4) * 8192 / HBM, rel=REL)
    # at tp 8 each rank holds one query head and one (replicated) KV head: nothing to re-read
    wide = serving(tp=8)
    one = _static(system=wide, engine=ENGINE.model_copy(update={"gqa_decode_kernel": False}))
    assert one.decode_attention_s == _static(system=wide).decode_attention_s


def test_the_engines_kernels_and_the_board_power_scale_compute_only():
    base = _static()
    slower = _static(engine=ENGINE.model_copy(update={"kernel_efficiency": 0.5}))
    assert slower.gemm_compute_s == pytest.approx(2 * base.gemm_compute_s, rel=REL)
    assert slower.ttft_s > base.ttft_s  # the prefill's GEMMs and attention
    assert (slower.gemm_memory_s, slower.decode_attention_s) == (base.gemm_memory_s, base.decode_attention_s)
    # The round GPU is an H100 (700 W TDP): at 1400 W its clock rises by 2^(1/3).
    system = serving()
    boosted = dataclasses.replace(system, board_power_watts=1400.0)
    assert boosted.clock_ratio(1 / 3) == pytest.approx(2 ** (1 / 3), rel=1e-12)
    fast = _static(system=boosted, cal=dataclasses.replace(CAL, power_clock_exponent=1 / 3))
    assert fast.gemm_compute_s == pytest.approx(base.gemm_compute_s / 2 ** (1 / 3), rel=REL)
    assert fast.gemm_memory_s == base.gemm_memory_s
    assert system.clock_ratio(1 / 3) == 1.0  # no power limit of its own: the TDP's clock
    with pytest.raises(ClusterSimError, match="board power: must be positive"):
        ServingSystem(name="x", system=system.system, board_power_watts=0.0)


def test_small_gemms_reach_less_of_the_peak():
    # GEMMs of M rows reach M / (M + half) of the fitted fraction: half = 100 tokens adds 100 rows' time.
    est = _static(cal=dataclasses.replace(CAL, gemm_half_tokens=100.0))
    assert est.gemm_compute_s == pytest.approx(2 * 101 * (4 * DENSE + HEAD) / GEMM, rel=REL)


def test_engine_memory_share_block_size_and_overheads():
    vllm_like = ENGINE.model_copy(
        update={"reserved_memory_fraction": 0.1, "kv_memory_fraction": 1.0, "step_overhead_s": 1e-3}
    )
    plan = memory_plan(TINY, serving(), Dtype.BF16, Dtype.BF16, CAL, vllm_like)
    assert plan.kv_budget_bytes == pytest.approx(80 * GIB * 0.9 - 2 * PARAMS - 1 * GIB, rel=REL)
    assert _static(engine=vllm_like).overhead_s == pytest.approx(1e-3 + 1e-6, rel=REL)
    # 1001 + 200 tokens in 16-token blocks: 1216; in 1-token pages: 1201
    assert reserved_tokens(1001, 200, ENGINE) == 1216
    assert reserved_tokens(1001, 200, ENGINE.model_copy(update={"kv_block_tokens": 1})) == 1201


def test_each_routed_expert_is_a_small_gemm_of_its_share_of_the_rows():
    # 4 experts, top 2, one token: it touches 4 x (1 - (1 - 2/4)^1) = 2 experts, each a GEMM of one row;
    # with half = 100 tokens each of those GEMMs costs 101 rows, as the dense ones do.
    moe = TINY.model_copy(update={"moe": MoE(experts=4, top_k=2)})
    est = _static(cal=dataclasses.replace(CAL, gemm_half_tokens=100.0), engine=ENGINE)
    attention_router = 3_145_728 + 1024 * 4
    moe_est = estimate_offline(
        moe,
        serving(),
        Request(1000, 200, batching=Batching.STATIC),
        batch=1,
        cal=dataclasses.replace(CAL, gemm_half_tokens=100.0),
        engine=ENGINE,
    )
    flops = 2 * 4 * (101 * attention_router + (2 * 1 + 2 * 100) * 12_582_912) + 2 * 101 * HEAD
    per_token = 1 * 4 * 1e-7  # per token and MoE layer, not per routed or padded row
    assert moe_est.gemm_compute_s == pytest.approx(flops / GEMM + per_token, rel=REL)
    assert est.gemm_compute_s == pytest.approx(2 * 101 * (4 * DENSE + HEAD) / GEMM, rel=REL)


# The slow engine of the M/D/c test: 1 s per step, 4 slots, requests of 100 + 10 tokens.
SLOW = dataclasses.replace(CAL, step_overhead_s=1.0, sequence_overhead_s=0.0)
FOUR = ENGINE.model_copy(update={"max_batch_sequences": 4})


def test_server_with_pipeline_stages_holds_a_slot_for_pp_steps_per_token():
    system, request = serving(pp=2), Request(100, 10)
    step = estimate_offline(TINY, system, request, batch=4, cal=SLOW, engine=FOUR).step_s  # one stage's step
    assert 1.0 < step < 1.001
    holding = 10 * 2 * step  # 10 tokens, each 2 stage steps
    load = 0.15 * holding  # about 3 of 4 slots
    wait = 0.5 * float(_erlang_c_exact(4, Fraction(load))) * holding / (4 - load)
    est = estimate_server(TINY, system, request, 0.15, cal=SLOW, engine=FOUR)
    # half a stage step, then the prompt's step on each of the 2 stages
    assert 2.5 < est.ttft_s - wait < 2.503
    assert 2.0 < est.tpot_s < 2.002
    # 4 sequences, 2 per stage, a token every 2 steps: 2 tokens/s, 0.2 requests/s
    with pytest.raises(ClusterSimError, match=r"saturation rate of 0\.2 requests/s"):
        estimate_server(TINY, system, request, 0.21, cal=SLOW, engine=FOUR)


def test_server_replicas_share_the_rate():
    one, two, request = serving(), serving(dp=2), Request(100, 10)
    a = estimate_server(TINY, one, request, 0.3, cal=SLOW, engine=FOUR)
    b = estimate_server(TINY, two, request, 0.6, cal=SLOW, engine=FOUR)
    assert (b.ttft_s, b.tpot_s, b.batch) == (a.ttft_s, a.tpot_s, a.batch)
    assert (b.request_rate_per_s, b.output_tokens_per_s) == (0.6, pytest.approx(6.0, rel=REL))
    with pytest.raises(ClusterSimError, match=r"saturation rate of 0\.8 requests/s"):
        estimate_server(TINY, two, request, 0.81, cal=SLOW, engine=FOUR)
    loose = {"ttft_target_s": 1e6, "tpot_target_s": 1e6, "cal": SLOW, "engine": FOUR}
    assert max_rate(TINY, two, request, **loose).request_rate_per_s == pytest.approx(
        2 * max_rate(TINY, one, request, **loose).request_rate_per_s, rel=1e-9
    )


def test_server_near_saturation_and_loose_targets():
    system, request = serving(), Request(100, 10)
    full = estimate_offline(TINY, system, request, batch=4, cal=SLOW, engine=FOUR)
    saturation = 4 / full.step_s / 10  # requests/s with every slot decoding
    # 0.99 of saturation is still served (a long queue, but finite)
    near = estimate_server(TINY, system, request, 0.99 * saturation, cal=SLOW, engine=FOUR)
    assert near.ttft_s > 100 and near.batch == 4
    # Targets nothing can miss: the highest rate is saturation itself (to the bisection's precision).
    best = max_rate(TINY, system, request, ttft_target_s=1e9, tpot_target_s=1e9, cal=SLOW, engine=FOUR)
    assert best.request_rate_per_s == pytest.approx(saturation, rel=1e-6)


def test_server_estimates_carry_the_engine_the_calibration_and_the_scenario():
    system, request = serving(), Request(1000, 200)
    budget = (80 * GIB - 2 * PARAMS - 1 * GIB) * 0.9  # this calibration's 1 GiB workspace, the engine's 90%
    est = estimate_server(TINY, system, request, 0.01, cal=CAL, engine=ENGINE)
    best = max_rate(TINY, system, request, ttft_target_s=1.0, tpot_target_s=2e-3, cal=CAL, engine=ENGINE)
    for answer in (est, best):
        assert answer.kv_capacity_tokens_per_device == pytest.approx(budget / 8192, rel=REL)
        assert (answer.scenario, answer.max_batch) == ("server", 4096)
    assert est.batch_limited_by == "request rate"
    # An engine with 5 ms of host cost per step: the server's steps carry it too.
    host = ENGINE.model_copy(update={"step_overhead_s": 5e-3})
    assert estimate_server(TINY, system, request, 0.01, cal=CAL, engine=host).tpot_s > 5e-3
    with pytest.raises(ClusterSimError, match="even unloaded"):
        max_rate(TINY, system, request, ttft_target_s=1.0, tpot_target_s=1e-3, cal=CAL, engine=host)


def test_percentile_targets():
    system, request = serving(), Request(100, 10)
    # At the median no wait counts while fewer than half the arrivals wait: unloaded, 1.5 s meets 1.6 s.
    best = max_rate(TINY, system, request, ttft_target_s=1.6, tpot_target_s=10.0, cal=SLOW, engine=FOUR, percentile=0.5)
    assert best.request_rate_per_s > 0
    for bad in (0.0, 1.0, 1.5):
        with pytest.raises(ClusterSimError, match="percentile: must be between 0 and 1"):
            max_rate(TINY, system, request, ttft_target_s=3.0, tpot_target_s=10.0, cal=SLOW, percentile=bad)


# ---- more of one step -----------------------------------------------------------------------------------------


def test_a_pipeline_stage_holds_and_reads_its_share():
    system = serving(pp=2)
    est = _static(batch=2, system=system)  # one sequence per stage
    assert est.weights_bytes_per_device == 2 * PARAMS / 2
    assert est.kv_bytes_per_token_per_device == 4096  # 2 of the 4 layers
    assert est.decode_attention_s == pytest.approx((1100 + 1) * 4096 / HBM, rel=REL)
    # 2 layers of GEMMs, and the logits averaged over the 2 stages
    assert est.gemm_compute_s == pytest.approx(2 * 2 * DENSE / GEMM + 2 * HEAD / 2 / GEMM, rel=REL)


def test_decode_attention_turns_compute_bound_on_a_fast_memory():
    fast = GPU.model_copy(
        update={"memory_bandwidth_bytes_per_s": GPU.memory_bandwidth_bytes_per_s.model_copy(update={"value": 2e15})}
    )
    topology = Topology(
        name="fast", num_devices=1, devices_per_node=1, scaleup_bytes_per_s=1e11, network_bytes_per_s=0.0,
        in_network_reduction=False,
    )  # fmt: skip
    system = ServingSystem.on(System(name="fast", accelerator=fast, cores_per_device=1, topology=topology), "f", tp=1)
    est = _static(batch=4, system=system)
    reads = (4 * 1100 + 4) * 8192 / 1e15
    flops = 4 * 4 * 8 * 128 * 1100 * 4 / GEMM  # QK^T and PV of 4 sequences over 1100 keys, 4 layers
    assert flops > reads
    assert est.decode_attention_s == pytest.approx(flops, rel=REL)


def test_prefill_attention_and_host_costs_follow_the_engine():
    slower = ENGINE.model_copy(update={"kernel_efficiency": 0.5, "sequence_overhead_s": 1e-4})
    est = estimate_offline(TINY, serving(), Request(1000, 200), batch=10, cal=CAL, engine=slower)
    # 10 decoding sequences carry 0.05 prompts per step; causal attention of 1000 tokens at half the kernels
    assert est.prefill_attention_s == pytest.approx(0.05 * 2 * 4 * 8 * 128 * 1000**2 / (0.25e15 * 0.5), rel=REL)
    assert est.overhead_s == pytest.approx(2e-5 + 1e-4 * (10 + 0.05), rel=REL)


def test_routed_experts_see_top_k_rows_per_token():
    moe = TINY.model_copy(update={"moe": MoE(experts=4, top_k=2)})
    est = estimate_offline(
        moe, serving(), Request(1000, 200, batching=Batching.STATIC), batch=4, cal=CAL, engine=ENGINE
    )
    dense = 3_145_728 + 1024 * 4  # attention and router
    # 4 tokens through the dense GEMMs, 8 token-expert rows through the experts, 4 logits
    per_token = 4 * 4 * 1e-7  # the 4 tokens in 4 MoE layers (not their 8 rows)
    flops = 2 * (4 * (4 * dense + 8 * 12_582_912) + 4 * HEAD)
    assert est.gemm_compute_s == pytest.approx(flops / GEMM + per_token, rel=REL)
    touched = 4 * (1 - (1 - 2 / 4) ** 4)  # 3.75 of the 4 experts
    assert est.gemm_memory_s == pytest.approx((4 * (dense + touched * 12_582_912) * 2 + HEAD * 2) / HBM, rel=REL)


def test_tensor_and_pipeline_traffic_over_the_batch_grid():
    request = Request(1000, 200)
    fabric = Fabric("hand", 2, 1, 1e11, 50e9, False)
    # The best batch is searched over a grid: every batch's step carries its own all-reduces and sends, of its
    # decode tokens and the whole prompts it carries (a Poisson count, batch / 200 a step on average).
    tp = estimate_offline(TINY, serving(tp=2), request, cal=CAL, engine=ENGINE)

    def all_reduces(prompts: float) -> float:
        payload = (tp.batch + 1000 * prompts) * 1024 * 2
        return 2 * 4 * (float(predict_collective(Op.ALL_REDUCE, payload, fabric).time_s[0]) + 1e-5)

    assert tp.communication_s == pytest.approx(_whole_prompts(all_reduces, tp.batch / 200)[0], rel=REL)
    pp = estimate_offline(TINY, serving(pp=2), request, cal=CAL, engine=ENGINE)

    def send(prompts: float) -> float:  # per stage
        return float(predict_collective(Op.SENDRECV, (pp.batch / 2 + 1000 * prompts) * 1024 * 2, fabric).time_s[0])

    assert pp.communication_s == pytest.approx(_whole_prompts(send, pp.batch / 2 / 200)[0], rel=REL)


def test_a_group_of_one_rank_communicates_nothing():
    base = serving()
    lonely = dataclasses.replace(base, tp_fabric=serving(tp=2).tp_fabric, pp_fabric=serving(pp=2).pp_fabric)
    assert _static(system=lonely).communication_s == 0.0


# ---- serving systems ----------------------------------------------------------------------------------------


def test_serving_systems_from_the_catalog():
    from clustersim.serving.engine import serving_system_for_accelerator, serving_system_for_instance

    p5 = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=2)
    assert (p5.tp, p5.pp, p5.dp, p5.num_devices, p5.name) == (2, 1, 4, 8, "p5.48xlarge")
    assert p5.tp_fabric is not None and p5.tp_fabric.num_ranks == 2 and p5.pp_fabric is None
    assert serving_system_for_instance(CATALOG, "p5.48xlarge", tp=2, dp=1).dp == 1
    assert serving_system_for_instance(CATALOG, "p5.48xlarge", tp=3).dp == 2
    entry = CATALOG.instance("p5.48xlarge")
    assert serving_system_for_instance(CATALOG, entry, tp=8).dp == 1
    for tp, pp, dp, message in (
        (4, 4, None, "tp x pp: 4 x 4 must fit the 8 devices of one p5.48xlarge"),
        (0, 1, None, "tp x pp: 0 x 1 must fit"),
        (4, 1, 3, "dp: 3 replicas of tp 4 x pp 1 do not fit the 8 devices"),
        (2, 2, 3, "dp: 3 replicas of tp 2 x pp 2 do not fit the 8 devices"),
    ):
        with pytest.raises(ClusterSimError, match=f"^{message}"):
            serving_system_for_instance(CATALOG, "p5.48xlarge", tp=tp, pp=pp, dp=dp)
    one = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=1)
    assert (one.system.num_devices, one.name, one.pp, one.board_power_watts) == (1, "1 x tp1 pp1 h100-sxm", 1, None)
    two = serving_system_for_accelerator(
        CATALOG, "h100-sxm", tp=2, pp=2, instance="p5.48xlarge", board_power_watts=350.0
    )
    assert (two.system.num_devices, two.pp, two.board_power_watts, two.system.instance.id) == (
        4,
        2,
        350.0,
        "p5.48xlarge",
    )
    assert two.pp_fabric is not None and two.pp_fabric.num_ranks == 2
    assert two.clock_ratio(1.0) == pytest.approx(350.0 / 700.0)
    # NeuronCores as devices (64 on a trn2.48xlarge: 2 cores, a quarter of a chip, each): the chip's power
    # limit against the chip's 500 W TDP.
    cores = serving_system_for_accelerator(CATALOG, "trainium2", tp=1, devices_per_node=64, board_power_watts=1e3)
    assert cores.system.share == 0.25 and cores.clock_ratio(1.0) == pytest.approx(1e3 / 500)


def test_serving_system_rules():
    machine = serving().system
    with pytest.raises(ClusterSimError, match=r"^pp: must be at least 1, got 0$"):
        ServingSystem(name="x", system=machine, pp=0)
    with pytest.raises(ClusterSimError, match=r"^tp 2 needs a fabric for its all-reduces$"):
        ServingSystem(name="x", system=machine, tp=2)
    assert ServingSystem(name="x", system=machine, board_power_watts=0.5).board_power_watts == 0.5
    plain = ServingSystem.on(machine, "x", tp=1)
    assert (plain.pp, plain.dp, plain.tp_fabric, plain.pp_fabric) == (1, 1, None, None)
    assert serving(tp=2, pp=2, dp=2).num_devices == 8


def test_a_model_that_does_not_fit_says_what_would():
    big = Transformer(
        name="big", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000, ffn_type="swiglu"
    )
    params = big.num_params()
    one = serving()  # one 80 GiB device
    with pytest.raises(ClusterSimError) as info:
        estimate_offline(big, one, Request(100, 10), cal=CAL, engine=ENGINE)
    message = str(info.value)
    assert info.value.field == "model"
    assert (
        f"needs {2 * params / GIB:.1f} GiB of weights + 1.0 GiB workspace per device, more than the 80.0 GiB" in message
    )
    layer_matmuls = 80 * (big.attention_params() + big.mlp_params())  # FP8; embeddings, logits and norms BF16
    fp8 = layer_matmuls * 1 + (params - layer_matmuls) * 2
    assert f"over all its 1 devices: fp8 weights ({fp8 / GIB:.1f} GiB per device) would fit" in message
    with pytest.raises(ClusterSimError, match="over all its 1 devices: its weights are fp8 already"):
        estimate_offline(
            big, one, Request(100, 10, Dtype.FP8), cal=dataclasses.replace(CAL, workspace_bytes=20 * GIB), engine=ENGINE
        )
    heavy = dataclasses.replace(CAL, workspace_bytes=20 * GIB)  # FP8 weights + 20 GiB exceed 80 GiB
    with pytest.raises(ClusterSimError, match="over all its 1 devices: fp8 would not fit either"):
        estimate_offline(big, one, Request(100, 10), cal=heavy, engine=ENGINE)
    # Twice as deep over the whole instance already, tp 2 or pp 2: FP8 weights split over 2 would fit.
    bigger = big.model_copy(update={"name": "bigger", "layers": 160})
    matmuls = 160 * (big.attention_params() + big.mlp_params())
    fp8 = matmuls + (bigger.num_params() - matmuls) * 2
    for system in (serving(tp=2), serving(pp=2)):
        with pytest.raises(ClusterSimError, match="over all its 2 devices: fp8 weights") as info:
            estimate_offline(bigger, system, Request(100, 10), cal=CAL, engine=ENGINE)
        assert f"fp8 weights ({fp8 / 2 / GIB:.1f} GiB per device) would fit" in str(info.value)
    two = serving(dp=2)  # room for tp 2 in the instance
    with pytest.raises(ClusterSimError, match=r"use a larger tp or pp \(up to the 2 devices of one instance\)"):
        estimate_offline(big, two, Request(100, 10), cal=CAL, engine=ENGINE)


def test_precision_names():
    from clustersim.serving.engine import bytes_per_element, parse_precision

    assert parse_precision(" FP8 ") is Dtype.FP8 and parse_precision(Dtype.BF16) is Dtype.BF16
    valid = r"\(valid: bf16, fp16, fp8, nvfp4, mxfp4\)$"
    with pytest.raises(ClusterSimError, match=r"^precision: unknown value 'fp6' " + valid):
        parse_precision("fp6")
    with pytest.raises(ClusterSimError, match=r"^precision: 'fp4' is ambiguous: say nvfp4 .* or mxfp4 .*" + valid):
        parse_precision("fp4")
    with pytest.raises(ClusterSimError, match=r"^kv: unknown value"):
        parse_precision("int4", "kv")
    assert (bytes_per_element(Dtype.BF16), bytes_per_element(Dtype.FP16), bytes_per_element(Dtype.FP8)) == (2, 2, 1)
    with pytest.raises(ClusterSimError, match=r"^precision: fp32 is not a serving format " + valid):
        bytes_per_element(Dtype.FP32)


def test_a_users_calibration_file_is_read_from_the_environment(tmp_path, monkeypatch):
    from clustersim.serving.engine import ENV_VAR, calibration_entries, default_calibration

    mine = tmp_path / "serving.toml"
    mine.write_text('[step_overhead_s]\nvalue = 0.002\nsource = "our engine, measured"\n')
    packaged = calibration_entries(use_env=False)["step_overhead_s"]
    monkeypatch.setenv(ENV_VAR, str(mine))
    entry = calibration_entries()["step_overhead_s"]
    assert (entry.value, entry.source, entry.path) == (0.002, "our engine, measured", str(mine))
    assert calibration_entries(use_env=False)["step_overhead_s"] == packaged
    assert default_calibration().step_overhead_s == 0.002
    monkeypatch.delenv(ENV_VAR)
    assert default_calibration() is DEFAULT_CALIBRATION


# ---- offline estimates -------------------------------------------------------------------------------------


def _continuous_step(b: float, n: float, o: float, layers: int, pp: int, prompts: int) -> float:
    """One stage's continuous-batching step on the round device (tp 1), by hand: ``b`` decoding sequences
    per stage over ``n + o / 2`` keys and ``prompts`` whole prompts of ``n`` tokens."""
    tokens, context = b + prompts * n, n + o / 2
    kv_token = 2 * layers * 4 * 128 * 2
    compute = 2 * tokens * layers * DENSE / GEMM + 2 * (b + prompts) * HEAD / pp / GEMM
    weights = (layers * DENSE * 2 + HEAD * 2 / pp) / HBM
    decode = max((b * context + tokens) * kv_token / HBM, 4 * layers * 8 * 128 * context * b / GEMM)
    prefill = prompts * 2 * layers * 8 * 128 * n * n / 0.25e15
    elementwise = tokens * layers * 10 * 1024 * 2 / HBM
    send = 0.0
    if pp > 1:
        fabric = Fabric("hand", 2, 1, 1e11, 50e9, False)
        send = float(predict_collective(Op.SENDRECV, tokens * 1024 * 2, fabric).time_s[0])
    return max(compute, weights) + decode + prefill + elementwise + send + 2e-5 + 1e-6 * (b + prompts)


def test_continuous_batching_with_pipeline_stages():
    # 4 sequences in flight over 2 stages: 2 per stage step; a token every 2 stage steps.
    est = estimate_offline(TINY, serving(pp=2), Request(1000, 200), batch=4, cal=CAL, engine=ENGINE)
    step, wait = _whole_prompts(lambda k: _continuous_step(2, 1000, 200, layers=2, pp=2, prompts=k), 2 / 200)
    assert est.step_s == pytest.approx(step, rel=REL)
    assert est.tpot_s == pytest.approx(2 * step, rel=REL)
    assert est.output_tokens_per_s == pytest.approx(4 / 2 / step, rel=REL)
    first, _ = _whole_prompts(lambda k: _continuous_step(2, 1000, 200, layers=2, pp=2, prompts=k), 2 / 200, own=1)
    assert est.ttft_s == pytest.approx(2 * first + wait, rel=REL)
    assert (est.model, est.batching, est.scenario, est.batch_limited_by) == (
        "tiny",
        "continuous",
        "offline",
        "requested",
    )
    assert est.to_json()["output_tokens_per_s_per_device"] == pytest.approx(est.output_tokens_per_s / 2, rel=REL)


def test_static_batching_with_pipeline_stages():
    # 2 sequences over 2 stages: each stage prefills one 1000-token prompt, then decodes 200 tokens.
    est = _static(batch=2, system=serving(pp=2))
    fabric = Fabric("hand", 2, 1, 1e11, 50e9, False)
    prefill = (
        max(2 * 1000 * 2 * DENSE / GEMM + 2 * 1 * HEAD / 2 / GEMM, (2 * DENSE * 2 + HEAD) / HBM)
        + 1000 * 4096 / HBM
        + 2 * 2 * 8 * 128 * 1000**2 / 0.25e15
        + 1000 * 2 * 10 * 1024 * 2 / HBM
        + float(predict_collective(Op.SENDRECV, 1000 * 1024 * 2, fabric).time_s[0])
        + 2e-5
        + 1e-6
    )
    assert est.ttft_s == pytest.approx(2 * prefill, rel=REL)
    assert est.output_tokens_per_s == pytest.approx(2 / 2 * 200 / (prefill + 200 * est.step_s), rel=REL)
    assert est.batching == "static"


def _rates(system, request, engine, max_batch):
    return {b: estimate_offline(TINY, system, request, batch=b, cal=CAL, engine=engine).output_tokens_per_s
            for b in range(1, max_batch + 1)}  # fmt: skip


@pytest.mark.parametrize("batching", [Batching.CONTINUOUS, Batching.STATIC])
def test_the_offline_batch_is_the_smallest_near_the_best(batching):
    # 5 ms of host cost per step and at most 48 sequences: throughput still grows at 48 for continuous batching.
    engine = ENGINE.model_copy(update={"step_overhead_s": 5e-3, "max_batch_sequences": 48})
    request = Request(1000, 200, batching=batching)
    best = estimate_offline(TINY, serving(), request, cal=CAL, engine=engine)
    rates = _rates(serving(), request, engine, 48)
    assert best.output_tokens_per_s >= 0.99 * max(rates.values())
    assert best.output_tokens_per_s == pytest.approx(rates[best.batch], rel=REL)
    assert best.batch_limited_by == ("scheduler" if best.batch == 48 else "throughput peak")
    budget = (80 * GIB - 2 * PARAMS - 1 * GIB) * 0.9
    assert best.kv_capacity_tokens_per_device == pytest.approx(budget / 8192, rel=REL)


@pytest.mark.parametrize(
    ("batching", "pp"), [(Batching.CONTINUOUS, 1), (Batching.STATIC, 1), (Batching.CONTINUOUS, 2), (Batching.STATIC, 2)]
)
def test_the_offline_batch_stops_where_more_buys_under_half_a_percent(batching, pp):
    """No host cost: throughput grows with the batch but flattens. The search runs over a geometric grid of
    96 whole batches up to the limit (the engine's 4096 here) and takes the smallest within 0.5% of the grid's
    best."""
    import numpy as np

    from clustersim.serving.estimate import throughput_per_replica

    system, request = serving(pp=pp), Request(1000, 200, batching=batching)
    engine = ENGINE.model_copy(update={"kernel_efficiency": 0.5})  # slower kernels than the default engine's
    best = estimate_offline(TINY, system, request, cal=CAL, engine=engine)
    grid = [int(b) for b in np.unique(np.round(np.geomspace(1, 4096, 96)))]
    rates = {b: estimate_offline(TINY, system, request, batch=b, cal=CAL, engine=engine) for b in grid}
    some = [grid[0], grid[50]]
    per_replica = throughput_per_replica(TINY, system, request, np.array(some, dtype=float), CAL, engine)
    assert per_replica == pytest.approx([rates[b].output_tokens_per_s for b in some], rel=REL)
    top = max(r.output_tokens_per_s for r in rates.values())
    assert best.batch == min(b for b in grid if rates[b].output_tokens_per_s >= 0.995 * top) < 4096
    assert best.batch_limited_by == "throughput peak"
    assert best.output_tokens_per_s == pytest.approx(rates[best.batch].output_tokens_per_s, rel=REL)
    assert best.request_rate_per_s == pytest.approx(best.output_tokens_per_s / 200, rel=REL)


def test_replicas_multiply_offline_throughput():
    one = estimate_offline(TINY, serving(), Request(1000, 200), batch=8, cal=CAL, engine=ENGINE)
    two = estimate_offline(TINY, serving(dp=2), Request(1000, 200), batch=8, cal=CAL, engine=ENGINE)
    assert two.output_tokens_per_s == pytest.approx(2 * one.output_tokens_per_s, rel=REL)
    assert two.request_rate_per_s == pytest.approx(2 * one.request_rate_per_s, rel=REL)
    assert two.output_tokens_per_s_per_device == pytest.approx(one.output_tokens_per_s_per_device, rel=REL)


def test_batch_limits_at_their_edges():
    system = serving()
    # Pages of a million tokens: 9 sequences' worth of KV room (about 9.3 million tokens).
    paged = ENGINE.model_copy(update={"kv_block_tokens": 1_000_000})
    assert batch_limit(TINY, system, Request(100, 10), CAL, paged)[:2] == (9, "capacity")
    # ... and a scheduler cap of exactly 9: capacity is named (it binds as much).
    nine = paged.model_copy(update={"max_batch_sequences": 9})
    assert batch_limit(TINY, system, Request(100, 10), CAL, nine)[:2] == (9, "capacity")
    # A step too small for one sequence's 11 tokens still runs one sequence.
    tiny_steps = ENGINE.model_copy(update={"max_tokens_per_step": 10})
    assert batch_limit(TINY, system, Request(100, 10), CAL, tiny_steps)[:2] == (1, "scheduler")
    # Exactly one sequence fits.
    one = Request(6_000_000, 1000)
    assert batch_limit(TINY, system, one, CAL, ENGINE)[:2] == (1, "capacity")
    budget = (80 * GIB - 2 * PARAMS - 1 * GIB) * 0.9
    with pytest.raises(ClusterSimError) as info:
        batch_limit(TINY, system, Request(10_000_000, 1000), CAL, ENGINE)
    message = str(info.value)
    assert message.startswith("input/output: one sequence of 1e+07 + 1000 tokens needs ")
    assert (
        f"needs {10_001_008 * 8192 / 2**30:.2f} GiB of KV cache per device, but only {budget / 2**30:.2f} GiB"
        in message
    )


def test_requests_need_a_token_each_way():
    assert Request(1, 1).input_tokens == 1
    with pytest.raises(ClusterSimError, match=r"^input: must be at least 1 token, got 0\.5$"):
        Request(0.5, 10)
    with pytest.raises(ClusterSimError, match=r"^output: must be at least 1 token, got 0$"):
        Request(10, 0)


def test_comparing_two_devices_at_the_same_batch():
    from clustersim.serving.estimate import compare_offline

    faster = GPU.model_copy(
        update={"memory_bandwidth_bytes_per_s": GPU.memory_bandwidth_bytes_per_s.model_copy(update={"value": 4e12})}
    )
    topology = Topology(
        name="fast", num_devices=1, devices_per_node=1, scaleup_bytes_per_s=1e11, network_bytes_per_s=0.0,
        in_network_reduction=False,
    )  # fmt: skip
    second = ServingSystem.on(System(name="fast", accelerator=faster, cores_per_device=1, topology=topology), "f", tp=1)
    host = ENGINE.model_copy(update={"step_overhead_s": 5e-3})
    request = Request(1000, 200, batching=Batching.STATIC)
    cmp = compare_offline(TINY, serving(), second, request, batch=1, cal=CAL, engine=host)
    a = estimate_offline(TINY, serving(), request, batch=1, cal=CAL, engine=host)
    b = estimate_offline(TINY, second, request, batch=1, cal=CAL, engine=host)
    assert (cmp.first.output_tokens_per_s, cmp.second.output_tokens_per_s) == (
        a.output_tokens_per_s,
        b.output_tokens_per_s,
    )
    assert cmp.ratio == pytest.approx(b.output_tokens_per_s / a.output_tokens_per_s, rel=REL)
    assert (cmp.same_batch_ratio, cmp.batch_ratio) == (pytest.approx(cmp.ratio, rel=REL), pytest.approx(1.0, rel=REL))
    assert cmp.reasons[0].startswith(f"at the same batch (1): {cmp.ratio:.2f}x, from 4.00 vs 2.00 TB/s HBM (2.00x)")
    assert "and 1.00x dense bf16 peak" in cmp.reasons[0]
    assert cmp.reasons[2] == "replicas: 1 x tp1 pp1 vs 1 x tp1 pp1"
    data = cmp.to_json()
    assert set(data) == {"first", "second", "ratio", "same_batch_ratio", "batch_ratio", "reasons"}
    assert data["second"]["output_tokens_per_s"] == b.output_tokens_per_s and data["reasons"] == list(cmp.reasons)
    # Each at its best batch: the larger batch on the second device is the rest of the gain.
    best = compare_offline(TINY, serving(), second, request, cal=CAL, engine=host)
    assert best.first.batch == estimate_offline(TINY, serving(), request, cal=CAL, engine=host).batch
    assert best.ratio == pytest.approx(best.same_batch_ratio * best.batch_ratio, rel=REL)


def test_a_layer_overhead_is_paid_per_layer_of_each_stage_per_step():
    """calibration.toml's layer_overhead_s: each step pays it once per layer its stage runs, whatever the batch;
    an engine profile's own value (the Neuron profiles' 0) replaces the calibration's."""
    per_layer = 5e-5
    cal = dataclasses.replace(CAL, layer_overhead_s=per_layer)
    for pp in (1, 2):
        for batch in (1, 64):
            base = estimate_offline(TINY, serving(pp=pp), Request(1000, 200), batch=batch, cal=CAL, engine=ENGINE)
            paid = estimate_offline(TINY, serving(pp=pp), Request(1000, 200), batch=batch, cal=cal, engine=ENGINE)
            assert paid.overhead_s - base.overhead_s == pytest.approx(TINY.layers / pp * per_layer, rel=REL)
            assert paid.step_s - base.step_s == pytest.approx(TINY.layers / pp * per_layer, rel=REL)
    own = ENGINE.model_copy(update={"layer_overhead_s": 0.0})
    assert estimate_offline(TINY, serving(), Request(1000, 200), batch=1, cal=cal, engine=own) == estimate_offline(
        TINY, serving(), Request(1000, 200), batch=1, cal=CAL, engine=own
    )
    assert all(engine_profile(name).layer_overhead_s == 0.0 for name in ("transformers-neuronx", "vllm-neuron"))


def test_the_server_curve_is_made_once_per_replica():
    """Four replicas at four times the rate are one replica at the rate, from the same curve; another request
    makes its own."""
    from clustersim.serving import latency

    latency._CURVES.clear()
    request, system = Request(1000, 200), serving()
    one = estimate_server(TINY, system, request, 10.0, cal=CAL, engine=ENGINE)
    four = estimate_server(TINY, dataclasses.replace(system, dp=4), request, 40.0, cal=CAL, engine=ENGINE)
    assert len(latency._CURVES) == 1
    assert (four.ttft_s, four.tpot_s, four.batch) == (one.ttft_s, one.tpot_s, one.batch)
    shorter = estimate_server(TINY, system, Request(1000, 100), 10.0, cal=CAL, engine=ENGINE)
    assert len(latency._CURVES) == 2 and shorter.tpot_s != one.tpot_s
