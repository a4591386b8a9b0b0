"""Timing a piece of device work: warm-up, repetitions, and the median and spread of the samples.

On a GPU each repetition is bracketed by CUDA events on the current stream (``torch.cuda.Event``,
``elapsed_time``); on the CPU by ``time.perf_counter`` around ``torch.cpu.synchronize`` (the CPU
kernels are synchronous: the call returns when the work is done).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Stats:
    """Seconds per repetition: the median, the extremes and the 10th/90th percentiles of ``repeats`` samples
    taken after ``warmup`` untimed runs."""

    median_s: float
    min_s: float
    max_s: float
    p10_s: float
    p90_s: float
    repeats: int
    warmup: int

    def rate(self, work: float) -> dict[str, float]:
        """``work`` per second at the median, and its spread (the fastest sample gives the maximum)."""
        return {
            "median": work / self.median_s,
            "min": work / self.max_s,
            "max": work / self.min_s,
            "p10": work / self.p90_s,
            "p90": work / self.p10_s,
        }

    def rate_fields(self, work: float, key: str, unit: float) -> dict[str, float]:
        """``rate(work)`` in ``unit`` per second for JSON: ``key`` (the median), ``key_min``, ``key_max``,
        ``key_p10`` and ``key_p90``."""
        rate = self.rate(work)
        return {key: rate["median"] / unit} | {f"{key}_{q}": rate[q] / unit for q in ("min", "max", "p10", "p90")}

    def as_dict(self) -> dict[str, float | int]:
        """The fields, for JSON."""
        return {
            "median_s": self.median_s,
            "min_s": self.min_s,
            "max_s": self.max_s,
            "p10_s": self.p10_s,
            "p90_s": self.p90_s,
            "repeats": self.repeats,
            "warmup": self.warmup,
        }


def percentile(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` quantile of ``samples`` by linear interpolation between the sorted samples."""
    ordered = sorted(samples)
    if not ordered:
        raise ValueError("no samples")
    at = fraction * (len(ordered) - 1)
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def summarize(samples_s: Sequence[float], warmup: int) -> Stats:
    """The ``Stats`` of ``samples_s`` (seconds, each > 0)."""
    if not samples_s or min(samples_s) <= 0:
        raise ValueError(f"samples must be positive seconds: {list(samples_s)[:4]}")
    return Stats(
        median_s=statistics.median(samples_s),
        min_s=min(samples_s),
        max_s=max(samples_s),
        p10_s=percentile(samples_s, 0.1),
        p90_s=percentile(samples_s, 0.9),
        repeats=len(samples_s),
        warmup=warmup,
    )


def time_once(torch: Any, device: str, work: Callable[[], object]) -> float:
    """Seconds of one run of ``work`` on ``device``, synchronized before and after."""
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        work()
        end.record()
        torch.cuda.synchronize()
        return max(float(start.elapsed_time(end)) / 1e3, 1e-9)
    torch.cpu.synchronize()
    began = time.perf_counter()
    work()
    torch.cpu.synchronize()
    return max(time.perf_counter() - began, 1e-9)


def time_work(torch: Any, device: str, work: Callable[[], object], *, warmup: int, repeats: int) -> Stats:
    """Run ``work`` ``warmup`` times untimed, then ``repeats`` times each timed alone on ``device``."""
    for _ in range(warmup):
        work()
    samples: list[float] = []
    if device == "cuda":
        torch.cuda.synchronize()
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(repeats)]
        for start, end in events:
            start.record()
            work()
            end.record()
        torch.cuda.synchronize()
        samples = [start.elapsed_time(end) / 1e3 for start, end in events]
    else:
        samples = [time_once(torch, device, work) for _ in range(repeats)]
    # a sample below the timer's resolution would be 0: floor it at one nanosecond
    return summarize([max(s, 1e-9) for s in samples], warmup)
