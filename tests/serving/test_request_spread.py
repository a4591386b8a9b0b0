"""A request set's spread of lengths in the closed forms: the lengths at quantiles a ``Request`` carries, the mean
attention of its prompts, and the refusals of lengths that cannot be a set's."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.estimate import Request
from clustersim.serving.memory import causal_pairs
from clustersim.serving.sim_requests import (
    QUANTILE_POINTS,
    LengthSource,
    length_quantiles,
    request_sampler,
    request_spread,
)
from clustersim.workload.zoo import load_model


@functools.cache
def llama_8b():
    return load_model("llama3.1-8b", use_env=False)


def test_a_set_carries_its_lengths_at_quantiles_with_its_mean():
    spread = request_spread(request_sampler("mooncake_conversation", 12035.06, 342.62))
    prompts, outputs = spread["input_tokens_quantiles"], spread["output_tokens_quantiles"]
    assert prompts is not None and outputs is not None
    assert len(prompts) == len(outputs) == QUANTILE_POINTS
    assert list(prompts) == sorted(prompts) and np.mean(prompts) == pytest.approx(12035.06, rel=1e-9)
    assert prompts[0] < 2000 and prompts[-1] > 85400  # its p99 is 85,400 tokens
    request = Request(12035.06, 342.62, beyond_context=True, **spread)
    assert request.input_tokens_quantiles == prompts


def test_lengths_stated_for_every_request_carry_no_spread():
    spread = request_spread(request_sampler(None, 1000.0, 200.0))
    assert spread == {"output_tokens_in_flight": None, "input_tokens_quantiles": None, "output_tokens_quantiles": None}
    assert Request(1000.0, 200.0, **spread).prompt_pairs(llama_8b()) is None


@settings(max_examples=40, deadline=None)
@given(low=st.integers(1, 5000), width=st.integers(0, 20000))
def test_a_generators_range_keeps_its_mean_at_the_quantiles(low, width):
    source = LengthSource("uniform", low + width / 2.0, low_tokens=float(low), high_tokens=float(low + width))
    points = length_quantiles(source)
    assert points is not None and points == tuple(sorted(points))
    assert np.mean(points) == pytest.approx(low + width / 2.0, rel=1e-9)


def test_a_prompts_attention_is_the_mean_over_its_lengths_and_a_spread_costs_more():
    model = llama_8b()
    lengths = (500.0, 1500.0, 7000.0)  # mean 3,000
    request = Request(3000.0, 100.0, input_tokens_quantiles=lengths)
    pairs = request.prompt_pairs(model)
    assert pairs == pytest.approx(np.mean([causal_pairs(model, n) for n in lengths]))
    assert pairs > causal_pairs(model, 3000.0)  # n^2 is convex
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)

    def attention(prompt: float, given: float | None = None) -> float:
        step = step_times(model, system, request.precision, request.kv, decode_sequences=0.0, decode_context_tokens=0.0,
                          prefill_tokens=prompt, prefill_sequences=1.0, prompt_tokens=prompt, engine="vllm",
                          prompt_pairs=given)  # fmt: skip
        return float(step.prefill_attention_s)

    each = np.mean([attention(n) for n in lengths])
    assert attention(3000.0, pairs) == pytest.approx(each, rel=1e-9)
    assert attention(3000.0, pairs) > attention(3000.0)


@pytest.mark.parametrize(
    ("points", "wanted"),
    [
        ((100.0, 50.0, 150.0), "input_tokens_quantiles: lengths at rising quantiles, each positive, got 3"),
        ((0.0, 100.0, 200.0), "input_tokens_quantiles: lengths at rising quantiles, each positive, got 3"),
        ((), "input_tokens_quantiles: lengths at rising quantiles, each positive, got 0"),
        ((50.0, 100.0, 200.0), "input_tokens_quantiles: their mean 116.667 is not the mean 100"),
    ],
)
def test_lengths_that_cannot_be_the_sets_are_refused_naming_the_field(points, wanted):
    with pytest.raises(ClusterSimError, match=wanted):
        Request(100.0, 10.0, input_tokens_quantiles=points)


def test_outputs_whose_mean_is_not_the_requests_are_refused():
    with pytest.raises(ClusterSimError, match="output_tokens_quantiles: their mean 20 is not the mean 10"):
        Request(100.0, 10.0, output_tokens_quantiles=(10.0, 30.0))


def test_the_prompts_that_run_whole_spread_the_steps_an_arrival_waits_out():
    """``Request.prompt_cv2``: the relative variance of the prompts a step takes whole; the chunked ones queue
    instead (``latency``), and a mean over the step's budget chunks them all."""
    lengths = (500.0, 1500.0, 7000.0)  # mean 3,000
    request = Request(3000.0, 100.0, input_tokens_quantiles=lengths)
    every = sum((n - 3000.0) ** 2 for n in lengths) / 3 / 3000.0**2
    assert request.prompt_cv2(8192) == pytest.approx(every)
    assert request.prompt_cv2(4096) == pytest.approx(every - (7000.0 - 3000.0) ** 2 / 3 / 3000.0**2)
    assert request.prompt_cv2(2048) == 0.0 and Request(3000.0, 100.0).prompt_cv2(8192) == 0.0
