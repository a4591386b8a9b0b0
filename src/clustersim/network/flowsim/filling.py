"""Progressive filling, the rounds themselves: level by level (``fill``) and by local bottlenecks
(``local_rounds`` on entries sorted by flow, ``dense_rounds`` on a flow x slot table).

Progressive filling raises every unfrozen flow together and freezes the flows of each resource as
it fills. Done one bottleneck level at a time, a fabric with many distinct levels (ECMP's hash
collisions make hundreds) needs as many rounds; so after a few such rounds (all a symmetric
collective needs) each round freezes every resource that is a local bottleneck at once: rounds as
deep as the chain of bottlenecks, not as many as the levels. The result is the unique max-min fair
allocation: no flow can grow without shrinking one that is no faster.

Where every flow crosses about as many resources as the next (ECMP: one path each), the entries are
a table, one column per flow padded with a resource of no load (``dense_rounds``): a flow's lowest
level is a column minimum, which numpy does many times faster than the segmented ``minimum.reduceat``
the ragged layout needs (``local_rounds``); the allocation is the same.
"""

from __future__ import annotations

import numpy as np

from clustersim.network.flowsim.topology import FloatArray, IntArray

REL_TOL = 1e-9  # a resource within this fraction of its capacity is full
LOAD_TOL = 1e-9  # a weighted flow count below this is empty (rounding of the subtractions)
UNREACHED = 1e250  # the table padding's capacity: a level no resource reaches (finite: no inf / 0)


# The helpers below run at every event on small arrays: they call ndarray methods and ufuncs, not
# numpy's Python-level wrappers (np.sort, np.repeat, ndarray.sum), which cost as much as the work.


def distinct(values: IntArray) -> IntArray:
    """The distinct values, sorted (by sorting: numpy 2.4's hashing ``np.unique`` is 50 times slower)."""
    s = values.copy()
    s.sort()
    return s[np.concatenate([[True], s[1:] != s[:-1]])] if s.size else s


def csr_rows(ptr: IntArray, order: IntArray | None, rows: IntArray) -> IntArray:
    """Entries (indices into the incidence) of ``rows`` of a CSR (``ptr``, ``order``), row by row."""
    lens = ptr[rows + 1] - ptr[rows]
    total = int(np.add.reduce(lens))
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    first: IntArray = (ptr[rows] - lens.cumsum() + lens).repeat(lens) + np.arange(total, dtype=np.int64)
    return first if order is None else order[first]


def level_rounds(
    by_flow: tuple[IntArray, IntArray, FloatArray, IntArray],
    by_res: tuple[IntArray, IntArray],
    remaining: FloatArray,
    cap: FloatArray,
    flows: IntArray,
    rate: FloatArray,
    base: float,
    rounds: int,
) -> int:
    """Progressive filling level by level from ``base``, each round's work on the resources and the
    flows that fill in it, not on every entry: for large problems with many distinct levels (an ECMP
    all-to-all has hundreds, each a round whatever the criterion, since every resource reaches every
    other through one flow).

    ``by_flow``: the entries' flow (``0..flows.size-1``), resource and weight, sorted by flow, and the
    flows' CSR pointer; ``by_res``: the CSR (pointer, order) of the same entries by resource;
    ``remaining``: capacity left beyond ``base`` for these flows (updated); ``cap``: the tolerance's
    scale. Sets ``rate[flows]``; returns the rounds.
    """
    ent_flow, ent_res, ent_w, flow_ptr = by_flow
    res_ptr, res_order = by_res
    size = remaining.size
    load = np.asarray(np.bincount(ent_res, weights=ent_w, minlength=size), dtype=np.float64)
    slack = REL_TOL * cap
    fair = np.full(size, np.inf)  # each resource's fill level with every flow on it growing
    full_at = np.full(size, np.inf)  # the level from which it counts as full (within ``REL_TOL``)
    _levels(np.arange(size), remaining, load, slack, fair, full_at)
    growing = np.ones(flows.size, dtype=bool)
    level = 0.0
    while True:
        lowest = float(np.minimum.reduce(fair))
        if lowest == np.inf:
            return rounds
        rounds += 1
        level = max(level, lowest)
        full = (full_at <= level).nonzero()[0]
        on = ent_flow[csr_rows(res_ptr, res_order, full)]
        frozen = _marked(on[growing[on]], flows.size)
        growing[frozen] = False
        rate[flows[frozen]] = base + level
        e = csr_rows(flow_ptr, None, frozen)
        touched = _marked(ent_res[e], size)  # ``full`` among them: every flow on a full resource froze
        frozen_load = np.bincount(touched.searchsorted(ent_res[e]), weights=ent_w[e], minlength=touched.size)
        load[touched] -= frozen_load
        remaining[touched] -= frozen_load * level
        load[full] = 0.0
        _levels(touched, remaining, load, slack, fair, full_at)


def _marked(values: IntArray, size: int) -> IntArray:
    """The distinct ``values`` (< ``size``), sorted: by sorting when few, by marking when many."""
    if values.size * 8 < size:
        return distinct(values)
    mark = np.zeros(size, dtype=bool)
    mark[values] = True
    return mark.nonzero()[0]


def _levels(
    res: IntArray, remaining: FloatArray, load: FloatArray, slack: FloatArray, fair: FloatArray, full_at: FloatArray
) -> None:
    """Set ``fair`` and ``full_at`` of resources ``res`` from their ``remaining`` and ``load`` (inf
    where no flow grows)."""
    busy = res[load[res] > LOAD_TOL]
    fair[res] = np.inf
    full_at[res] = np.inf
    fair[busy] = np.maximum(remaining[busy], 0.0) / load[busy]
    full_at[busy] = fair[busy] - slack[busy] / load[busy]


def fill(f: IntArray, r: IntArray, w: FloatArray, cap: FloatArray, rate: FloatArray, global_rounds: int) -> int:
    """Progressive filling of entries (``f``, ``r``, ``w``; sorted by flow) on resources ``0..cap.size-1``
    from 0: sets ``rate``, returns the rounds. The first ``global_rounds`` rounds fill to the lowest
    level everywhere (cheap, and enough for a symmetric collective); ``local_rounds`` finishes."""
    remaining = cap.copy()  # capacity less the frozen flows' load; the growing flows all run at ``level``
    load = np.bincount(r, weights=w, minlength=cap.size)
    level, rounds = 0.0, 0
    while f.size:
        if rounds == global_rounds:
            remaining -= load * level  # the growing flows' share so far, then finish locally
            return local_rounds(f, r, w, remaining, rate, level, rounds)
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


def local_rounds(
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


def dense_rounds(
    flows: IntArray, r: IntArray, w: FloatArray, remaining: FloatArray, rate: FloatArray, base: float, rounds: int
) -> int:
    """``local_rounds`` on a table: column ``i`` holds the resources (``r``) and weights (``w``) of
    flow ``flows[i]``, padded with a resource that no flow loads (given a level no resource reaches,
    so it never binds and never freezes a flow). Same rounds, same allocation, fewer numpy calls a
    round; the reductions run down the columns (slots x flows: numpy reduces along the first axis of a
    short, wide table several times faster than along the second of a tall, narrow one)."""
    if not flows.size:
        return rounds
    size = remaining.size
    rem = np.maximum(remaining, 0.0)
    rem[np.bincount(r.ravel(), weights=w.ravel(), minlength=size) == 0] = UNREACHED  # the padding: level inf
    up = 1 + REL_TOL
    frozen_flows, frozen_levels = [], []
    with np.errstate(divide="ignore", invalid="ignore"):  # resources whose flows all froze: 0 / 0, unread
        while True:  # ufunc methods, .take, .compress: numpy's Python wrappers cost as much as the work here
            rounds += 1
            entries = r.ravel()
            level = (rem / np.bincount(entries, weights=w.ravel(), minlength=size)).take(r)
            lowest = np.minimum.reduce(level, axis=0)
            blocked = np.zeros(size, dtype=bool)
            blocked[r[level > lowest * up]] = True
            stay = np.logical_and.reduce(blocked.take(r), axis=0)
            if not np.logical_or.reduce(stay):  # every flow left freezes: the last round
                break
            go = ~stay
            frozen_flows.append(flows.compress(go))
            frozen_levels.append(lowest.compress(go))
            rem -= np.bincount(entries, weights=(w * (lowest * go)).ravel(), minlength=size)
            np.maximum(rem, 0.0, out=rem)
            flows, r, w = flows.compress(stay), r.compress(stay, axis=1), w.compress(stay, axis=1)
    frozen_flows.append(flows)
    frozen_levels.append(lowest)
    rate[np.concatenate(frozen_flows)] = base + np.concatenate(frozen_levels)
    return rounds
