"""Planning a serving deployment: the tensor-parallel degrees tried, the best one per scenario, errors."""

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.plan.serving import ServingScenario, best_serving_layout, estimate_scenario, tp_candidates
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.serving.latency import estimate_server
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
LLAMA2_70B = Transformer(
    name="llama2-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000, ffn_type="swiglu"
)
TWELVE_HEADS = Transformer(
    name="twelve", layers=12, hidden=768, ffn_hidden=3072, heads=12, kv_heads=12, vocab=50257, ffn_type="gelu"
)
LLAMA31_405B = Transformer(
    name="llama3.1-405b",
    layers=126,
    hidden=16384,
    ffn_hidden=53248,
    heads=128,
    kv_heads=8,
    vocab=128256,
    ffn_type="swiglu",
)


def test_tp_candidates_are_the_powers_of_two_the_heads_and_the_instance_allow():
    assert tp_candidates(LLAMA2_70B, CATALOG, "p5.48xlarge") == [1, 2, 4, 8]
    assert tp_candidates(LLAMA2_70B, CATALOG, "p5.48xlarge", pp=2) == [1, 2, 4]
    assert tp_candidates(TWELVE_HEADS, CATALOG, "p5.48xlarge") == [1, 2, 4]  # 8 does not divide 12 heads


def test_best_offline_layout_is_the_most_tokens_per_second_of_the_degrees():
    request = Request(2048, 256, Dtype.FP8)
    best = best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request)
    each = [
        estimate_offline(LLAMA2_70B, serving_system_for_instance(CATALOG, "p5.48xlarge", tp=tp), request)
        for tp in (1, 2, 4, 8)
    ]
    assert best.output_tokens_per_s == max(e.output_tokens_per_s for e in each)
    assert best.dp * best.tp == 8


def test_at_a_rate_the_best_layout_has_the_lowest_tpot():
    request = Request(512, 256, Dtype.FP8)
    scenario = ServingScenario(rate_per_s=2.0)
    best = best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request, scenario=scenario)
    assert best.scenario == "server"
    for tp in (2, 4, 8):
        system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=tp)
        assert best.tpot_s <= estimate_server(LLAMA2_70B, system, request, 2.0).tpot_s


def test_a_given_degree_is_used_as_is():
    request = Request(1024, 128)
    estimate = best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request, tp=4, scenario=ServingScenario(batch=8))
    assert (estimate.tp, estimate.dp, estimate.batch, estimate.batch_limited_by) == (4, 2, 8, "requested")


def test_the_engine_is_an_input_of_every_scenario():
    request = Request(1024, 1024, Dtype.FP8)
    trt = best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request, tp=2)
    vllm = best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request, tp=2, engine="vllm")
    assert (trt.engine, vllm.engine) == ("tensorrt-llm", "vllm")
    assert vllm.max_batch <= 1024 and vllm.kv_capacity_tokens_per_device < trt.kv_capacity_tokens_per_device
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8)
    for scenario in (ServingScenario(rate_per_s=1.0), ServingScenario(tpot_target_s=0.05), ServingScenario()):
        assert estimate_scenario(LLAMA2_70B, system, request, scenario, engine="sglang").engine == "sglang"
    with pytest.raises(ClusterSimError, match="unknown engine 'trt'"):
        best_serving_layout(LLAMA2_70B, CATALOG, "p5.48xlarge", request, engine="trt")


def test_targets_ask_for_the_highest_rate_that_meets_them():
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8)
    estimate = estimate_scenario(LLAMA2_70B, system, Request(512, 256, Dtype.FP8), ServingScenario(tpot_target_s=0.05))
    assert estimate.scenario == "server" and estimate.tpot_s <= 0.05 * (1 + 1e-3)


def test_errors():
    with pytest.raises(ClusterSimError, match="either a rate or latency targets"):
        ServingScenario(rate_per_s=1.0, ttft_target_s=2.0)
    # No degree holds 405B in bf16 on eight 80 GiB devices: the largest degree's reason is given.
    with pytest.raises(ClusterSimError, match=r"GiB of weights .* tp 8"):
        best_serving_layout(LLAMA31_405B, CATALOG, "p5.48xlarge", Request(128, 128))
