"""Max-min fair rates by progressive filling (``filling``), vectorized over a sparse flow x
resource incidence, and kept up to date between the events of a simulation (``MaxMinState``).

``prepare`` sorts the entries by flow and indexes them by resource once; where flows cross about as
many resources each (ECMP), it also lays them out as a slot x flow table (``Prepared.table_res``).
A solve touches only the active flows' entries and the resources they cross, whatever the fabric's
size. Between events, ``MaxMinState`` re-solves only the flows a change can move: those at or above
the level where the old and new allocations first differ (found through per-block maxima of the
rates, without scanning every flow), and of those, when many, only the ones connected to what
changed (exact: the same allocation as a full solve)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.filling import REL_TOL, dense_rounds, distinct, fill, level_rounds, local_rounds
from clustersim.network.flowsim.filling import csr_rows as _rows
from clustersim.network.flowsim.kernel import choose
from clustersim.network.flowsim.topology import BoolArray, FloatArray, IntArray

__all__ = ["REL_TOL", "MaxMinState", "Prepared", "distinct", "max_min_rates", "prepare", "solve"]

DENSE_SLACK = 2.0  # a slot x flow table when its padded size is at most this many times the entries


def _order(keys: IntArray, size: int) -> IntArray:
    """The stable sorting permutation of ``keys`` (all below ``size``): none to do when sorted already,
    numpy's radix sort when they fit 16 bits (several times faster than its merge sort)."""
    if keys.size < 2 or bool(np.all(keys[1:] >= keys[:-1])):
        return np.arange(keys.size)
    return np.argsort(keys.astype(np.uint16) if size <= 1 << 16 else keys, kind="stable")


def _csr(keys: IntArray, size: int) -> tuple[IntArray, IntArray]:
    order = _order(keys, size)
    return np.searchsorted(keys[order], np.arange(size + 1)), order


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
    table_res: IntArray  # (slots, flows): each flow's resources down a column, padded with ``num_resources``
    table_weight: FloatArray  # the weights, 0 in the padding; both (0, 0) where there is no table

    @property
    def has_table(self) -> bool:
        return bool(self.table_res.shape[1] == self.num_flows > 0)


def prepare(
    flow: IntArray, resource: IntArray, weight: FloatArray, num_flows: int, num_resources: int, *, table: bool = True
) -> Prepared:
    """Sort the entries by flow and index them by resource; lay them out as a table too where that
    fits (``DENSE_SLACK``) and ``table`` allows."""
    order = _order(flow, num_flows)
    f, r, w = flow[order], resource[order], weight[order]
    if num_flows and np.bincount(f, minlength=num_flows).min() == 0:
        raise ClusterSimError("a flow touches no resource", field="flow")
    res_ptr, res_order = _csr(r, num_resources)
    flow_ptr = np.searchsorted(f, np.arange(num_flows + 1))
    table_res, table_weight = _table(f, r, w, flow_ptr, num_resources, DENSE_SLACK if table else 0.0)
    return Prepared(f, r, w, flow_ptr, res_ptr, res_order, num_flows, num_resources, table_res, table_weight)


def _table(
    f: IntArray, r: IntArray, w: FloatArray, ptr: IntArray, pad: int, slack: float
) -> tuple[IntArray, FloatArray]:
    """The entries as a slot x flow table (a column per flow) padded with resource ``pad`` (weight 0), or
    (0, 0) arrays when that would take more than ``slack`` times the entries."""
    lens = np.diff(ptr)
    slots = int(lens.max()) if lens.size else 0
    if not f.size or lens.size * slots > slack * f.size:
        return np.zeros((0, 0), dtype=np.int64), np.zeros((0, 0))
    col = np.arange(f.size) - np.repeat(ptr[:-1], lens)
    res = np.full((slots, lens.size), pad, dtype=np.int64)
    weight = np.zeros((slots, lens.size))
    res[col, f] = r
    weight[col, f] = w
    return res, weight


def _compact(values: IntArray, size: int) -> tuple[IntArray, IntArray]:
    """The distinct values (< ``size``) of ``values``, sorted, and each value's index among them: by
    sorting when few, by marking when many."""
    if values.size * 16 < size:
        found = distinct(values)
        return found, found.searchsorted(values)
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
    symmetric collective); if flows are still growing, ``local_rounds`` finishes the job. Both work
    on the active flows' entries and the resources they touch only, whatever the fabric's size.
    """
    rate = np.zeros(p.num_flows)
    entries = _rows(p.flow_ptr, None, np.flatnonzero(active))
    res, r = _compact(p.resource[entries], p.num_resources)
    rounds = fill(p.flow[entries], r, p.weight[entries], capacity[res].astype(np.float64), rate, global_rounds)
    return rate, rounds


WARM_FRACTION = 1.0  # re-solve from scratch when more than this fraction of the active flows must move (0: always)
FILL_STEPS = 16  # Newton steps to the level at which an added flow's resource fills (fewer: a lower bound)
TIE_TOL = 1e-9  # rates within this fraction below the restart level count as at it (rounding of ties)
BLOCK = 64  # flows per block of the rate maxima that find the flows at or above a level
BLOCK_FROM = 4096  # flows from which those maxima are kept (below, a pass over the rates is cheaper)
PRUNE_MIN = 2048  # re-solve only the part connected to the change when at least this many flows are above
PRUNE_DEPTH = 16  # the most breadth-first steps spent finding that part (past them, all are re-solved)
LEVELS_MIN = 4096  # flows re-solved level by level (``level_rounds``) from this many, by local bottlenecks below
WHOLE_FABRIC = 8  # a re-solve works on every resource, not only those it touches, up to this many per table cell


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
    max-min problem of its own, re-solved from the state at ``L`` (by local bottlenecks, or level by
    level when large: ``_warm``): the same allocation as a full ``solve`` (within the tolerances),
    at the cost of the flows above ``L``.
    Those are found through per-block maxima of the rates (an upper bound, made exact for each
    block looked into), not by scanning every flow. The problem above ``L`` splits into the connected
    parts of the graph of its flows and their resources; a part without an added flow or a resource
    of a removed one has the same flows and capacities as before, so the same answer: when many flows
    are above ``L``, only the parts reached from the changed resources are re-solved. When more than
    ``warm_fraction`` of the active flows would move, all are solved again from 0 (``solve``; 0:
    always, the plain method). ``used`` carries each resource's load from update to update.
    """

    __slots__ = (
        "_block_max",
        "_cap_pad",
        "_every",
        "_index",
        "_mark",
        "_rate_blocks",
        "_used_pad",
        "active",
        "capacity",
        "kernel",
        "levels_min",
        "num_active",
        "p",
        "prune_min",
        "rate",
        "rounds",
        "used",
        "warm_fraction",
        "whole_fabric",
    )

    def __init__(
        self,
        p: Prepared,
        capacity: FloatArray,
        *,
        warm_fraction: float = WARM_FRACTION,
        prune_min: int = PRUNE_MIN,
        levels_min: int = LEVELS_MIN,
        whole_fabric: float = WHOLE_FABRIC,
        kernel: bool | None = None,
    ) -> None:
        if not 0.0 <= warm_fraction <= 1.0:
            raise ClusterSimError(
                f"warm_fraction must be in [0, 1], got {warm_fraction}", field="warm_fraction", value=warm_fraction
            )
        self.warm_fraction = warm_fraction
        self.prune_min, self.levels_min, self.whole_fabric = prune_min, levels_min, whole_fabric
        self.kernel = kernel  # the compiled table re-solve: True always, False never, None when it pays (``kernel``)
        self.p = p
        n, size = p.num_flows, p.num_resources
        self._cap_pad = np.zeros(size + 1)  # one more resource: the table's padding (no capacity, no load)
        self._cap_pad[:size] = capacity
        self._used_pad = np.zeros(size + 1)
        self.capacity = self._cap_pad[:size]
        self.used = self._used_pad[:size]
        self.active = np.zeros(n, dtype=bool)
        self._rate_blocks = np.zeros((-(-n // BLOCK), BLOCK))  # the rates, block by block (0 past the last flow)
        self.rate = self._rate_blocks.reshape(-1)[:n]
        self._block_max = np.zeros(self._rate_blocks.shape[0])  # at least the highest rate in each block
        self._mark = np.zeros(size + 1, dtype=bool)  # scratch of ``_connected``, all False between calls
        self._every = np.arange(size)  # every resource (what a re-solve on the whole fabric touched)
        self._index = np.full(size + 1, -1, dtype=np.int64)  # scratch of the compiled re-solve, -1 between calls
        self.rounds = 0
        self.num_active = 0

    def update(self, removed: IntArray, added: IntArray) -> tuple[IntArray, IntArray]:
        """Deactivate ``removed``, activate ``added`` and re-solve; returns the flows whose rate may
        have changed (``added`` among them) and the resources whose load may have changed (repeats
        possible)."""
        p = self.p
        none = np.zeros(0, dtype=np.int64)
        if not removed.size and not added.size:
            return none, none
        level = np.inf
        gone = none
        if removed.size:
            rate = self.rate.take(removed)
            level = float(np.minimum.reduce(rate))
            if p.has_table:  # the padding's load stays 0 (weight 0); it is no resource to report
                table = p.table_res.take(removed, axis=1)
                np.subtract.at(self._used_pad, table, p.table_weight.take(removed, axis=1) * rate)
                gone = table.ravel()
                gone = gone.compress(gone < p.num_resources)
            else:
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
        above = self._above(level * (1 - TIE_TOL))
        if above.size + added.size > limit:
            return self._full(gone)
        growing = np.sort(np.concatenate([above, added])) if added.size else above
        if growing.size >= self.prune_min:
            growing = self._connected(growing, np.concatenate([gone, p.resource[_rows(p.flow_ptr, None, added)]]))
        if not growing.size:
            return none, gone
        old = self.rate.take(growing)
        if added.size:  # the added flows' 0 is no level to restart from
            moving = old > 0
            base = min(level, float(np.minimum.reduce(old[moving]))) if np.logical_or.reduce(moving) else level
        else:
            base = min(level, float(np.minimum.reduce(old)))
        res = self._warm(growing, old, base)
        self._raise_block_max(growing)
        return growing, res if res is self._every else np.concatenate([res, gone])

    def _warm(self, growing: IntArray, old: FloatArray, base: float) -> IntArray:
        """Re-solve the flows ``growing`` (sorted; rates ``old``) from level ``base``, the others
        fixed; update ``used``; return the resources they cross. Many flows: level by level
        (``level_rounds``); fewer: by local bottlenecks, on the table where there is one (numba's
        compiled loop where ``kernel.choose`` picks it: the same arithmetic, the same rates)."""
        p, size = self.p, self.p.num_resources
        if p.has_table and growing.size < self.levels_min:
            compiled = choose(self.kernel, growing.size * p.table_res.shape[0])
            if compiled is not None:
                rounds, crossed = compiled(
                    p.table_res, p.table_weight, growing, base, self._cap_pad, self._used_pad, self.rate, self._index
                )
                self.rounds += rounds
                return crossed
            table = p.table_res.take(growing, axis=1)
            w = p.table_weight.take(growing, axis=1)
            above = (w * (old - base)).ravel()
            if size <= self.whole_fabric * table.size:  # a small fabric: all its resources, nothing to compact
                local = table.ravel()
                remaining = self._cap_pad - self._used_pad + np.bincount(local, weights=above, minlength=size + 1)
                self.rounds = dense_rounds(growing, table, w, remaining, self.rate, base, self.rounds)
                delta = (w * (self.rate.take(growing) - old)).ravel()
                self._used_pad += np.bincount(local, weights=delta, minlength=size + 1)
                return self._every
            res, local = _compact(table.ravel(), size + 1)  # a large one: only the resources these flows cross
            remaining = self._remaining(res, local, above)
            self.rounds = dense_rounds(growing, local.reshape(table.shape), w, remaining, self.rate, base, self.rounds)
            delta = (w * (self.rate.take(growing) - old)).ravel()
            self._used_pad[res] += np.bincount(local, weights=delta, minlength=res.size)
            return res[:-1] if res[-1] == size else res
        if growing.size == p.num_flows:  # every flow: the incidence as it is
            f, w, res, local = p.flow, p.weight, np.arange(size), p.resource
        else:
            entries = _rows(p.flow_ptr, None, growing)
            f, w = p.flow[entries], p.weight[entries]
            res, local = _compact(p.resource[entries], size)
        old_e = self.rate[f]
        remaining = self._remaining(res, local, w * (old_e - base))
        if growing.size < self.levels_min:
            self.rounds = local_rounds(f, local, w, remaining, self.rate, base, self.rounds)
        else:
            if growing.size == p.num_flows:
                by_flow, by_res = (f, local, w, p.flow_ptr), (p.res_ptr, p.res_order)
            else:
                lens = p.flow_ptr[growing + 1] - p.flow_ptr[growing]
                by_flow = (np.repeat(np.arange(growing.size), lens), local, w, np.concatenate([[0], np.cumsum(lens)]))
                counts = np.bincount(local, minlength=res.size)
                by_res = (np.concatenate([[0], np.cumsum(counts)]), _order(local, res.size))
            self.rounds = level_rounds(
                by_flow, by_res, remaining, self._cap_pad[res], growing, self.rate, base, self.rounds
            )
        self._used_pad[res] += np.bincount(local, weights=w * (self.rate[f] - old_e), minlength=res.size)
        return res

    def _remaining(self, res: IntArray, local: IntArray, above: FloatArray) -> FloatArray:
        """Capacity of ``res`` left to the flows re-solved beyond ``base`` each: ``above`` is each of
        their entries' (``local``) weight times the flow's old rate less ``base``."""
        return self._cap_pad[res] - self._used_pad[res] + np.bincount(local, weights=above, minlength=res.size)

    def _above(self, threshold: float) -> IntArray:
        """The active flows at ``threshold`` or faster, sorted (inactive flows have rate 0, and
        ``threshold`` > 0); each block looked into gets its exact maximum. Up to ``BLOCK_FROM``
        flows, one pass over the rates (cheaper than the bookkeeping)."""
        if self.p.num_flows <= BLOCK_FROM:
            return (self.rate >= threshold).nonzero()[0]
        blocks = (self._block_max >= threshold).nonzero()[0]
        if not blocks.size:
            return np.zeros(0, dtype=np.int64)
        rates = self._rate_blocks[blocks]
        self._block_max[blocks] = np.maximum.reduce(rates, axis=1)
        k = (rates >= threshold).ravel().nonzero()[0]
        return blocks[k // BLOCK] * BLOCK + k % BLOCK

    def _raise_block_max(self, flows: IntArray) -> None:
        """Keep ``_block_max`` an upper bound after new rates for ``flows`` (sorted)."""
        if self.p.num_flows <= BLOCK_FROM:
            return
        block = flows // BLOCK
        starts = np.concatenate([[True], block[1:] != block[:-1]]).nonzero()[0]
        top = np.maximum.reduceat(self.rate[flows], starts)
        np.maximum(self._block_max[block[starts]], top, out=top)
        self._block_max[block[starts]] = top

    def _connected(self, flows: IntArray, seeds: IntArray) -> IntArray:
        """Those of ``flows`` (sorted) connected to the ``seeds`` resources through resources they
        cross; all of them when that takes more than ``PRUNE_DEPTH`` breadth-first steps."""
        p, mark = self.p, self._mark
        if p.has_table:
            table = p.table_res.take(flows, axis=1)
        else:
            entries = _rows(p.flow_ptr, None, flows)
            lens = p.flow_ptr[flows + 1] - p.flow_ptr[flows]
            res, first = p.resource[entries], np.cumsum(lens) - lens
        seen = np.zeros(flows.size, dtype=bool)
        mark[seeds] = True
        for _ in range(PRUNE_DEPTH):
            if p.has_table:
                hit = np.logical_or.reduce(mark[table], axis=0) & ~seen
                if not hit.any():
                    break
                mark[table[:, hit]] = True
            else:
                hit = np.logical_or.reduceat(mark[res], first) & ~seen
                if not hit.any():
                    break
                mark[res[np.repeat(hit, lens)]] = True
            mark[-1] = False  # the table's padding joins nothing
            seen |= hit
        else:
            seen[:] = True
        mark[:] = False
        return flows[seen]

    def _full(self, gone: IntArray) -> tuple[IntArray, IntArray]:
        """Solve every active flow again from 0."""
        act = np.flatnonzero(self.active)
        self.rate[:] = 0.0
        self._used_pad[:] = 0.0
        res = self._warm(act, np.zeros(act.size), 0.0) if act.size else np.zeros(0, dtype=np.int64)
        self._block_max[:] = self._rate_blocks.max(axis=1)
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
