"""Max-min fair sharing by progressive filling: hand-derived allocations and its defining properties;
the incremental re-solve (``MaxMinState``) against a full solve."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.solver import REL_TOL, MaxMinState, max_min_rates, prepare, solve
from tests.network.flowsim.drawn import toggled_flows


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


def _state(
    entries: list[tuple[int, int, float]], capacity: list[float], num_flows: int, *, table: bool = True, **kw: Any
) -> MaxMinState:
    f, r, w = (np.array(x) for x in zip(*entries, strict=True))
    p = prepare(f.astype(np.int64), r.astype(np.int64), w.astype(float), num_flows, len(capacity), table=table)
    return MaxMinState(p, np.array(capacity), **kw)


def _ids(*flows: int) -> np.ndarray:
    return np.array(flows, dtype=np.int64)


def test_removing_a_flow_re_solves_only_the_flows_at_or_above_its_rate():
    # Link 0 (capacity 1): flows 0 and 1; link 1 (capacity 3): flows 1 and 2; link 2 (capacity 0.25):
    # flow 3 alone. Rates 1/2, 1/2, 5/2, 1/4. Without flow 0 (rate 1/2), flow 1 takes all of link 0 and
    # flow 2 the other 2 of link 1; flow 3, below 1/2, is not even looked at (always re-solved warm).
    entries = [(0, 0, 1.0), (1, 0, 1.0), (1, 1, 1.0), (2, 1, 1.0), (3, 2, 1.0)]
    state = _state(entries, [1.0, 3.0, 0.25], 4, warm_fraction=1.0)
    state.update(_ids(), _ids(0, 1, 2, 3))
    assert state.rate == pytest.approx([0.5, 0.5, 2.5, 0.25])
    changed, _ = state.update(_ids(0), _ids())
    assert state.rate == pytest.approx([0.0, 1.0, 2.0, 0.25])
    assert sorted(changed.tolist()) == [1, 2]
    # Adding flow 0 back: link 0 fills at level x where min(1, x) + x = 1, so x = 1/2 again.
    changed, _ = state.update(_ids(), _ids(0))
    assert state.rate == pytest.approx([0.5, 0.5, 2.5, 0.25])
    assert state.used == pytest.approx([1.0, 3.0, 0.25])


def test_the_fastest_flows_finishing_leave_every_other_rate_alone():
    # Flow 0 alone on link 0 (capacity 10) and flow 1 on links 0 and 1 (capacity 1): flow 1 gets 1,
    # flow 0 the other 9. Flow 0 (the fastest) leaving frees link 0, but flow 1 is held by link 1:
    # nothing moves, which is why an all-to-all's completions cost almost nothing to re-solve.
    state = _state([(0, 0, 1.0), (1, 0, 1.0), (1, 1, 1.0)], [10.0, 1.0], 2)
    state.update(_ids(), _ids(0, 1))
    assert state.rate == pytest.approx([9.0, 1.0])
    changed, _ = state.update(_ids(0), _ids())
    assert changed.size == 0 and state.rate == pytest.approx([0.0, 1.0])
    # warm_fraction 0 is the plain method: everything still active is solved again.
    plain = _state([(0, 0, 1.0), (1, 0, 1.0), (1, 1, 1.0)], [10.0, 1.0], 2, warm_fraction=0.0)
    plain.update(_ids(), _ids(0, 1))
    changed, _ = plain.update(_ids(0), _ids())
    assert changed.tolist() == [1] and plain.rate == pytest.approx([0.0, 1.0])


def test_a_warm_fraction_outside_0_to_1_is_refused():
    with pytest.raises(ClusterSimError, match="warm_fraction must be in"):
        _state([(0, 0, 1.0)], [1.0], 1, warm_fraction=1.5)


# Every way a re-solve can go: from scratch past half the flows (0.5), or always warm (1.0); on the
# slot x flow table or on entries sorted by flow; by local bottlenecks or level by level
# (levels_min 0); re-solving every flow above the level or only the part connected to the change
# (prune_min 0); on the table, over every resource of the fabric (the default on these small ones)
# or only those the re-solved flows cross (whole_fabric 0).
SOLVES = [
    {"warm_fraction": 0.5},
    {"warm_fraction": 1.0},
    {"warm_fraction": 1.0, "whole_fabric": 0},
    {"warm_fraction": 1.0, "table": False},
    {"warm_fraction": 1.0, "levels_min": 0},
    {"warm_fraction": 1.0, "levels_min": 0, "table": False},
    {"warm_fraction": 1.0, "prune_min": 0},
    {"warm_fraction": 1.0, "prune_min": 0, "table": False},
]


@pytest.mark.parametrize("how", SOLVES, ids=lambda how: ",".join(f"{k}={v}" for k, v in how.items()))
@settings(max_examples=40, deadline=None)
@given(toggled_flows(1, 3))
def test_the_incremental_re_solve_equals_a_full_solve_after_every_change(
    how: dict[str, Any], case: tuple[int, list[list[tuple[int, float]]], list[float], list[list[int]]]
):
    """Flows toggle in and out (removed if active, added if not), in batches; after each batch the
    rates and resource loads equal those of solving the new active set from scratch."""
    n, paths, capacity, batches = case
    entries = [(i, r, w) for i, path in enumerate(paths) for r, w in dict(path).items()]
    state = _state(entries, capacity, n, **how)
    f, r, w = (np.array(x) for x in zip(*entries, strict=True))
    p = prepare(f.astype(np.int64), r.astype(np.int64), w.astype(float), n, len(capacity))
    for batch in batches:
        toggled = np.unique(np.array(batch, dtype=np.int64))
        was = state.active[toggled]
        state.update(toggled[was], toggled[~was])
        expected, _ = solve(p, state.active, np.array(capacity))
        np.testing.assert_allclose(state.rate, expected, rtol=1e-7, atol=1e-12)
        load = np.bincount(r, weights=w * expected[f], minlength=len(capacity))
        np.testing.assert_allclose(state.used, load, rtol=1e-7, atol=1e-9)


def test_flows_of_like_path_length_get_a_table_and_a_ragged_incidence_does_not():
    # Three flows of two resources each (ECMP-like): a 2 x 3 table (a column per flow), padded nowhere.
    # Add one flow crossing 8 resources: 8 x 4 slots for 14 entries is more than DENSE_SLACK times them.
    f = np.array([0, 0, 1, 1, 2, 2], dtype=np.int64)
    r = np.array([0, 1, 1, 2, 2, 3], dtype=np.int64)
    p = prepare(f, r, np.ones(6), 3, 4)
    assert p.has_table and p.table_res.T.tolist() == [[0, 1], [1, 2], [2, 3]]
    assert not prepare(f, r, np.ones(6), 3, 4, table=False).has_table
    wide_f = np.concatenate([f, np.full(8, 3)])
    wide_r = np.concatenate([r, np.arange(8)])
    assert not prepare(wide_f, wide_r, np.ones(14), 4, 8).has_table
    # Entries given out of flow order are sorted by flow first: the same rows (in any slot order).
    order = np.array([5, 2, 0, 4, 1, 3])
    rows = np.sort(prepare(f[order], r[order], np.ones(6), 3, 4).table_res.T, axis=1)
    assert rows.tolist() == [[0, 1], [1, 2], [2, 3]]
