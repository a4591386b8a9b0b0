"""The server closed form's pieces over a request set's spread, each against its formula: the gaps between tokens,
which prompts queue, the representatives of a spread, a prompt's own cost in a step, and the prompt work that runs
between a request's first tokens."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.estimate import Request
from clustersim.serving.latency import SPREAD_POINTS, _gaps, _own_prompt_s, _queued, _representatives, _ServerCurve
from clustersim.workload.zoo import load_model

BUDGET = 8192


def curve_with(gaps: tuple[float, ...]) -> _ServerCurve:
    """A curve that only its outputs' gaps distinguish (the rest is never read by ``after_first_token_s``)."""
    one = np.ones(1)
    return _ServerCurve(one, one, one, 1, one, one, one, gaps=np.asarray(gaps, dtype=np.float64))


def test_the_gaps_are_those_of_outputs_of_more_than_one_token():
    assert _gaps(Request(100.0, 28.0)).tolist() == [27.0]
    assert _gaps(Request(100.0, 3.0, output_tokens_quantiles=(1.0, 2.0, 3.0, 6.0))).tolist() == [1.0, 2.0, 5.0]
    alone = _gaps(Request(100.0, 1.0))  # no gap at all: one stands in, priced as a gap of one
    assert alone.shape == (1,) and alone.tolist() == [1.0]


def test_prompts_queue_where_the_mean_is_over_the_budget_or_they_are():
    assert _queued(Request(10000.0, 100.0), BUDGET).tolist() == [1.0]
    assert _queued(Request(BUDGET, 100.0), BUDGET).tolist() == [0.0]  # one budget fits a step
    assert _queued(Request(1000.0, 100.0), BUDGET).tolist() == [0.0]
    spread = Request(10000.0, 100.0, input_tokens_quantiles=(1000.0, 9000.0, 20000.0))
    assert _queued(spread, BUDGET).tolist() == [1.0, 1.0, 1.0]  # the mean runs in chunks: every prompt queues
    fits = Request(6073.0, 100.0, input_tokens_quantiles=(100.0, 4000.0, 8192.0, 12000.0))
    assert _queued(fits, BUDGET).tolist() == [0.0, 0.0, 0.0, 1.0]  # only the one over the budget


def test_a_spread_is_represented_by_the_middle_of_equal_groups():
    small = np.arange(SPREAD_POINTS, dtype=np.float64)
    assert _representatives(small) is small
    wide = np.arange(2 * SPREAD_POINTS, dtype=np.float64)
    assert _representatives(wide).tolist() == list(range(1, 2 * SPREAD_POINTS, 2))


@pytest.mark.parametrize("gap", [1.0, 3.0, 40.0])
def test_the_work_after_a_first_token_follows_its_chain(gap):
    """``busy (w + F) (1 - busy^g) / (1 - busy)`` over ``g`` gaps: the work that came meanwhile, and the work that came
    while that ran, each a share ``busy`` of the last."""
    busy, first = 0.3, np.array([0.05])
    got = curve_with((gap,)).after_first_token_s(busy, 0.0, first, np.zeros(1), step_cap_s=1.0)
    chain = sum(busy**k for k in range(int(gap)))
    assert got == pytest.approx(busy * 0.05 * chain / gap)


def test_no_more_than_a_steps_budget_of_prompt_work_falls_in_a_gap():
    got = curve_with((2.0,)).after_first_token_s(0.5, 0.0, np.array([10.0]), np.zeros(1), step_cap_s=0.2)
    assert got == pytest.approx(0.2)


def test_a_waiting_prompt_holds_the_work_of_its_wait_too():
    """M/G/1: no wait with probability ``1 - busy``, else ``wait / busy`` on average."""
    busy, first, wait = 0.4, 0.1, 0.06
    got = curve_with((1.0,)).after_first_token_s(busy, wait, np.array([first]), np.zeros(1), step_cap_s=10.0)
    assert got == pytest.approx((1 - busy) * busy * first + busy * busy * (first + wait / busy))


def test_the_budget_a_chunked_prompts_last_step_leaves_runs_before_its_first_token():
    busy, first = 0.5, np.array([0.4])
    whole = curve_with((1.0,)).after_first_token_s(busy, 0.0, first, np.zeros(1), step_cap_s=10.0)
    less = curve_with((1.0,)).after_first_token_s(busy, 0.0, first, np.array([0.15]), step_cap_s=10.0)
    gone = curve_with((1.0,)).after_first_token_s(busy, 0.0, first, np.array([0.5]), step_cap_s=10.0)
    assert whole == pytest.approx(0.2) and less == pytest.approx(0.05) and gone == 0.0


@settings(max_examples=40, deadline=None)
@given(busy=st.floats(0.01, 0.9), first=st.floats(1e-3, 2.0), gap=st.integers(1, 500))
def test_more_load_more_work_between_tokens_and_a_longer_output_shares_it(busy, first, gap):
    curve = curve_with((float(gap),))
    at = curve.after_first_token_s(busy, 0.0, np.array([first]), np.zeros(1), step_cap_s=1e9)
    assert curve.after_first_token_s(min(busy * 1.1, 0.95), 0.0, np.array([first]), np.zeros(1), 1e9) >= at
    longer = curve_with((float(gap + 1),)).after_first_token_s(busy, 0.0, np.array([first]), np.zeros(1), 1e9)
    assert longer <= at
    assert at <= busy * first / (1 - busy) / gap * (1 + 1e-12)  # never more than the whole chain


@functools.cache
def llama_70b_pp2():
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=4, pp=2)
    return load_model("llama3.1-70b", use_env=False), system


def test_a_prompts_own_cost_is_one_more_prompt_in_a_stages_step():
    model, system = llama_70b_pp2()
    request = Request(3000.0, 200.0)
    batch = np.array([4.0, 32.0])
    own, attention = _own_prompt_s(model, system, request, batch, None, "vllm")

    def stage(prompts: float) -> tuple[np.ndarray, np.ndarray]:
        parts = step_times(model, system, request.precision, request.kv, decode_sequences=batch / 2,
                           decode_context_tokens=request.decode_context_tokens, prefill_tokens=prompts * 3000.0,
                           prefill_sequences=prompts, prompt_tokens=3000.0, engine="vllm")  # fmt: skip
        return parts.step_s, parts.prefill_attention_s

    (with_step, with_attention), (without_step, without_attention) = stage(1.0), stage(0.0)
    assert own == pytest.approx(with_step - without_step)
    assert attention == pytest.approx(with_attention - without_attention)
    assert np.all(attention > 0) and np.all(attention < own)
