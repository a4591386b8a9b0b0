"""Searches over the candidate space: the fastest layout, the k fastest, the Pareto front."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.plan.search import choose_layout, pareto_front, rank_layouts
from clustersim.plan.space import SearchSpace
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
SYSTEM = system_for_instance(CATALOG, "p5.48xlarge", 4)
JOB = TrainingJob(global_batch=256, seq_len=8192)


def test_the_k_fastest_are_sorted_fit_and_match_single_estimates():
    ranking = rank_layouts(LLAMA_70B, SYSTEM, JOB)
    top = ranking.fastest(5)
    steps = [step for _, step in top]
    assert steps == sorted(steps) and len(top) == 5
    for layout, step in top:
        single = estimate_training(LLAMA_70B, SYSTEM, layout, JOB)
        assert single.fits and single.step_s == pytest.approx(step, rel=1e-12)
    # Nothing that fits is faster than the first.
    assert steps[0] == pytest.approx(float(np.min(ranking.step_s[ranking.fits])), rel=1e-12)
    assert choose_layout(LLAMA_70B, SYSTEM, JOB) == top[0][0]


def test_layouts_that_do_not_fit_are_never_chosen_even_when_faster():
    ranking = rank_layouts(LLAMA_70B, SYSTEM, JOB)
    assert not ranking.fits.all()  # zero 0 without recompute does not fit 70B on 32 H100
    faster_but_too_big = ranking.step_s[~ranking.fits].min() < ranking.fastest(1)[0][1]
    chosen = choose_layout(LLAMA_70B, SYSTEM, JOB)
    assert estimate_training(LLAMA_70B, SYSTEM, chosen, JOB).fits
    assert faster_but_too_big  # the case this test exists for


def test_a_model_that_fits_nowhere_names_the_leanest_need():
    one_node = system_for_instance(CATALOG, "p5.48xlarge", 1)
    with pytest.raises(ClusterSimError, match=r"does not fit on 1 x p5\.48xlarge: the leanest layout needs"):
        choose_layout(load_model("llama3.1-405b", use_env=False), one_node, TrainingJob(global_batch=64, seq_len=8192))


def test_a_space_without_any_legal_layout_is_refused():
    with pytest.raises(ClusterSimError, match="no layout of"):
        choose_layout(LLAMA_70B, SYSTEM, JOB, space=SearchSpace(tp=(3,)))


def test_pareto_front_of_a_hand_made_set():
    points = [[1, 5], [2, 2], [3, 1], [2, 3], [4, 4], [1, 5]]
    # (2,3) loses to (2,2); (4,4) to (2,2); duplicates of a front point both stay.
    assert pareto_front(points).tolist() == [0, 1, 2, 5]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9)), min_size=1, max_size=30))
def test_pareto_front_keeps_exactly_the_undominated(rows):
    front = set(pareto_front(rows).tolist())
    for i, a in enumerate(rows):
        dominated = any(all(b[k] <= a[k] for k in range(3)) and b != a for b in rows)
        assert (i not in front) == dominated


def test_pareto_front_needs_a_table():
    with pytest.raises(ClusterSimError, match="2-D"):
        pareto_front([1.0, 2.0])
