"""What whole_prompts computes that its first tests left open (mutation testing, 2026-12-05): chained counts entry by
entry, the spread they get from a span that grows with its prompts, the admitting step's count through a lumped tail,
and the wait a spread of prompt lengths adds."""

from typing import Any

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import default_calibration, serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.formats import parse_precision
from clustersim.serving.memory import causal_pairs
from clustersim.serving.whole_prompts import StepMix, chained_counts, step_mix
from clustersim.workload.zoo import load_model

FIXED_S, PER_PROMPT_S = 0.01, 0.008  # a span linear in the prompts it follows


def _linear_spans(width: int, entries: int = 1) -> np.ndarray:
    return np.tile(FIXED_S + PER_PROMPT_S * np.arange(float(width)), (entries, 1))


def test_chained_counts_price_each_entry_on_its_own() -> None:
    gathered = np.asarray([0.5, 3.0])
    together = chained_counts(gathered, _linear_spans(60, 2))
    for entry, mean in enumerate(gathered):
        alone = chained_counts(np.asarray([mean]), _linear_spans(60))
        for both, one in zip(together, alone, strict=True):
            assert np.allclose(both[entry], one[0], rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("gathered", [0.2, 0.5, 3.0])
def test_the_chained_spread_follows_the_spans_slope_under_one_prompt_a_step_too(gathered: float) -> None:
    """W = a + c N: the least-squares slope over the Poisson counts is c whatever the mean, so the feedback is
    rate x c = gathered c / (a + c gathered) and the count's variance gathered / (1 - feedback^2)."""
    k = np.arange(80.0)
    pmf, _, _, _ = chained_counts(np.asarray([gathered]), _linear_spans(len(k)))
    feedback = gathered * PER_PROMPT_S / (FIXED_S + PER_PROMPT_S * gathered)
    mean = float(np.sum(pmf[0] * k))
    assert mean == pytest.approx(gathered, rel=1e-9)
    assert float(np.sum(pmf[0] * k**2)) - mean**2 == pytest.approx(gathered / (1.0 - feedback**2), rel=1e-4)


def test_the_admitting_step_carries_the_arrival_and_the_span_it_landed_in_through_a_lumped_tail() -> None:
    """Four columns for a mean of two: the tail holds a large share, and its count keeps the admitting step's mean at
    one (the arrival) plus the rate times the span an arrival lands in (size-biased by its length)."""
    gathered = np.asarray([2.0])
    spans = _linear_spans(4)
    pmf, _, admitting, admitting_tail = chained_counts(gathered, spans)
    assert admitting[0, -1] > 0.05  # the tail matters here
    span = float(np.sum(pmf[0] * spans[0]))
    rate = 2.0 / span
    landed = pmf[0] * spans[0] / span
    expected = 1.0 + rate * float(np.sum(landed * spans[0]))
    counts = np.arange(admitting.shape[1])
    mean = float(np.sum(admitting[0, :-1] * counts[:-1]) + admitting[0, -1] * admitting_tail[0])
    assert mean == pytest.approx(expected, rel=1e-9)


def _mix(**options: Any) -> tuple[StepMix, tuple[Any, ...]]:
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    engine = engine_profile("vllm")
    bf16 = parse_precision("bf16")
    mix = step_mix(model, system, (1024.0, 256.0), (bf16, bf16), np.asarray([64.0]), 0.3, default_calibration(),
                   engine, **options)  # fmt: skip
    return mix, (model, system, bf16, engine)


def test_a_spread_of_prompt_lengths_lengthens_the_wait_by_the_prompts_variance() -> None:
    """Each of a span's k prompts adds its cost's variance: prompt_cv2 times one prompt's cost squared. With Poisson
    counts (mean 0.3) the wait grows by mean count x cv2 x one^2 / (2 x mean span), the span a step here."""
    plain, (model, system, bf16, engine) = _mix()
    assert np.array_equal(plain.wait_s, _mix(prompt_cv2=0.0)[0].wait_s)  # the default: every prompt alike
    spread = _mix(prompt_cv2=1.5)[0]
    steps = step_times(model, system, bf16, bf16, decode_sequences=64.0, decode_context_tokens=1024.0 + 128.0,
                       prefill_tokens=np.asarray([0.0, 1024.0]), prefill_sequences=np.asarray([0.0, 1.0]),
                       prompt_tokens=1024.0, cal=default_calibration(), engine=engine).step_s  # fmt: skip
    one = float(steps[1] - steps[0])
    added = 0.3 * 1.5 * one**2 / (2.0 * float(plain.mean.step_s[0]))
    assert float(spread.wait_s[0] - plain.wait_s[0]) == pytest.approx(added, rel=1e-6)


def test_the_prompts_attention_is_priced_at_the_pairs_given() -> None:
    mix, (model, *_) = _mix()
    at_mean = causal_pairs(model, 1024.0)
    assert np.array_equal(mix.mean.prefill_attention_s, _mix(prompt_pairs=at_mean)[0].mean.prefill_attention_s)
    longer = _mix(prompt_pairs=2.0 * at_mean)[0]
    ratio = float(longer.scheduling.prefill_attention_s[0] / mix.scheduling.prefill_attention_s[0])
    assert ratio == pytest.approx(2.0, rel=1e-9)  # the core's time is linear in its pairs
