"""Shared by the benchmark scripts: the median wall time of a call."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def median_s(func: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``func`` (one process, perf_counter)."""
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)
