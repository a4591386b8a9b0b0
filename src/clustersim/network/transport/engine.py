"""The discrete-event core: an integer-picosecond clock, a heap of events, a seeded random source.

A heap entry is ``(key, seq, handler, arg)`` with ``key = time_ps << 2 | priority`` (priority 0..3,
lower first at one instant); ``seq`` (a running count) breaks ties so that events at one time and
priority run in the order they were scheduled, which makes a run byte-identical for a seed. A handler
is called as ``handler(time_ps, arg)`` and returns its follow-up events as ``(time_ps, priority,
handler, arg)`` tuples (or ``None``); the packet hop handlers, the inner loop, push theirs straight
onto ``heap``. Packets are plain tuples: no object is made per packet beyond the
tuples the heap holds. Random draws come from generators keyed by (seed, key) (``rng_for``: one per
port's loss, one per port's background), so they do not depend on the order handlers run in.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import numpy as np

PS_PER_S = 10**12
PRIORITY_BITS = 2
MAX_PRIORITY = (1 << PRIORITY_BITS) - 1
UNIFORM_BATCH = 8192  # uniform draws fetched from the generator at a time
NEVER = 1 << 126  # beyond any event key or event count: no bound

Handler = Callable[[int, Any], "Iterable[Event] | None"]
Event = tuple[int, int, Handler, Any]


REPORT_EVERY = 1 << 16  # events between two progress reports
_REPORTER: ContextVar[Callable[[int], None] | None] = ContextVar("transport_progress", default=None)


@contextmanager
def reporting(progress: Callable[[int], None] | None) -> Iterator[None]:
    """Within it, every environment's ``run`` calls ``progress(n)`` after each ``REPORT_EVERY`` events
    it runs (and once at its end) with the ``n`` run since its last call: a progress bar's feed, for
    the experiments that make environments of their own (``None``: no reports)."""
    token = _REPORTER.set(progress)
    try:
        yield
    finally:
        _REPORTER.reset(token)


def ps(seconds: float) -> int:
    """``seconds`` as a whole number of picoseconds (rounded to nearest)."""
    return round(seconds * PS_PER_S)


class Environment:
    """The clock, the event heap and the random numbers of one simulation run."""

    def __init__(self, seed: int = 0) -> None:
        self.now_ps = 0
        self.num_events = 0
        self._heap: list[tuple[int, int, Handler, Any]] = []
        self._counter = itertools.count()  # the tie-breaking sequence, shared by schedule() and run()
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self._stream = Stream(self.rng)

    def schedule(self, time_ps: int, handler: Handler, arg: Any = None, priority: int = 0) -> None:
        """Run ``handler(time_ps, arg)`` at ``time_ps`` (not before now)."""
        if time_ps < self.now_ps:
            raise ValueError(f"cannot schedule at {time_ps} ps, before now ({self.now_ps} ps)")
        if not 0 <= priority <= MAX_PRIORITY:
            raise ValueError(f"priority must be in 0..{MAX_PRIORITY}, got {priority}")
        heapq.heappush(self._heap, (time_ps << PRIORITY_BITS | priority, next(self._counter), handler, arg))

    @property
    def heap(self) -> list[tuple[int, int, Handler, Any]]:
        """The heap itself, for the inner loop's handlers to push onto directly: entries
        ``(time_ps << PRIORITY_BITS | priority, next(counter), handler, arg)``."""
        return self._heap

    @property
    def counter(self) -> Iterator[int]:
        """The tie-breaking sequence that goes with ``heap``."""
        return self._counter

    def uniform(self) -> float:
        """A uniform draw in [0, 1), from the run's generator in batches."""
        return self._stream.uniform()

    def exponential_ps(self, mean_ps: float) -> int:
        """An exponential gap with mean ``mean_ps``, at least 1 ps."""
        return self._stream.exponential_ps(mean_ps)

    def rng_for(self, key: int) -> np.random.Generator:
        """An independent generator for ``key`` (a port's loss, a port's background): a function of the
        run's seed and the key only, so what draws from it does not depend on the order other things
        draw in (which lets the network cross several hops in one event and stay exact)."""
        return np.random.default_rng([self.seed, key])

    def run(self, until_ps: int | None = None, max_events: int | None = None) -> int:
        """Run events in (time, priority, seq) order until the heap empties, the next event lies after
        ``until_ps``, or ``max_events`` have run; returns the number of events run. Inside
        ``reporting(progress)``, ``progress(n)`` hears of every ``REPORT_EVERY`` events run."""
        report = _REPORTER.get()
        if report is None:
            return self._run(until_ps, max_events)
        total = 0
        while True:
            step = REPORT_EVERY if max_events is None else min(REPORT_EVERY, max_events - total)
            count = self._run(until_ps, step)
            total += count
            report(count)
            if count < step or (max_events is not None and total >= max_events):
                return total

    def _run(self, until_ps: int | None, max_events: int | None) -> int:
        heap = self._heap
        pop = heapq.heappop
        push = heapq.heappush
        counter = self._counter
        limit = NEVER if until_ps is None else (until_ps << PRIORITY_BITS | MAX_PRIORITY)
        budget = NEVER if max_events is None else max_events
        count = 0
        if budget <= 0:
            return 0
        while heap:  # (integer bounds: an int compares fastest with an int)
            key, seq, handler, arg = pop(heap)
            if key > limit:
                push(heap, (key, seq, handler, arg))  # not yet: back where it was
                break
            time_ps = key >> PRIORITY_BITS
            self.now_ps = time_ps
            follow = handler(time_ps, arg)
            count += 1
            if follow:
                for at_ps, priority, next_handler, next_arg in follow:
                    push(heap, (at_ps << PRIORITY_BITS | priority, next(counter), next_handler, next_arg))
            if count >= budget:
                break
        self.num_events += count
        return count

    @property
    def pending(self) -> int:
        """Events waiting in the heap."""
        return len(self._heap)


class Stream:
    """Uniform and exponential draws from one generator, fetched in batches."""

    __slots__ = ("_next", "_rng", "_uniforms")

    def __init__(self, rng: np.random.Generator) -> None:
        self._rng = rng
        self._uniforms: list[float] = []
        self._next = 0

    def uniform(self) -> float:
        """A uniform draw in [0, 1)."""
        i = self._next
        if i >= len(self._uniforms):
            self._uniforms = self._rng.random(UNIFORM_BATCH).tolist()
            i = 0
        self._next = i + 1
        return self._uniforms[i]

    def exponential_ps(self, mean_ps: float) -> int:
        """An exponential gap with mean ``mean_ps``, at least 1 ps."""
        return max(1, int(-math.log(1.0 - self.uniform()) * mean_ps))
