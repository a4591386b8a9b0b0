"""The event loop with incremental re-solves against a hand-derived incast and against the plain loop
(every active flow re-solved from scratch at every event) on random flows with dependencies."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.network.flowsim.engine import DONE_TOL, Flows, independent, run
from clustersim.network.flowsim.routing import Incidence, Routing, route
from clustersim.network.flowsim.solver import prepare, solve
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, build
from tests.network.flowsim.drawn import dependent_transfers

RATE = 1e9  # bytes/s per NIC


def _tree(latency: float = 0.0) -> FatTree:
    # 16 hosts on radix-8 switches: leaves of 4 hosts with 4 uplinks, so ECMP collides on them
    spec = FatTreeSpec(
        num_hosts=16,
        gpus_per_host=1,
        nics_per_host=1,
        nic_bytes_per_s=RATE,
        scaleup_bytes_per_s=1e12,
        radix=8,
        link_latency_s=latency,
    )
    return build(spec)


def _ready(flows: Flows, deps: list[np.ndarray], started: np.ndarray, end: np.ndarray) -> np.ndarray:
    """When each flow not started yet may start (inf: waiting on a flow not yet arrived)."""
    return np.array(
        [
            np.inf if started[i] or np.isnan(end[d]).any() else max([flows.start_at_s[i], *end[d]])
            for i, d in enumerate(deps)
        ]
    )


def _plain_end_s(tree: FatTree, flows: Flows, inc: Incidence) -> np.ndarray:
    """The reference: advance every active flow to the next event and solve them all again there."""
    n, cap = flows.num_flows, tree.capacity_bytes_per_s
    p = prepare(inc.flow, inc.resource, inc.weight, n, cap.size)
    latency = inc.hops * tree.spec.link_latency_s
    deps = [flows.dep_idx[flows.dep_ptr[i] : flows.dep_ptr[i + 1]] for i in range(n)]
    left, rate = flows.size_bytes.copy(), np.zeros(n)
    end = np.full(n, np.nan)
    active = np.zeros(n, dtype=bool)
    started = np.zeros(n, dtype=bool)
    now = 0.0
    while np.isnan(end).any():
        ready = _ready(flows, deps, started, end)
        t = min(ready.min(), now + float((left[active] / rate[active]).min()) if active.any() else np.inf)
        left[active] -= rate[active] * (t - now)
        done = active & (left <= DONE_TOL * flows.size_bytes)
        end[done] = t + latency[done]
        active &= ~done
        now = t
        ready = _ready(flows, deps, started, end)
        new = ready <= now
        started |= new
        active |= new
        rate = solve(p, active, cap)[0] if active.any() else np.zeros(n)
    return end


def test_an_incast_of_three_sizes_finishes_in_thirds_then_halves():
    # Three senders into host 15's NIC (rate C): sizes s, 2s, 3s share it C/3 each until the first is
    # done at 3s/C; the other two have s and 2s left at C/2: the second is done 2s/C later; the last
    # has s left alone at C. Ends 3s/C, 5s/C, 6s/C: the NIC never idles, so the last is (sizes) / C.
    s = 1e8
    flows = independent(np.array([0, 4, 8]), np.array([15, 15, 15]), np.array([s, 2 * s, 3 * s]))
    tree = _tree()
    for routing in Routing:
        times = run(tree, flows, route(tree, flows.src_gpu, flows.dst_gpu, routing, 0))
        assert times.end_s == pytest.approx(np.array([3, 5, 6]) * s / RATE)
        assert times.num_events == 4  # the start and three completions


@settings(max_examples=25, deadline=None)
@given(
    st.integers(2, 24).flatmap(
        lambda n: st.tuples(
            st.lists(st.tuples(st.integers(0, 15), st.integers(1, 15)), min_size=n, max_size=n),
            st.lists(st.sampled_from([1e6, 2e6, 3e6, 5e6]), min_size=n, max_size=n),
            st.lists(st.sampled_from([0.0, 0.0, 1e-3, 2.5e-3]), min_size=n, max_size=n),
            st.lists(st.lists(st.integers(0, n - 1), max_size=2, unique=True), min_size=n, max_size=n),
        )
    ),
    st.sampled_from(list(Routing)),
    st.integers(0, 3),
)
def test_incremental_events_give_the_plain_loops_times(
    case: tuple[list[tuple[int, int]], list[float], list[float], list[list[int]]], routing: Routing, seed: int
):
    """Random transfers (equal sizes and start times on purpose: ties), each waiting on up to two
    earlier ones, routed by ECMP (collisions: many distinct rates) or spraying."""
    pairs, sizes, starts, waits = case
    flows = dependent_transfers(pairs, sizes, starts, waits)
    src, dst = flows.src_gpu, flows.dst_gpu
    tree = _tree(latency=1e-6)
    inc = route(tree, src, dst, routing, seed)
    times = run(tree, flows, inc)
    np.testing.assert_allclose(times.end_s, _plain_end_s(tree, flows, inc), rtol=1e-9)
    carried = np.bincount(inc.resource, weights=inc.weight * flows.size_bytes[inc.flow], minlength=tree.num_resources)
    np.testing.assert_allclose(times.resource_bytes, carried)
    assert np.all(times.peak_utilization <= 1 + 1e-9)
