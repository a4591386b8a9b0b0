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
from clustersim.serving.queueing import prompt_queue_wait_s
from clustersim.validation.cases import bundled_dir, project_dir, read_cases
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
    # half a step and the prompt's step, and the prompts of other clients ahead: little where prompts are a
    # small share of the work; 2,048-token prompts for 128 tokens out take three quarters of it, and queue
    if n / o < 2:
        assert loop.ttft_s == pytest.approx(offline.ttft_s, rel=0.05)
    else:
        assert 1.2 * offline.ttft_s < loop.ttft_s < 2.0 * offline.ttft_s


def test_prompts_queue_as_m_d_1_behind_the_other_clients_prompts():
    """prompt_queue_wait_s: Pollaczek-Khinchine's M/D/1 wait, capped by the prompts a closed loop can hold."""
    assert prompt_queue_wait_s(0.0, 0.4, 24) == 0.0 and prompt_queue_wait_s(2.0, 0.0, 24) == 0.0
    assert prompt_queue_wait_s(1.25, 0.4, 24) == pytest.approx(0.5 * 0.4 / (2 * 0.5))  # load 0.5: a fifth of a second
    assert prompt_queue_wait_s(3.0, 0.4, 24) == pytest.approx(24 * 0.4)  # past saturation: every other prompt ahead
    assert prompt_queue_wait_s(2.4, 0.4, 1) == pytest.approx(0.4)  # load 0.96, but one client's prompt at most
    waits = [prompt_queue_wait_s(rate, 0.4, 99) for rate in (0.5, 1.0, 1.5, 2.0, 2.4)]
    assert waits == sorted(waits)  # more load, longer


def test_long_prompts_under_load_meet_nims_ttft():
    """NVIDIA NIM's Llama 3.3 70B FP8 TP2 on two H100s, 5,000-token prompts: TTFT 0.69 and 0.83 s at 25 and 50
    clients (0.41 s alone). Without the prompt queue the closed form gave 0.44 and 0.48 s (-36% and -43%)."""
    cases = {c.id: c for c in read_cases(project_dir() / "inference.jsonl") if c.id.startswith("nim180_")}
    for clients in (25, 50):
        case = cases[f"nim180_llama3.3-70b_h100x2_tp2_fp8_in5000_out500_c{clients}"]
        predicted = predict_inference_case(case, "ttft_s", CATALOG)
        assert predicted == pytest.approx(case.measured["ttft_s"], rel=0.15)


def test_output_rate_is_batch_over_step_and_a_request_holds_its_slot_for_output_steps():
    request = Request(1000, 100, Dtype.FP8)
    loop = estimate_concurrency(LLAMA31_8B, h100(), request, 50)
    step = float(closed_loop_step(LLAMA31_8B, h100(), request, 50.0).mean.step_s[0])  # every client's prompts
    assert loop.output_tokens_per_s == pytest.approx(50 / step, rel=1e-12)
    # a request's token gaps carry the other 49 clients' prompts, not its own: a little shorter than the mean step
    seen = float(closed_loop_step(LLAMA31_8B, h100(), request, 50.0, prompting=49.0).mean.step_s[0])
    assert loop.tpot_s == pytest.approx(seen, rel=1e-12) and seen < step
    # 1 / 1 output token: a closed loop of prompts only; every step is one prompt per request
    single = closed_loop_step(LLAMA31_8B, h100(), Request(1000, 1, Dtype.FP8), 8.0).mean
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
