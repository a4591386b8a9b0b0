"""Whole prompts: the count a scheduling step carries is Poisson, its weights a distribution with the steady mean."""

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.serving.whole_prompts import MEAN_FIELD, prompt_counts

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
