"""Max-min fair sharing by progressive filling: hand-derived allocations and its defining properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.solver import REL_TOL, max_min_rates


def _rates(entries: list[tuple[int, int, float]], capacity: list[float], num_flows: int) -> np.ndarray:
    f, r, w = (np.array(x) for x in zip(*entries, strict=True))
    rate, _ = max_min_rates(f.astype(np.int64), r.astype(np.int64), w.astype(float), np.array(capacity), num_flows)
    return rate


def test_two_flows_on_one_link_get_half_each():
    assert _rates([(0, 0, 1.0), (1, 0, 1.0)], [10.0], 2) == pytest.approx([5.0, 5.0])


def test_a_flow_limited_elsewhere_leaves_the_rest_to_the_others():
    # Link 0 (capacity 1) carries flows 0 and 1; link 1 (capacity 3) carries flows 1 and 2. Link 0 fills
    # first at 1/2 each; flow 2 then takes what flow 1 leaves of link 1: 3 - 1/2.
    assert _rates([(0, 0, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 1, 1.0)], [1.0, 3.0], 3) == pytest.approx([0.5, 0.5, 2.5])


def test_local_bottleneck_rounds_give_the_same_allocation_in_fewer_rounds():
    # Link k (capacity k + 1) carries flows 2k and 2k + 1, and flow 10 crosses links 0 and 4: five
    # distinct levels, so filling level by level takes five rounds; the four untouched links and
    # link 0 are local bottlenecks at once, then link 4.
    entries = [(2 * k + i, k, 1.0) for k in range(5) for i in range(2)] + [(10, 0, 1.0), (10, 4, 1.0)]
    f, r, w = (np.array(x) for x in zip(*entries, strict=True))
    cap = np.arange(1.0, 6.0)
    plain, plain_rounds = max_min_rates(f, r, w.astype(float), cap, 11, global_rounds=100)
    local, local_rounds = max_min_rates(f, r, w.astype(float), cap, 11, global_rounds=0)
    # Link 0: three flows at 1/3; link 4: flow 10 at 1/3 leaves 14/3 for two: 7/3 each.
    assert plain == pytest.approx([1 / 3, 1 / 3, 1, 1, 1.5, 1.5, 2, 2, 7 / 3, 7 / 3, 1 / 3])
    assert local == pytest.approx(plain)
    assert (plain_rounds, local_rounds) == (5, 2)


def test_a_striped_flow_loads_each_stripe_by_its_weight():
    # Flow 0 is split evenly over links 0 and 1 (weight 1/2 each); flow 1 uses link 1 alone (capacity 1).
    # Link 1 fills when x/2 + x = 1: both at 2/3. Link 0 (capacity 10) then still has room, but flow 0
    # cannot grow without more of link 1.
    assert _rates([(0, 0, 0.5), (0, 1, 0.5), (1, 1, 1.0)], [10.0, 1.0], 2) == pytest.approx([2 / 3, 2 / 3])


def test_a_flow_on_no_resource_is_refused():
    with pytest.raises(ClusterSimError, match="touches no resource"):
        max_min_rates(np.array([0]), np.array([0]), np.array([1.0]), np.array([1.0]), 2)


@pytest.mark.parametrize("global_rounds", [0, 1, 100])
@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=3, unique=True), min_size=n, max_size=n),
            st.lists(st.floats(0.5, 20.0), min_size=6, max_size=6),
        )
    )
)
def test_rates_are_feasible_and_every_flow_has_a_bottleneck(
    global_rounds: int, case: tuple[int, list[list[int]], list[float]]
):
    """Max-min fairness: no resource is over capacity, and every flow crosses a full resource on which
    no other flow is faster (so it cannot grow without shrinking a flow that is no faster); filling
    level by level, by local bottlenecks from the start, or switching after one round."""
    n, paths, capacity = case
    f = np.array([i for i, p in enumerate(paths) for _ in p], dtype=np.int64)
    r = np.array([x for p in paths for x in p], dtype=np.int64)
    cap = np.array(capacity)
    rate, _ = max_min_rates(f, r, np.ones(f.size), cap, n, global_rounds=global_rounds)
    load = np.bincount(r, weights=rate[f], minlength=cap.size)
    assert np.all(load <= cap * (1 + 1e-9))
    for i, path in enumerate(paths):
        bottleneck = [
            x for x in path if load[x] >= cap[x] * (1 - 1e3 * REL_TOL) and rate[i] >= rate[f[r == x]].max() * (1 - 1e-9)
        ]
        assert bottleneck, (i, path, rate, load)
