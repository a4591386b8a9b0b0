"""Whole prompts: the count a scheduling step carries is Poisson, its weights a distribution with the steady mean."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.serving.whole_prompts import MEAN_FIELD, _negative_binomial_lumped, chained_counts, prompt_counts

MEANS = st.lists(st.floats(min_value=0.0, max_value=1e4, allow_nan=False), min_size=1, max_size=6)


@settings(max_examples=200, deadline=None)
@given(MEANS, st.integers(min_value=1, max_value=64))
def test_the_counts_are_a_distribution_with_the_gathered_mean(means: list[float], every: int):
    counts, weights = prompt_counts(np.asarray(means), every)
    assert counts.shape == weights.shape and np.isfinite(counts).all() and (counts >= 0).all()
    assert np.allclose(weights.sum(axis=1), 1.0) and (weights >= 0).all()
    assert np.allclose((counts * weights).sum(axis=1), np.asarray(means) * every, rtol=1e-9, atol=1e-12)
    assert (counts[:, 0] == 0).all()


def test_a_few_prompts_are_poisson_and_many_their_mean():
    counts, weights = prompt_counts(np.asarray([0.3, 2 * MEAN_FIELD]), 1)
    poisson = [math.exp(-0.3) * 0.3**k / math.factorial(k) for k in range(4)]
    assert np.allclose(weights[0, :4], poisson, rtol=1e-12) and np.array_equal(counts[0, :4], [0, 1, 2, 3])
    assert weights[1, -1] == 1.0 and counts[1, -1] == 2 * MEAN_FIELD  # concentrated: priced at its mean
    # every ten steps: ten steps' prompts gather on the scheduling step, Poisson(3) there
    counts, weights = prompt_counts(np.asarray([0.3]), 10)
    assert np.isclose(weights[0, 0], math.exp(-3.0), rtol=1e-12)


def _chain_fixed_point(gathered: float, span: np.ndarray) -> np.ndarray:
    """The stationary count of the chain itself: N' ~ Poisson(rate W(N)), the rate holding the mean count."""
    k = np.arange(len(span))
    pmf = np.exp(k * math.log(gathered) - gathered - np.array([math.lgamma(x + 1) for x in k]))
    for _ in range(2000):
        rate = gathered / np.sum(pmf * span)
        lam = rate * span[:, None]
        moves = np.exp(k * np.log(lam) - lam - np.array([math.lgamma(x + 1) for x in k]))
        moves[:, -1] += 1 - moves.sum(axis=1)
        pmf = pmf @ moves
    return pmf


@pytest.mark.parametrize("gathered", [0.2, 1.0, 3.0])
@pytest.mark.parametrize("shape", ["linear", "roofline"])
def test_chained_counts_stand_for_the_chain_at_its_fixed_point(gathered: float, shape: str):
    """Prompts arriving in time: a long span is followed by a step with more prompts. The negative binomial keeps the
    mean count and meets the chain's fixed point in its mean span, its spread and the admitting step's count."""
    k = np.arange(40.0)
    span = 0.01 + 0.008 * k if shape == "linear" else np.maximum(0.01, 0.006 + 0.009 * k)
    pmf, tail, admitting, admitting_tail = chained_counts(np.asarray([gathered]), span[None, :])
    exact = _chain_fixed_point(gathered, span)
    assert np.sum(pmf[0, :-1] * k[:-1]) + pmf[0, -1] * tail[0] == pytest.approx(gathered, rel=1e-9)
    assert np.sum(pmf[0] * span) == pytest.approx(np.sum(exact * span), rel=5e-3)
    assert np.sum(pmf[0] * span**2) == pytest.approx(np.sum(exact * span**2), rel=2e-2)
    assert np.sum(pmf[0] * k**2) > gathered + gathered**2  # overdispersed: a Poisson's second moment is below
    rate = gathered / np.sum(exact * span)
    landed = exact * span / np.sum(exact * span)
    admitted = 1 + rate * np.sum(landed * span)  # the arrival, and the others of the span it landed in
    counts = np.arange(admitting.shape[1])
    mean = np.sum(admitting[0, :-1] * counts[:-1]) + admitting[0, -1] * admitting_tail[0]
    assert mean == pytest.approx(admitted, rel=1e-2) and admitting[0, 0] == 0.0
    assert admitted > 1 + gathered  # the arrival likelier lands in a long span, after which more come


@given(mean=st.floats(0.01, 30.0), spread=st.floats(1.0, 10.0))
def test_the_negative_binomial_has_the_mean_and_variance_asked_for(mean: float, spread: float):
    k = np.arange(np.ceil(mean + 40 * np.sqrt(mean * spread) + 200))  # the tail lumped into the last is negligible
    pmf = _negative_binomial_lumped(np.asarray([mean]), np.asarray([mean * spread]), k)[0]
    assert pmf.sum() == pytest.approx(1.0, abs=1e-9) and (pmf >= 0).all()
    first = float(np.sum(pmf * k))
    assert first == pytest.approx(mean, rel=1e-4, abs=1e-9)
    assert float(np.sum(pmf * k**2)) - first**2 == pytest.approx(mean * spread, rel=1e-3, abs=1e-9)


def _server_mix(prompt_tokens: float, *, in_time: bool, context: float | None = None, budget: int = 8192):
    """The steps of one H100 replica of Llama 3.1 8B, 64 decoders, half a prompt a step on average."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.serving.engine import default_calibration, serving_system_for_instance
    from clustersim.serving.engines import engine_profile
    from clustersim.serving.formats import parse_precision
    from clustersim.serving.whole_prompts import step_mix
    from clustersim.workload.zoo import load_model

    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    engine = engine_profile("vllm").model_copy(update={"max_tokens_per_step": budget})
    bf16 = parse_precision("bf16")
    return step_mix(model, system, (prompt_tokens, 256.0), (bf16, bf16), np.asarray([64.0]), 0.5,
                    default_calibration(), engine, in_time, decode_context_tokens=context)  # fmt: skip


def test_chained_counts_keep_the_mean_prompt_work_where_the_steps_are_compute_bound():
    """4,096-token prompts keep every step compute-bound, where a step's GEMM time is linear in its tokens: the
    mean step's GEMM time is then the step's at the mean count, chained or not (the lumped tail at its mean)."""
    chained, poisson = _server_mix(4096.0, in_time=True), _server_mix(4096.0, in_time=False)
    assert float(chained.mean.gemm_compute_s[0]) == pytest.approx(float(poisson.mean.gemm_compute_s[0]), rel=1e-6)
    # chained, a long step is followed by more prompts: the arrival's admitting step carries more than 1 + 0.5
    assert float(chained.admitting.gemm_compute_s[0]) > float(poisson.admitting.gemm_compute_s[0]) * 1.05
    assert float(chained.wait_s[0]) > float(poisson.wait_s[0])  # and the spans vary more


def test_a_prompt_over_the_token_budget_is_not_chained_and_decoders_sit_at_the_context_given():
    over = _server_mix(4096.0, in_time=True, budget=4095)
    assert float(over.admitting.step_s[0]) == pytest.approx(
        float(_server_mix(4096.0, in_time=False).admitting.step_s[0])
    )
    at = _server_mix(4096.0, in_time=True, budget=4096)
    assert float(at.admitting.step_s[0]) > float(over.admitting.step_s[0])
    half = _server_mix(1024.0, in_time=False)
    assert float(half.mean.decode_attention_s[0]) == float(
        _server_mix(1024.0, in_time=False, context=1152.0).mean.decode_attention_s[0]
    )
    longer = _server_mix(1024.0, in_time=False, context=1536.0)
    ratio = float(longer.mean.decode_attention_s[0]) / float(half.mean.decode_attention_s[0])
    assert 1.25 < ratio <= 1536 / 1152  # the KV reads grow with the context (a fixed part per sequence aside)
