"""The concurrency scenario: a closed loop keeping a number of requests in flight."""

import copy
import json

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.concurrency import closed_loop_step, estimate_concurrency
from clustersim.serving.engine import serving_system_for_accelerator
from clustersim.serving.estimate import Batching, Request, estimate_offline
from clustersim.validation.cases import bundled_dir
from clustersim.validation.inference import predict_inference_case
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
LLAMA31_8B = Transformer(
    name="llama3.1-8b", layers=32, hidden=4096, ffn_hidden=14336, heads=32, kv_heads=8, vocab=128256, ffn_type="swiglu"
)
LLAMA2_70B = Transformer(
    name="llama2-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000, ffn_type="swiglu"
)


def h100(tp: int = 1, dp: int = 1):
    return serving_system_for_accelerator(CATALOG, "h100-sxm", tp=tp, dp=dp, devices_per_node=8)


@pytest.mark.parametrize(("n", "o", "batch"), [(128, 2048, 64), (1000, 1000, 200), (2048, 128, 100), (500, 2000, 8)])
def test_a_closed_loop_agrees_with_offline_continuous_batching_at_the_same_batch(n, o, batch):
    # In the steady state both run the same mix; the closed loop counts a request's prompt step as its first
    # token's (B (o - 1) / o decoders), offline counts B decoders: they differ by about 1 / o.
    request = Request(n, o, Dtype.FP8)
    offline = estimate_offline(LLAMA31_8B, h100(), request, batch=batch)
    loop = estimate_concurrency(LLAMA31_8B, h100(), request, batch)
    assert loop.scenario == "concurrency" and loop.batch == batch and loop.batch_limited_by == "concurrency"
    assert loop.output_tokens_per_s == pytest.approx(offline.output_tokens_per_s, rel=max(2.0 / o, 0.005))
    assert loop.output_tokens_per_s >= offline.output_tokens_per_s  # one decoder fewer per o, same tokens
    assert loop.request_rate_per_s == pytest.approx(loop.output_tokens_per_s / o, rel=1e-12)
    assert loop.tpot_s == pytest.approx(loop.step_s, rel=1e-12)
    assert loop.ttft_s == pytest.approx(offline.ttft_s, rel=0.05)  # no queue: half a step and the prompt's step


def test_output_rate_is_batch_over_step_and_a_request_holds_its_slot_for_output_steps():
    request = Request(1000, 100, Dtype.FP8)
    loop = estimate_concurrency(LLAMA31_8B, h100(), request, 50)
    step = closed_loop_step(LLAMA31_8B, h100(), request, 50.0)
    assert loop.step_s == pytest.approx(float(step.step_s[0]), rel=1e-12)
    assert loop.output_tokens_per_s == pytest.approx(50 / loop.step_s, rel=1e-12)
    # 1 / 1 output token: a closed loop of prompts only; every step is one prompt per request
    single = closed_loop_step(LLAMA31_8B, h100(), Request(1000, 1, Dtype.FP8), 8.0)
    assert single.prefill_attention_s[0] > 0.0 and single.decode_attention_s[0] == pytest.approx(
        8 * 1000 * 65536 / (3.35e12 * 0.9), rel=0.05
    )  # only the new prompts' K and V written


def test_requests_beyond_the_engines_limit_wait_but_add_no_throughput():
    request = Request(2048, 2048, Dtype.FP8)
    full = estimate_offline(LLAMA2_70B, h100(tp=2), request, batch=None)
    limit = full.max_batch
    at_limit = estimate_concurrency(LLAMA2_70B, h100(tp=2), request, limit)
    beyond = estimate_concurrency(LLAMA2_70B, h100(tp=2), request, 3 * limit)
    assert beyond.batch == limit and beyond.batch_limited_by == "capacity"
    assert beyond.output_tokens_per_s == pytest.approx(at_limit.output_tokens_per_s, rel=1e-12)
    # Little's law: 2 x limit requests queue at the request rate
    wait = 2 * limit / beyond.request_rate_per_s
    assert beyond.ttft_s == pytest.approx(at_limit.ttft_s + wait, rel=1e-9)


def test_replicas_share_the_requests_in_flight():
    request = Request(500, 500, Dtype.FP8)
    one = estimate_concurrency(LLAMA31_8B, h100(), request, 64)
    four = estimate_concurrency(LLAMA31_8B, h100(dp=4), request, 256)
    assert four.batch == 64
    assert four.output_tokens_per_s == pytest.approx(4 * one.output_tokens_per_s, rel=1e-12)


def test_errors():
    request = Request(500, 500, Dtype.FP8)
    with pytest.raises(ClusterSimError, match="concurrency: must be at least 1"):
        estimate_concurrency(LLAMA31_8B, h100(), request, 0)
    with pytest.raises(ClusterSimError, match="continuous batching only"):
        estimate_concurrency(LLAMA31_8B, h100(), Request(500, 500, batching=Batching.STATIC), 8)


def test_a_concurrency_case_is_predicted_by_the_closed_loop():
    lines = (bundled_dir() / "inference.jsonl").read_text().splitlines()
    case = next(c for c in map(json.loads, lines) if c["id"].startswith("trtllm_perf_llama3.1-8b"))
    loop = copy.deepcopy(case)
    loop["workload"].update(scenario="concurrency", batch=64)
    offline = copy.deepcopy(case)
    offline["workload"].update(batch=64)
    predicted = predict_inference_case(loop, "output_tokens_per_s", CATALOG)
    assert predicted == pytest.approx(predict_inference_case(offline, "output_tokens_per_s", CATALOG), rel=0.02)
    del loop["workload"]["batch"]
    with pytest.raises(ClusterSimError, match=r"workload\.batch .*missing for a concurrency case"):
        predict_inference_case(loop, "output_tokens_per_s", CATALOG)
