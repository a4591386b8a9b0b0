"""Max-min fair rates by progressive filling, vectorized over a sparse flow x resource incidence.

All unfrozen flows grow at the same pace; each round finds the resource that fills first (its
remaining capacity over the weighted number of unfrozen flows on it), raises every unfrozen flow by
that much, and freezes the flows of every resource that is now full. The weighted count of growing
flows per resource is kept up to date by subtracting the entries of the flows just frozen, so a
round costs O(resources in use) plus the entries it freezes: O(entries + rounds x resources) in all,
with as many rounds as distinct bottleneck levels (one or two on a symmetric collective). The result
is the unique max-min fair allocation: no flow can grow without shrinking one that is no faster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.topology import BoolArray, FloatArray, IntArray

REL_TOL = 1e-9  # a resource within this fraction of its capacity is full
LOAD_TOL = 1e-9  # a weighted flow count below this is empty (rounding of the subtractions)


def _csr(keys: IntArray, size: int) -> tuple[IntArray, IntArray]:
    order = np.argsort(keys, kind="stable")
    return np.searchsorted(keys[order], np.arange(size + 1)), order


def _rows(ptr: IntArray, order: IntArray | None, rows: IntArray) -> IntArray:
    """Entries (indices into the incidence) of ``rows`` of a CSR (``ptr``, ``order``)."""
    lens = ptr[rows + 1] - ptr[rows]
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first = np.repeat(ptr[rows] - np.cumsum(lens) + lens, lens) + np.arange(total, dtype=np.int64)
    return first if order is None else order[first]


@dataclass(frozen=True, slots=True, eq=False)
class Prepared:
    """An incidence indexed both ways once, so each solve only masks it (entries sorted by flow)."""

    flow: IntArray
    resource: IntArray
    weight: FloatArray
    flow_ptr: IntArray
    res_ptr: IntArray
    res_order: IntArray
    num_flows: int
    num_resources: int


def prepare(flow: IntArray, resource: IntArray, weight: FloatArray, num_flows: int, num_resources: int) -> Prepared:
    """Sort the entries by flow and index them by resource."""
    order = np.argsort(flow, kind="stable")
    f, r, w = flow[order], resource[order], weight[order]
    if num_flows and np.bincount(f, minlength=num_flows).min() == 0:
        raise ClusterSimError("a flow touches no resource", field="flow")
    res_ptr, res_order = _csr(r, num_resources)
    flow_ptr = np.searchsorted(f, np.arange(num_flows + 1))
    return Prepared(f, r, w, flow_ptr, res_ptr, res_order, num_flows, num_resources)


def _distinct(values: IntArray, size: int) -> IntArray:
    """The distinct values (< ``size``) of ``values``, sorted: by sorting when few, by marking when many."""
    if values.size * 16 < size:
        return np.unique(values)
    mark = np.zeros(size, dtype=bool)
    mark[values] = True
    return np.flatnonzero(mark)


def max_min_rates(
    flow: IntArray, resource: IntArray, weight: FloatArray, capacity: FloatArray, num_flows: int
) -> tuple[FloatArray, int]:
    """Rates (bytes/s) of ``num_flows`` flows and the number of filling rounds.

    Entry ``i`` says flow ``flow[i]`` puts ``weight[i]`` of its rate on ``resource[i]``; flows are
    numbered ``0..num_flows-1`` and each must touch at least one resource.
    """
    prepared = prepare(flow, resource, weight, num_flows, capacity.size)
    return solve(prepared, np.ones(num_flows, dtype=bool), capacity)


def solve(p: Prepared, active: BoolArray, capacity: FloatArray) -> tuple[FloatArray, int]:
    """Max-min rates of the ``active`` flows of ``p`` (0 for the others) and the filling rounds."""
    rate = np.zeros(p.num_flows)
    rows = np.flatnonzero(active)
    if not rows.size:
        return rate, 0
    entries = _rows(p.flow_ptr, None, rows)
    load = np.bincount(p.resource[entries], weights=p.weight[entries], minlength=p.num_resources)
    remaining = capacity.astype(np.float64, copy=True)
    busy = np.flatnonzero(load > LOAD_TOL)
    growing = active.copy()
    level, rounds = 0.0, 0
    while busy.size:
        rounds += 1
        # ``remaining``: capacity less the frozen flows' load; the growing flows all run at ``level``.
        level = max(level, float((np.maximum(remaining[busy], 0.0) / load[busy]).min()))
        full = busy[remaining[busy] - load[busy] * level <= REL_TOL * capacity[busy]]
        frozen = p.flow[_rows(p.res_ptr, p.res_order, full)]
        frozen = _distinct(frozen[growing[frozen]], p.num_flows)
        growing[frozen] = False
        rate[frozen] = level
        hit = _rows(p.flow_ptr, None, frozen)
        touched = _distinct(p.resource[hit], p.num_resources)
        frozen_load = np.bincount(p.resource[hit], weights=p.weight[hit], minlength=p.num_resources)[touched]
        load[touched] -= frozen_load
        remaining[touched] -= frozen_load * level
        load[full] = 0.0
        busy = busy[load[busy] > LOAD_TOL]
    return rate, rounds
