"""Poisson background on a drop-tail FIFO port, replayed up to the instant a flow packet reaches it.

Background packets are not events: ``links.Network`` asks ``BackgroundReplay.replay`` to apply the
arrivals due by now to the port's backlog (its ``busy_until``), in order, each queued behind the
backlog or dropped where it would overrun the buffer. Gaps are drawn in batches from the port's own
generator; position t of a batch arrives at ``offset + R[t]`` (``R`` the batch's running sum of gaps).

Most replays cross tens to thousands of arrivals, so they jump over them in O(log n) where no arrival
can be dropped. All packets have one service time S, so with ``c[t] = R[t] - t S`` the backlog's end
after positions i..n-1 is Lindley's ``n S + offset + max(B', max c[i..n-1])``, where ``B' = busy - i S
- offset``. Since the ``base`` (where the last drop, jump or batch left off) no arrival was dropped,
so ``B' >= max c[base..i-1]`` and the maximum is a prefix maximum from ``base`` (``_peak``). The backlog
an arrival j meets is ``max(B', max c[i..j-1]) - c[j]``; none in i..n-1 overruns the buffer when
``B' - min c[i..]`` (a suffix minimum of the batch, ``_floor``) and the running maximum of
``max c[base..j-1] - c[j]`` (``_dip``) stay within it. Otherwise the arrivals go one at a time, as
before, with the same result: ``tests/network/transport/test_background_bulk.py`` checks it.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

import numpy as np

from clustersim.network.transport.engine import UNIFORM_BATCH

BACKGROUND_WINDOW = 2000  # mean gaps replayed at most after an idle spell
JUMP_GAPS = 6  # a replay over fewer mean gaps than this goes one arrival at a time (as fast, there)
REBASE_SPAN = 256  # positions the running maxima cover at least (more as replays reach further)
_LOW = -(1 << 62)  # below any c[t]: "no arrival before"


def _int64s(values: np.ndarray) -> array[int]:
    """An int64 array as ``array('q')``: indexing it gives Python ints, fast."""
    out = array("q")
    out.frombytes(np.ascontiguousarray(values, dtype=np.int64).tobytes())
    return out


class BackgroundReplay:
    """One port's Poisson background: packets of one service time at a mean gap, drawn from ``rng``."""

    def __init__(self, rng: np.random.Generator, mean_gap_ps: float, service_ps: int, buffer_ps: int) -> None:
        self.rng = rng
        self.mean_gap_ps = mean_gap_ps
        self.service_ps = service_ps
        self.room_ps = buffer_ps - service_ps  # the most backlog an arrival may find and still be queued
        self.window_ps = int(BACKGROUND_WINDOW * mean_gap_ps)
        self.jumps = True  # False: one arrival at a time (the reference the jumps are checked against)
        self.at = 0  # the current arrival's position in the batch (the index of the gap after it)
        self.offset = 0  # the time of position 0
        self._sums = array("q", [0])  # R: position t arrives at offset + R[t]
        self._floor = array("q", [0])  # min c[t..] over the batch
        self._base = -1  # where _peak and _dip start (-1: to be worked out)
        self._peak = array("q")
        self._dip = array("q")

    def first(self, now_ps: int) -> int:
        """Start at ``now_ps``: the first arrival's time."""
        self.offset = now_ps
        self._refill()
        self.at = 1
        return now_ps + self._sums[1]

    def _refill(self) -> None:
        """A fresh batch of gaps (exponential, whole picoseconds, at least 1) from position 0 at ``offset``."""
        draws = self.rng.standard_exponential(UNIFORM_BATCH) * self.mean_gap_ps
        batch = np.maximum(draws.astype(np.int64), 1)
        sums = np.zeros(len(batch) + 1, dtype=np.int64)
        np.cumsum(batch, out=sums[1:])
        c = sums - np.arange(len(sums), dtype=np.int64) * self.service_ps
        self._sums = _int64s(sums)
        self._floor = _int64s(np.minimum.accumulate(c[::-1])[::-1])
        self._base = -1

    def _rebase(self, base: int, upto: int) -> None:
        """Running maxima from ``base`` through at least position ``upto - 1`` (or the batch's end):
        ``_peak`` of c, ``_dip`` of (the peak before t) - c[t]."""
        stop = min(len(self._sums), max(upto, base + REBASE_SPAN))
        c = np.frombuffer(self._sums, dtype=np.int64)[base:stop] - np.arange(base, stop) * self.service_ps
        peak = np.maximum.accumulate(c)
        dip = np.empty_like(c)
        dip[0] = _LOW
        dip[1:] = peak[:-1] - c[1:]
        self._peak, self._dip = _int64s(peak), _int64s(np.maximum.accumulate(dip))
        self._base = base

    def replay(self, now_ps: int, next_ps: int, busy_ps: int) -> tuple[int, int, int, int]:
        """Apply the arrivals from ``next_ps`` (the next one; at most ``BACKGROUND_WINDOW`` mean gaps
        back) up to ``now_ps`` to a port busy until ``busy_ps``: (busy until, the next arrival after
        now, packets queued, packets dropped)."""
        if now_ps - self.window_ps > next_ps:  # a long idle spell: the queue forgot what came before
            next_ps = now_ps - self.window_ps
            self.offset = next_ps - self._sums[self.at]
            self._base = -1
        service, room, queued = self.service_ps, self.room_ps, 0
        few = now_ps - next_ps < JUMP_GAPS * self.mean_gap_ps  # cheaper one at a time
        while self.jumps and room >= 0 and not few:
            i, end, offset = self.at, len(self._sums) - 1, self.offset
            lead = busy_ps - i * service - offset  # B'
            if lead - self._floor[i] > room:
                break  # the backlog now may overrun the buffer: one at a time
            last = min(bisect_right(self._sums, now_ps - offset, i), end + 1)  # positions i..last-1 are due
            base = self._base
            if base < 0 or last - base > len(self._peak):
                base = i if base < 0 else base
                self._rebase(base, base + 2 * (last - base))
            if self._dip[last - 1 - base] > room:
                break  # one of them may be dropped: one at a time
            peak = self._peak[last - 1 - base]
            busy_ps = last * service + offset + (lead if lead > peak else peak)
            queued += last - i
            if last <= end:
                self.at = last
                return busy_ps, offset + self._sums[last], queued, 0
            self.offset = offset + self._sums[end]  # through the batch: the next one starts there
            self._refill()
            self.at = 1
            if self.offset + self._sums[1] > now_ps:
                return busy_ps, self.offset + self._sums[1], queued, 0
        return self._one_by_one(now_ps, busy_ps, queued)

    def _one_by_one(self, now_ps: int, busy: int, queued: int) -> tuple[int, int, int, int]:
        service, room, sums, i, offset = self.service_ps, self.room_ps, self._sums, self.at, self.offset
        arrival, end, dropped = offset + sums[i], len(sums) - 1, 0
        while arrival <= now_ps:
            if busy < arrival:
                busy = arrival
            if busy - arrival > room:
                dropped += 1
            else:
                busy += service
                queued += 1
            if i == end:  # through the batch: the next one starts here
                self.offset = offset = arrival
                self._refill()
                sums, i = self._sums, 0
            i += 1
            arrival = offset + sums[i]
        self.at = i
        if dropped:
            self._base = -1  # past a drop the backlog no longer bounds the maxima from the old base
        return busy, arrival, queued, dropped
