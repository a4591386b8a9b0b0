"""Max-min fair rates by progressive filling, vectorized over a sparse flow x resource incidence.

Progressive filling raises every unfrozen flow together and freezes the flows of each resource as
it fills. Done one bottleneck level at a time, a fabric with many distinct levels (ECMP's hash
collisions make hundreds) needs as many rounds; so after a few such rounds (all a symmetric
collective needs) each round freezes every resource that is a local bottleneck at once
(``_local_rounds``): a few ``np.bincount`` / ``np.minimum.reduceat`` passes over the unfrozen
entries (sorted by flow once, in ``prepare``), with rounds as deep as the chain of bottlenecks,
not as many as the levels. The result is the unique max-min fair allocation: no flow can grow
without shrinking one that is no faster. A solve touches only the active flows' entries and the
resources they cross, whatever the fabric's size.

Between events of a simulation, ``MaxMinState`` re-solves only the flows a change can move: those
above the level where the old and new allocations first differ, connected to what changed (exact:
the same allocation as a full solve)."""

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


def distinct(values: IntArray) -> IntArray:
    """The distinct values, sorted (by sorting: numpy 2.4's hashing ``np.unique`` is 50 times slower)."""
    s = np.sort(values)
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if s.size else s


def _compact(values: IntArray, size: int) -> tuple[IntArray, IntArray]:
    """The distinct values (< ``size``) of ``values``, sorted, and each value's index among them: by
    sorting when few, by marking when many."""
    if values.size * 16 < size:
        found = distinct(values)
        return found, np.searchsorted(found, values).astype(np.int64)
    mark = np.zeros(size, dtype=bool)
    mark[values] = True
    found = np.flatnonzero(mark)
    index = np.empty(size, dtype=np.int64)
    index[found] = np.arange(found.size)
    return found, index[values]


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
    symmetric collective); if flows are still growing, ``_local_rounds`` finishes the job. Both work
    on the active flows' entries and the resources they touch only, whatever the fabric's size.
    """
    rate = np.zeros(p.num_flows)
    entries = _rows(p.flow_ptr, None, np.flatnonzero(active))
    res, r = _compact(p.resource[entries], p.num_resources)
    rounds = _fill(p.flow[entries], r, p.weight[entries], capacity[res].astype(np.float64), rate, global_rounds)
    return rate, rounds


def _fill(f: IntArray, r: IntArray, w: FloatArray, cap: FloatArray, rate: FloatArray, global_rounds: int) -> int:
    """Progressive filling of entries (``f``, ``r``, ``w``; sorted by flow) on resources ``0..cap.size-1``
    from 0: sets ``rate``, returns the rounds."""
    remaining = cap.copy()  # capacity less the frozen flows' load; the growing flows all run at ``level``
    load = np.bincount(r, weights=w, minlength=cap.size)
    level, rounds = 0.0, 0
    while f.size:
        if rounds == global_rounds:
            remaining -= load * level  # the growing flows' share so far, then finish locally
            return _local_rounds(f, r, w, remaining, rate, level, rounds)
        busy = load > LOAD_TOL
        if not busy.any():
            break
        rounds += 1
        level = max(level, float((np.maximum(remaining[busy], 0.0) / load[busy]).min()))
        full = busy & (remaining - load * level <= REL_TOL * cap)
        starts = np.concatenate([[True], f[1:] != f[:-1]])
        segment = np.cumsum(starts) - 1
        frozen = np.zeros(int(segment[-1]) + 1, dtype=bool)
        frozen[segment[full[r]]] = True  # a flow freezes with any resource of it that filled
        rate[f[np.flatnonzero(starts)[frozen]]] = level
        done = frozen[segment]
        frozen_load = np.bincount(r[done], weights=w[done], minlength=cap.size)
        load -= frozen_load
        remaining -= frozen_load * level
        load[full] = 0.0
        keep = ~done
        f, r, w = f[keep], r[keep], w[keep]
    return rounds


def _local_rounds(
    f: IntArray, r: IntArray, w: FloatArray, remaining: FloatArray, rate: FloatArray, base: float, rounds: int
) -> int:
    """Finish entries (``f``, ``r``, ``w``, sorted by flow) of flows all at ``base``; ``remaining``
    (indexed by ``r``): capacity less everything given so far. Sets ``rate``; returns the rounds.

    Each round gives every resource its fair level (capacity left over the weighted count of its
    unfrozen flows) and freezes, at once, every resource that is a local bottleneck: none of its
    flows crosses a resource with a lower level. Levels only rise as other flows freeze, so such a
    resource's flows can never get less, and the resource fills at its level: they get exactly that.
    The lowest resource always qualifies, so each round makes progress; rounds are as many as the
    chain of bottlenecks is deep, where filling level by level takes one per distinct level.
    """
    while f.size:
        rounds += 1
        load = np.bincount(r, weights=w, minlength=remaining.size)
        level = np.maximum(remaining[r], 0.0) / load[r]  # per entry: its resource's extra fair level
        starts = np.concatenate([[True], f[1:] != f[:-1]])
        first = np.flatnonzero(starts)
        segment = np.cumsum(starts) - 1
        lowest = np.minimum.reduceat(level, first)  # per flow: its lowest level
        undercut = lowest[segment] < level * (1 - REL_TOL)
        blocked = np.zeros(remaining.size, dtype=bool)
        blocked[r[undercut]] = True
        frozen = np.zeros(first.size, dtype=bool)
        frozen[segment[~blocked[r]]] = True
        rate[f[first[frozen]]] = base + lowest[frozen]
        done = frozen[segment]
        remaining -= np.bincount(r[done], weights=w[done] * lowest[segment[done]], minlength=remaining.size)
        keep = ~done
        f, r, w = f[keep], r[keep], w[keep]
    return rounds


WARM_FRACTION = 0.5  # re-solve from scratch when more than this fraction of the active flows must move (0: always)
FILL_STEPS = 16  # Newton steps to the level at which an added flow's resource fills (fewer: a lower bound)
TIE_TOL = 1e-9  # rates within this fraction below the restart level count as at it (rounding of ties)


class MaxMinState:
    """Max-min rates of a changing set of active flows, each change re-solved only where the old and
    the new allocation can differ.

    Progressive filling raises all flows together and freezes them as resources fill; a flow's rate
    is the level at which it froze. Take away flows and add others. Below level ``L``, the smallest
    of (the removed flows' rates; the level at which each resource of an added flow would fill with
    the added flows growing and every other flow capped at its old rate), both runs freeze the same
    flows at the same levels: a resource crossed by a removed flow filled at or above that flow's
    rate, it only gets emptier, and one crossed by an added flow does not fill below ``L`` by the
    definition of ``L``; every other resource sees the same flows. So the flows below ``L`` keep
    their rates. From ``L`` on, the flows above it (all at ``L``) share what the others leave: a
    max-min problem of its own, which splits into the connected parts of the graph of those flows
    and their resources. A part without an added flow or a resource of a removed one has the same
    flows and the same capacities as before, so the same answer. Only the parts reached from the
    changed resources are re-solved, from the state at ``L`` (``_local_rounds``): the same
    allocation as a full ``solve`` (within the tolerances), at the cost of the flows that move. When
    more than ``warm_fraction`` of the active flows would move, all are solved again (``solve``).
    ``used`` carries each resource's load from update to update.
    """

    __slots__ = (
        "_seen_flow",
        "_seen_res",
        "active",
        "capacity",
        "num_active",
        "p",
        "rate",
        "rounds",
        "used",
        "warm_fraction",
    )

    def __init__(self, p: Prepared, capacity: FloatArray, *, warm_fraction: float = WARM_FRACTION) -> None:
        if not 0.0 <= warm_fraction <= 1.0:
            raise ClusterSimError(
                f"warm_fraction must be in [0, 1], got {warm_fraction}", field="warm_fraction", value=warm_fraction
            )
        self.warm_fraction = warm_fraction
        self.p = p
        self.capacity = capacity.astype(np.float64, copy=True)
        self.active = np.zeros(p.num_flows, dtype=bool)
        self.rate = np.zeros(p.num_flows)
        self.used = np.zeros(p.num_resources)
        self.rounds = 0
        self.num_active = 0
        self._seen_flow = np.zeros(p.num_flows, dtype=bool)  # scratch of ``_reach``, all False between calls
        self._seen_res = np.zeros(p.num_resources, dtype=bool)

    def update(self, removed: IntArray, added: IntArray) -> tuple[IntArray, IntArray]:
        """Deactivate ``removed``, activate ``added`` and re-solve; returns the flows whose rate may
        have changed (``added`` among them) and the resources whose load may have changed (repeats
        possible)."""
        p = self.p
        if not removed.size and not added.size:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        level = np.inf
        gone = np.zeros(0, dtype=np.int64)
        if removed.size:
            level = float(self.rate[removed].min())
            hit = _rows(p.flow_ptr, None, removed)
            gone = p.resource[hit]
            np.subtract.at(self.used, gone, p.weight[hit] * self.rate[p.flow[hit]])
            self.active[removed] = False
            self.rate[removed] = 0.0
            self.num_active -= removed.size
        persisting = self.num_active
        limit = int(self.warm_fraction * (persisting + added.size))  # the most flows a warm re-solve moves
        if added.size and persisting and added.size <= limit:
            level = min(level, self._fill_level(added))
        self.active[added] = True
        self.num_active += added.size
        if not persisting or not self.warm_fraction or added.size > limit or level <= 0:
            return self._full(gone)
        seeds = np.concatenate([gone, p.resource[_rows(p.flow_ptr, None, added)]])
        growing = self._reach(seeds, level * (1 - TIE_TOL), limit)
        if growing is None:
            return self._full(gone)
        entries = _rows(p.flow_ptr, None, growing)
        f, w = p.flow[entries], p.weight[entries]
        res, local = _compact(p.resource[entries], p.num_resources)
        old = self.rate[f]
        moving = old > 0
        base = min(level, float(old[moving].min())) if moving.any() else level
        remaining = (
            self.capacity[res]
            - self.used[res]
            + np.bincount(local, weights=w * old, minlength=res.size)
            - base * np.bincount(local, weights=w, minlength=res.size)
        )
        self.rounds = _local_rounds(f, local, w, remaining, self.rate, base, self.rounds)
        self.used[res] += np.bincount(local, weights=w * (self.rate[f] - old), minlength=res.size)
        return growing, np.concatenate([res, gone])

    def _reach(self, seeds: IntArray, threshold: float, limit: int) -> IntArray | None:
        """The active flows at or above ``threshold`` (or just added: at 0) connected to the ``seeds``
        resources through resources they cross, sorted; None when more than ``limit``."""
        p, seen_flow, seen_res = self.p, self._seen_flow, self._seen_res
        found: list[IntArray] = []
        count = 0
        res = distinct(seeds)
        visited = [res]
        seen_res[res] = True
        while res.size and count <= limit:
            f = p.flow[_rows(p.res_ptr, p.res_order, res)]
            x = self.rate[f]
            f = distinct(f[self.active[f] & ~seen_flow[f] & ((x >= threshold) | (x == 0))])
            seen_flow[f] = True
            found.append(f)
            count += f.size
            r = p.resource[_rows(p.flow_ptr, None, f)]
            res = distinct(r[~seen_res[r]])
            seen_res[res] = True
            visited.append(res)
        flows = np.sort(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)
        seen_flow[flows] = False
        for r in visited:
            seen_res[r] = False
        return flows if count <= limit else None

    def _full(self, gone: IntArray) -> tuple[IntArray, IntArray]:
        p = self.p
        act = np.flatnonzero(self.active)
        e = _rows(p.flow_ptr, None, act)
        f, w = p.flow[e], p.weight[e]
        res, local = _compact(p.resource[e], p.num_resources)
        self.rate = np.zeros(p.num_flows)
        self.rounds = _fill(f, local, w, self.capacity[res], self.rate, GLOBAL_ROUNDS) + self.rounds
        self.used[gone] = 0.0
        self.used[res] = np.bincount(local, weights=w * self.rate[f], minlength=res.size)
        return act, np.concatenate([res, gone])

    def _fill_level(self, added: IntArray) -> float:
        """A lower bound, exact unless it took over ``FILL_STEPS`` steps, of the lowest level at which
        a resource of ``added`` fills with them growing from 0 and every other active flow capped at
        its rate. Each resource's load at level x (the sum of min(rate, x) x weight, plus x times the
        added weight) is concave, piecewise linear and increasing: Newton's steps from a level below
        the crossing stay below it (the tangent lies above the load) and land on it in as many
        steps as pieces crossed."""
        p = self.p
        e = _rows(p.flow_ptr, None, added)
        res, local = _compact(p.resource[e], p.num_resources)
        new_w = np.bincount(local, weights=p.weight[e], minlength=res.size)
        lens = p.res_ptr[res + 1] - p.res_ptr[res]
        old = _rows(p.res_ptr, p.res_order, res)
        owner = np.repeat(np.arange(res.size), lens)
        keep = self.active[p.flow[old]]
        old, owner = old[keep], owner[keep]
        rate, w = self.rate[p.flow[old]], p.weight[old]
        cap = self.capacity[res]
        level = cap / (new_w + np.bincount(owner, weights=w, minlength=res.size))  # every flow still growing
        for _ in range(FILL_STEPS):
            capped = rate < level[owner]
            load = level * new_w + np.bincount(
                owner, weights=w * np.where(capped, rate, level[owner]), minlength=res.size
            )
            slope = new_w + np.bincount(owner, weights=w * ~capped, minlength=res.size)
            step = np.maximum(cap - load, 0.0) / slope
            level += step
            if np.all(step <= REL_TOL * level):
                break
        return float(level.min())
