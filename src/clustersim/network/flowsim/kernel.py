"""The warm re-solve on the slot x flow table (``MaxMinState._warm``, ``dense_rounds``) as one loop
compiled with numba, where numba is installed (the ``fast`` extra); numpy's path otherwise.

Why the dependency: with many distinct completion times each event re-solves a few hundred flows
(~200 x 4 slots in ~6.7 rounds on the 1,000-flow workload), and numpy's per-call cost on arrays that
small is most of the time. The compiled loop does the same arithmetic in the same order (the same
rates to the last bit in the tests) in ~60 us an event: the 1,000-flow distinct-completions run of
``benchmarks/bench_flowsim_speed.py`` goes from 0.47 s to 0.17 s of CPU (SimGrid: 0.27 s; 2,000 flows
0.96 -> 0.50 s, 4,000 flows 3.3 -> 1.7 s).

Loading it costs 0.7-1 s of CPU once per process (importing numba ~0.45 s, reading the compiled code from
numba's cache ~0.3 s; the first compile ever, which writes that cache, ~4-5 s). So a process runs numpy's
path until it has re-solved ``KERNEL_FROM_ENTRIES`` table entries, about as much numpy time as the load
costs, then loads the kernel: a short simulation never pays for it, a long one at most doubles what it
spent before the switch. ``choose`` is the one place that decides.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.filling import REL_TOL, UNREACHED
from clustersim.network.flowsim.topology import FloatArray, IntArray

# Table entries (flows re-solved x slots) numpy re-solves in a process before the kernel loads: at ~0.45 us
# of numpy time per entry (all its rounds; 0.36 s for the 1,000-flow run's 800k), ~0.7 s, what loading costs.
KERNEL_FROM_ENTRIES = 1_500_000

WarmTable = Callable[..., tuple[int, IntArray]]

_loaded: dict[str, Any] = {}  # "kernel": the compiled function, or None when numba is absent
_numpy_entries = 0  # table entries re-solved by numpy in this process so far


def load() -> WarmTable | None:
    """The compiled kernel (numba imported and the kernel compiled or read from its cache, once per
    process), or None when numba is not installed."""
    if "kernel" not in _loaded:
        try:
            numba = importlib.import_module("numba")
        except ImportError:
            _loaded["kernel"] = None
        else:
            compiled = numba.njit(cache=True, error_model="numpy", nogil=True)(warm_table)
            zero = np.zeros(1, dtype=np.int64)  # one flow on resource 0: compile (or read the cache) now
            compiled(zero[None], np.ones((1, 1)), zero, 0.0, np.ones(2), np.zeros(2), np.zeros(1), np.full(2, -1))
            _loaded["kernel"] = compiled
    kernel: WarmTable | None = _loaded["kernel"]
    return kernel


def choose(kernel: bool | None, entries: int) -> WarmTable | None:
    """The kernel for a re-solve of ``entries`` table entries, or None for numpy's path. ``kernel``:
    True, always (refused when numba is absent); False, never; None, once this process has re-solved
    ``KERNEL_FROM_ENTRIES`` entries with numpy (and numba is installed)."""
    global _numpy_entries
    if kernel is None:
        if "kernel" in _loaded or _numpy_entries >= KERNEL_FROM_ENTRIES:
            found = load()
            if found is not None:
                return found
        _numpy_entries += entries
        return None
    if not kernel:
        return None
    found = load()
    if found is None:
        raise ClusterSimError(
            "kernel=True needs numba (pip install 'clustersim[fast]'); it is not installed", field="kernel", value=True
        )
    return found


def warm_table(
    table_res: IntArray,
    table_w: FloatArray,
    growing: IntArray,
    base: float,
    cap_pad: FloatArray,
    used_pad: FloatArray,
    rate: FloatArray,
    index: IntArray,
) -> tuple[int, IntArray]:
    """Re-solve flows ``growing`` (their columns of ``table_res``/``table_w``; padding: the last
    resource of ``cap_pad``) from level ``base`` by local bottlenecks, every other flow fixed: set
    ``rate[growing]``, add the change to ``used_pad``; return the rounds and the resources crossed.

    ``dense_rounds`` after ``_warm``'s set-up, entry for entry, summed in the same order (slot by slot,
    as ``np.bincount`` sums the raveled table). ``index``: scratch, -1 everywhere on entry and exit.
    Plain Python over arrays, compiled by ``load``."""
    slots, m = table_res.shape[0], growing.size
    pad = cap_pad.size - 1
    r = np.empty((slots, m), np.int64)  # each entry's resource, numbered among those crossed
    w = np.empty((slots, m))
    old = np.empty(m)
    res = np.empty(slots * m + 1, np.int64)  # the resources crossed, global numbers
    n_res = 0
    for j in range(m):
        old[j] = rate[growing[j]]
    for s in range(slots):
        for j in range(m):
            g = table_res[s, growing[j]]
            if index[g] < 0:
                index[g] = n_res
                res[n_res] = g
                n_res += 1
            r[s, j] = index[g]
            w[s, j] = table_w[s, growing[j]]
    above = np.zeros(n_res)  # the re-solved flows' load beyond ``base``, given back
    w_sum = np.zeros(n_res)
    for s in range(slots):
        for j in range(m):
            above[r[s, j]] += w[s, j] * (old[j] - base)
            w_sum[r[s, j]] += w[s, j]
    rem = np.empty(n_res)
    for k in range(n_res):
        rem[k] = max(cap_pad[res[k]] - used_pad[res[k]] + above[k], 0.0)
        if w_sum[k] == 0.0:
            rem[k] = UNREACHED  # the padding, never a bottleneck
    alive = np.arange(m)  # the columns still growing, in order
    n_alive = m
    lowest = np.empty(m)
    stay = np.empty(m, np.bool_)
    load = np.empty(n_res)
    level = np.empty(n_res)
    blocked = np.empty(n_res, np.bool_)
    up = 1.0 + REL_TOL
    rounds = 0
    while True:
        rounds += 1
        load[:] = 0.0
        for s in range(slots):
            for a in range(n_alive):
                load[r[s, alive[a]]] += w[s, alive[a]]
        for k in range(n_res):
            level[k] = rem[k] / load[k]  # the fair level of each resource (inf or nan where none grows)
        for a in range(n_alive):
            j = alive[a]
            low = np.inf
            for s in range(slots):
                low = min(low, level[r[s, j]])
            lowest[j] = low
        blocked[:] = False
        for s in range(slots):
            for a in range(n_alive):
                j = alive[a]
                if level[r[s, j]] > lowest[j] * up:
                    blocked[r[s, j]] = True
        staying = 0
        for a in range(n_alive):
            j = alive[a]
            stay[j] = True
            for s in range(slots):
                stay[j] = stay[j] and blocked[r[s, j]]
            if stay[j]:
                staying += 1
        if staying == 0:  # every flow left freezes: the last round
            break
        load[:] = 0.0  # now what the freezing flows take
        for s in range(slots):
            for a in range(n_alive):
                j = alive[a]
                if not stay[j]:
                    load[r[s, j]] += w[s, j] * lowest[j]
        for k in range(n_res):
            rem[k] = max(rem[k] - load[k], 0.0)
        kept = 0
        for a in range(n_alive):
            j = alive[a]
            if stay[j]:
                alive[kept] = j
                kept += 1
            else:
                rate[growing[j]] = base + lowest[j]
        n_alive = kept
    for a in range(n_alive):
        rate[growing[alive[a]]] = base + lowest[alive[a]]
    delta = np.zeros(n_res)
    for s in range(slots):
        for j in range(m):
            delta[r[s, j]] += w[s, j] * (rate[growing[j]] - old[j])
    crossed = np.empty(n_res, np.int64)
    n_crossed = 0
    for k in range(n_res):
        used_pad[res[k]] += delta[k]
        index[res[k]] = -1
        if res[k] != pad:
            crossed[n_crossed] = res[k]
            n_crossed += 1
    return rounds, crossed[:n_crossed]
