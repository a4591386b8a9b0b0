"""The compiled warm re-solve (``flowsim.kernel``) against numpy's path: the same completions, rates,
loads and rounds on drawn problems; and when each path is chosen."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim import kernel
from clustersim.network.flowsim.engine import run
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.solver import MaxMinState, prepare
from clustersim.network.flowsim.topology import FatTreeSpec, build
from tests.network.flowsim.drawn import dependent_transfers, toggled_flows


def _needs_numba() -> None:
    pytest.importorskip("numba")


@settings(max_examples=30, deadline=None)
@given(
    st.integers(2, 40).flatmap(
        lambda n: st.tuples(
            st.lists(st.tuples(st.integers(0, 15), st.integers(1, 15)), min_size=n, max_size=n),
            st.lists(st.floats(1e6, 1e8), min_size=n, max_size=n),
            st.lists(st.sampled_from([0.0, 0.0, 1e-3, 2.5e-3]), min_size=n, max_size=n),
            st.lists(st.lists(st.integers(0, n - 1), max_size=2, unique=True), min_size=n, max_size=n),
        )
    ),
    st.sampled_from(list(Routing)),
    st.sampled_from([1.0, 0.5, 0.0]),
    st.integers(0, 3),
)
def test_the_kernel_gives_numpys_completions(
    case: tuple[list[tuple[int, int]], list[float], list[float], list[list[int]]],
    routing: Routing,
    warm_fraction: float,
    seed: int,
):
    """Random transfers of distinct sizes (many distinct completions) with dependencies, ECMP (one path
    each) or sprayed (weights below 1), re-solved warm or from scratch: every completion, peak load
    and round count of the compiled path equals numpy's."""
    _needs_numba()
    pairs, sizes, starts, waits = case
    flows = dependent_transfers(pairs, sizes, starts, waits)
    src, dst = flows.src_gpu, flows.dst_gpu
    spec = FatTreeSpec(
        num_hosts=16, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=1e9, scaleup_bytes_per_s=1e12, radix=8
    )
    tree = build(spec)
    inc = route(tree, src, dst, routing, seed)
    numpy_path = run(tree, flows, inc, warm_fraction=warm_fraction, kernel=False)
    compiled = run(tree, flows, inc, warm_fraction=warm_fraction, kernel=True)
    np.testing.assert_allclose(compiled.end_s, numpy_path.end_s, rtol=1e-12, atol=0)
    np.testing.assert_allclose(compiled.peak_utilization, numpy_path.peak_utilization, rtol=1e-12, atol=1e-15)
    assert compiled.num_rounds == numpy_path.num_rounds


@pytest.mark.parametrize("how", [{}, {"whole_fabric": 0}], ids=["whole fabric", "crossed resources"])
@settings(max_examples=40, deadline=None)
@given(toggled_flows(2, 2))
def test_the_kernel_gives_numpys_rates_and_loads_after_every_change(
    how: dict[str, Any], case: tuple[int, list[list[tuple[int, float]]], list[float], list[list[int]]]
):
    """Flows toggle in and out in batches; after each, the compiled re-solve's rates and loads equal
    numpy's, whether numpy works on every resource of the fabric or only on those crossed."""
    _needs_numba()
    n, paths, capacity, batches = case
    entries = [(i, r, w) for i, path in enumerate(paths) for r, w in dict(path).items()]
    f, r, w = (np.array(x) for x in zip(*entries, strict=True))
    p = prepare(f.astype(np.int64), r.astype(np.int64), w.astype(float), n, len(capacity))
    assert p.has_table
    states = [MaxMinState(p, np.array(capacity), kernel=k, **how) for k in (False, True)]
    for batch in batches:
        toggled = np.unique(np.array(batch, dtype=np.int64))
        was = states[0].active[toggled]
        for state in states:
            state.update(toggled[was], toggled[~was])
        np.testing.assert_allclose(states[1].rate, states[0].rate, rtol=1e-12, atol=0)
        np.testing.assert_allclose(states[1].used, states[0].used, rtol=1e-12, atol=1e-12)
        assert states[1].rounds == states[0].rounds


def test_auto_loads_the_kernel_once_numpy_has_done_its_share(monkeypatch: pytest.MonkeyPatch):
    _needs_numba()
    monkeypatch.setattr(kernel, "_loaded", {})
    monkeypatch.setattr(kernel, "_numpy_entries", 0)
    monkeypatch.setattr(kernel, "KERNEL_FROM_ENTRIES", 100)
    assert kernel.choose(None, 60) is None  # numpy, 60 entries done
    assert kernel.choose(None, 60) is None  # numpy, 120 entries done: past the threshold
    assert kernel.choose(None, 1) is not None
    assert kernel.choose(False, 1) is None  # never, whatever is loaded


def test_without_numba_auto_stays_on_numpy_and_true_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(kernel, "_loaded", {"kernel": None})  # as ``load`` leaves it when numba is absent
    monkeypatch.setattr(kernel, "_numpy_entries", 0)
    assert kernel.choose(None, 10**9) is None
    assert kernel.choose(None, 1) is None
    with pytest.raises(ClusterSimError, match="kernel=True needs numba") as err:
        kernel.choose(True, 1)
    assert err.value.field == "kernel"
