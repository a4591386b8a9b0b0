"""The closed loop and its queues where mutation testing of ``serving.concurrency``, ``serving.queueing`` and
``serving.first_token`` found them unpinned: every step of a closed loop priced on the same calibration and engine,
the request's spread of lengths carried into its steps, the M/D/1 queue's edges and the refusals."""

from __future__ import annotations

import dataclasses

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.engine import InferenceCalibration, default_calibration, serving_system_for_accelerator
from clustersim.serving.estimate import Batching, Request
from clustersim.serving.first_token import check_lag
from clustersim.serving.queueing import prompt_queue_wait_s
from tests.serving.test_concurrency import LLAMA31_8B, h100


def _twice_as_slow(cal: InferenceCalibration) -> InferenceCalibration:
    """Every achieved fraction halved and every fixed cost doubled: every step takes twice as long."""

    def half(pairs: tuple[tuple[str, float], ...]) -> tuple[tuple[str, float], ...]:
        return tuple((key, value / 2) for key, value in pairs)

    return dataclasses.replace(
        cal,
        flop_efficiency=cal.flop_efficiency / 2,
        family_flop_efficiency=half(cal.family_flop_efficiency),
        hbm_efficiency=cal.hbm_efficiency / 2,
        decode_attention_hbm_efficiency=half(cal.decode_attention_hbm_efficiency),
        attention_flop_efficiency=cal.attention_flop_efficiency / 2,
        family_attention_flop_efficiency=half(cal.family_attention_flop_efficiency),
        latent_decode_flop_efficiency=cal.latent_decode_flop_efficiency / 2,
        moe_token_layer_s=2 * cal.moe_token_layer_s,
        step_overhead_s=2 * cal.step_overhead_s,
        layer_overhead_s=2 * cal.layer_overhead_s,
        sync_overhead_s=2 * cal.sync_overhead_s,
        sequence_overhead_s=2 * cal.sequence_overhead_s,
    )


@pytest.mark.parametrize("engine", ["tensorrt-llm", "vllm"])
@pytest.mark.parametrize(("n", "o", "clients"), [(1000, 200, 16), (4000, 100, 8), (200, 1000, 64), (500, 500, 1)])
def test_a_calibration_twice_as_slow_doubles_every_latency_of_a_closed_loop(engine, n, o, clients) -> None:
    """The batch a closed loop holds does not depend on speed, so every step it prices (its steady mix, the step
    that admits a new prompt, the steps between a request's tokens) takes twice as long on a calibration twice as
    slow, wherever it is used: the engines without host costs of their own (TensorRT-LLM, vLLM)."""
    request = Request(n, o, Dtype.FP8)
    fast = estimate_concurrency(LLAMA31_8B, h100(), request, clients, engine=engine)
    slow = estimate_concurrency(LLAMA31_8B, h100(), request, clients, _twice_as_slow(default_calibration()), engine)
    assert slow.batch == fast.batch
    assert slow.ttft_s == pytest.approx(2 * fast.ttft_s, rel=1e-9)
    assert slow.tpot_s == pytest.approx(2 * fast.tpot_s, rel=1e-9)
    assert slow.output_tokens_per_s == pytest.approx(fast.output_tokens_per_s / 2, rel=1e-9)


def test_every_step_of_a_closed_loop_runs_on_the_named_engine() -> None:
    """SGLang runs a step that carries a prompt eagerly and never beside decodes: its prompt steps, and so the first
    token and the steps between tokens, take longer than TensorRT-LLM's."""
    request = Request(1000, 200, Dtype.FP8)
    trt = estimate_concurrency(LLAMA31_8B, h100(), request, 16, engine="tensorrt-llm")
    sglang = estimate_concurrency(LLAMA31_8B, h100(), request, 16, engine="sglang")
    assert sglang.ttft_s > 2 * trt.ttft_s and sglang.tpot_s > 1.2 * trt.tpot_s
    assert sglang.output_tokens_per_s < 0.8 * trt.output_tokens_per_s


def test_the_named_engines_caps_bound_the_batch() -> None:
    """vLLM keeps 256 sequences on an A100 (its smaller GPUs' defaults); TensorRT-LLM holds all 600 clients."""
    a100 = serving_system_for_accelerator(load_catalog(use_env=False), "a100-sxm4-80gb", tp=1, dp=1, devices_per_node=8)
    request = Request(200, 200, Dtype.BF16)
    vllm = estimate_concurrency(LLAMA31_8B, a100, request, 600, engine="vllm")
    trt = estimate_concurrency(LLAMA31_8B, a100, request, 600, engine="tensorrt-llm")
    assert (vllm.batch, vllm.max_batch, vllm.batch_limited_by) == (256, 256, "scheduler")
    assert (trt.batch, trt.batch_limited_by) == (600, "concurrency") and trt.max_batch >= 600


def test_a_request_sets_spread_of_lengths_reaches_its_steps() -> None:
    """Outputs that run longer than the mean while in flight decode over longer contexts (a longer TPOT); prompts
    of a spread of lengths cost more attention than prompts at the mean (a longer TTFT)."""
    request = Request(2000, 400, Dtype.FP8)
    base = estimate_concurrency(LLAMA31_8B, h100(), request, 32)
    longer = estimate_concurrency(LLAMA31_8B, h100(), dataclasses.replace(request, output_tokens_in_flight=1200.0), 32)
    spread = dataclasses.replace(request, input_tokens_quantiles=(500.0, 1000.0, 2500.0, 4000.0))
    varied = estimate_concurrency(LLAMA31_8B, h100(), spread, 32)
    assert longer.tpot_s > 1.02 * base.tpot_s
    assert varied.ttft_s > 1.01 * base.ttft_s


def test_a_second_client_waits_for_the_first_ones_step() -> None:
    """A lone client's prompt runs at once on an idle engine; a second client's arrives while the first decodes
    and waits for that step and shares its own."""
    request = Request(1000, 200, Dtype.FP8)
    one = estimate_concurrency(LLAMA31_8B, h100(), request, 1)
    two = estimate_concurrency(LLAMA31_8B, h100(), request, 2)
    assert two.ttft_s > one.ttft_s + 0.5 * one.tpot_s


def test_a_closed_loop_is_refused_without_continuous_batching() -> None:
    request = Request(1000, 200, Dtype.FP8, batching=Batching.STATIC)
    with pytest.raises(ClusterSimError) as caught:
        estimate_concurrency(LLAMA31_8B, h100(), request, 4)
    assert str(caught.value) == "batching: the concurrency scenario is modelled with continuous batching only"


def test_the_prompt_queues_edges() -> None:
    assert prompt_queue_wait_s(-1.0, 0.5, 3.0) == 0.0  # no arrivals: no wait
    assert prompt_queue_wait_s(0.5, 0.0, 3.0) == 0.0
    assert prompt_queue_wait_s(0.5, 1.0, 3.0) == pytest.approx(0.5)  # load 0.5: 0.5 x 1 / (2 x 0.5)
    assert prompt_queue_wait_s(1.0, 1.0, 5.0) == 5.0  # saturated at exactly one: every client's prompt ahead
    assert prompt_queue_wait_s(2.0, 1.0, 0.0) == 0.0  # nobody ahead, however busy


@pytest.mark.parametrize("lag", [-1, 1.5, True, "2"])
def test_a_first_token_lag_that_is_not_a_whole_number_of_steps_is_refused_naming_the_field(lag: object) -> None:
    with pytest.raises(ClusterSimError, match=r"^first_token_lag_steps: must be a whole number") as caught:
        check_lag(lag)
    assert caught.value.field == "first_token_lag_steps" and caught.value.value == lag
    assert check_lag(2) == 2


def test_the_calibrations_workspace_bounds_the_batch_a_closed_loop_holds() -> None:
    """40 GiB more workspace a device leaves less room for the KV cache: fewer of 2,000 clients run at once."""
    cal = default_calibration()
    roomy = dataclasses.replace(cal, workspace_bytes=cal.workspace_bytes + 40 * 2**30)
    request = Request(2000, 2000, Dtype.FP8)
    held = estimate_concurrency(LLAMA31_8B, h100(), request, 2000)
    squeezed = estimate_concurrency(LLAMA31_8B, h100(), request, 2000, roomy)
    assert squeezed.batch_limited_by == held.batch_limited_by == "capacity"  # the KV cache's
    assert squeezed.max_batch < 0.7 * held.max_batch
