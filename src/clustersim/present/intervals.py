"""Intervals in words: a figure with its range (``12.3 s (80%: 11.1-13.9 s)``) and where the range comes from.

``clustersim.intervals`` makes them; every report that shows a predicted figure uses these helpers so
that the ranges read the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable

from clustersim.intervals import Interval, Spread
from clustersim.units import format_seconds


def span(interval: Interval, show: Callable[[float], str]) -> str:
    """``low-high`` in the format ``show`` gives, the unit written once where both ends share it."""
    low, high = show(interval.low), show(interval.high)
    low_number, _, low_unit = low.rpartition(" ")
    _, _, high_unit = high.rpartition(" ")
    if low_number and low_unit == high_unit:
        low = low_number
    elif low.endswith("%") and high.endswith("%"):
        low = low[:-1]
    return f"{low}-{high}"


def with_range(text: str, interval: Interval | None, show: Callable[[float], str]) -> str:
    """``text (80%: low-high)``; ``text`` alone without an interval."""
    return text if interval is None else f"{text} ({interval.level:.0%}: {span(interval, show)})"


def seconds_in_unit_of(value: float) -> Callable[[float], str]:
    """A formatter that writes durations in the unit ``format_seconds`` picks for ``value`` (so that a
    range around 56.9 s reads ``40.3-80.4 s``, not ``40.3 s-1.34 min``)."""
    number, _, unit = format_seconds(value).partition(" ")
    scale = value / float(number.replace(",", "")) if value else 1.0

    def show(end: float) -> str:
        number = end / scale
        return f"{number:,.0f} {unit}" if abs(number) >= 100 else f"{number:.3g} {unit}"

    return show


def interval_line(spread: Spread, what: str = "published cases") -> str:
    """Where the intervals come from, and the note where the evidence is borrowed or thin."""
    line = f"{spread.level:.0%} intervals from left-out residuals of {what} ({spread.basis})"
    return line + (f"; {spread.note}" if spread.note else "")
