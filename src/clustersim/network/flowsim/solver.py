"""Max-min fair rates by progressive filling, vectorized over a sparse flow x resource incidence.

Progressive filling raises every unfrozen flow together and freezes the flows of each resource as
it fills. Done one bottleneck level at a time, a fabric with many distinct levels (ECMP's hash
collisions make hundreds) needs as many rounds; so after a few such rounds (all a symmetric
collective needs) each round freezes every resource that is a local bottleneck at once
(``_local_rounds``): a few ``np.bincount`` / ``np.minimum.reduceat`` passes over the unfrozen
entries (sorted by flow once, in ``prepare``), with rounds as deep as the chain of bottlenecks,
not as many as the levels. The result is the unique max-min fair allocation: no flow can grow
without shrinking one that is no faster."""

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
    flow: IntArray,
    resource: IntArray,
    weight: FloatArray,
    capacity: FloatArray,
    num_flows: int,
    *,
    global_rounds: int | None = None,
) -> tuple[FloatArray, int]:
    """Rates (bytes/s) of ``num_flows`` flows and the number of filling rounds.

    Entry ``i`` says flow ``flow[i]`` puts ``weight[i]`` of its rate on ``resource[i]``; flows are
    numbered ``0..num_flows-1`` and each must touch at least one resource.
    """
    prepared = prepare(flow, resource, weight, num_flows, capacity.size)
    rounds = GLOBAL_ROUNDS if global_rounds is None else global_rounds
    return solve(prepared, np.ones(num_flows, dtype=bool), capacity, global_rounds=rounds)


GLOBAL_ROUNDS = 3  # rounds of the plain algorithm before switching to local bottlenecks


def solve(
    p: Prepared, active: BoolArray, capacity: FloatArray, *, global_rounds: int = GLOBAL_ROUNDS
) -> tuple[FloatArray, int]:
    """Max-min rates of the ``active`` flows of ``p`` (0 for the others) and the filling rounds.

    The first ``global_rounds`` rounds fill to the lowest level everywhere (cheap, and enough for a
    symmetric collective); if flows are still growing, ``_local_rounds`` finishes the job.
    """
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
        if rounds == global_rounds:
            remaining -= load * level  # the growing flows' share so far, then finish locally
            left = _rows(p.flow_ptr, None, np.flatnonzero(growing))
            return _local_rounds(p, left, remaining, rate, level, rounds)
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


def _local_rounds(
    p: Prepared, entries: IntArray, remaining: FloatArray, rate: FloatArray, base: float, rounds: int
) -> tuple[FloatArray, int]:
    """Finish from flows all at ``base`` (``remaining``: capacity less everything given so far).

    Each round gives every resource its fair level (capacity left over the weighted count of its
    unfrozen flows) and freezes, at once, every resource that is a local bottleneck: none of its
    flows crosses a resource with a lower level. Levels only rise as other flows freeze, so such a
    resource's flows can never get less, and the resource fills at its level: they get exactly that.
    The lowest resource always qualifies, so each round makes progress; rounds are as many as the
    chain of bottlenecks is deep, where filling level by level takes one per distinct level.
    """
    while entries.size:
        rounds += 1
        f, r, w = p.flow[entries], p.resource[entries], p.weight[entries]
        load = np.bincount(r, weights=w, minlength=p.num_resources)
        level = np.maximum(remaining[r], 0.0) / load[r]  # per entry: its resource's extra fair level
        starts = np.concatenate([[True], f[1:] != f[:-1]])
        first = np.flatnonzero(starts)
        segment = np.cumsum(starts) - 1
        lowest = np.minimum.reduceat(level, first)  # per flow: its lowest level
        undercut = lowest[segment] < level * (1 - REL_TOL)
        blocked = np.zeros(p.num_resources, dtype=bool)
        blocked[r[undercut]] = True
        frozen = np.zeros(first.size, dtype=bool)
        frozen[segment[~blocked[r]]] = True
        rate[f[first[frozen]]] = base + lowest[frozen]
        done = frozen[segment]
        remaining -= np.bincount(r[done], weights=w[done] * lowest[segment[done]], minlength=p.num_resources)
        entries = entries[~done]
    return rate, rounds
