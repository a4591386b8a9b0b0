"""The event loop's block minima against plain numpy after every change."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.network.flowsim.blockmin import BlockMin

_VALUES = st.floats(0.0, 10.0) | st.just(float("inf"))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(_VALUES, min_size=1, max_size=40),
    st.sampled_from([None, 1, 4, 64]),  # None: the default, one block for so few
    st.lists(st.tuples(st.lists(st.integers(0, 39), max_size=12), _VALUES, st.floats(0.0, 10.0)), max_size=10),
)
def test_minimum_and_indices_at_most_a_bound_follow_every_change(
    values: list[float], block: int | None, changes: list[tuple[list[int], float, float]]
):
    plain = np.array(values)
    kept = BlockMin(plain.copy(), block)
    for where, value, bound in changes:
        idx = np.unique(np.array(where, dtype=np.int64) % plain.size)
        plain[idx] = value
        kept.set(idx, value)
        np.testing.assert_array_equal(kept.values, plain)
        assert kept.min() == plain.min()
        np.testing.assert_array_equal(kept.at_most(bound), np.flatnonzero(plain <= bound))


def test_an_empty_array_has_no_minimum_and_nothing_at_most_anything():
    kept = BlockMin(np.zeros(0))
    assert kept.min() == np.inf
    assert kept.at_most(np.inf).size == 0
