"""Parse and format physical quantities at the edge; inside, plain SI floats.

Each quantity has a *dimension* (bytes, bits/s, bytes/s, FLOP/s, counts, seconds, watts).
``parse(text, dimension)`` turns ``"80GiB"``, ``"3.2Tbps"`` or ``"15T"`` into a float in the
dimension's base unit; ``format_quantity(value, dimension)`` writes it back with a readable prefix.
The case of ``b`` (bit) versus ``B`` (byte) is significant; decimal prefixes are powers of 1000,
binary ones (``Ki``, ``Mi``, ...) powers of 1024.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import StrEnum

from clustersim.errors import UnitError


class Dimension(StrEnum):
    """What a number measures; each has one SI base unit used inside the code."""

    BYTES = "bytes"
    BYTES_PER_S = "bytes_per_s"
    BITS_PER_S = "bits_per_s"
    FLOP_PER_S = "flop_per_s"
    PER_S = "per_s"  # events of a kind (exponentials, requests) per second
    COUNT = "count"
    SECONDS = "seconds"
    WATTS = "watts"


# The ranges inputs are checked against once, at the boundary (command-line options, scenario files,
# the job records): beyond them an answer would be meaningless or overflow, so they are refused.
MAX_NODES = 100_000  # instances in one job
MAX_DEGREE = 65_536  # any parallel degree, micro-batch or ranks per node
MAX_SEQUENCES = 2**24  # a global batch, in sequences
MAX_SEQUENCE_TOKENS = 2**24  # a sequence, prompt or output length, in tokens
MAX_TOKENS = 1e18  # a training budget, in tokens
MAX_COLLECTIVE_BYTES = 2.0**40  # one collective's buffer (1 TiB: more than any device holds)
MAX_RATE_PER_S = 1e9  # a request rate
MAX_LATENCY_S = 86_400.0  # a latency target

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
    "Pi": 2.0**50,
    "Ei": 2.0**60,
}
_COUNT_SUFFIXES = {"": 1.0, "K": 1e3, "k": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12, "P": 1e15}
_DURATIONS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "sec": 1.0,
    "min": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
    "days": 86400.0,
    "w": 604800.0,
}


@dataclass(frozen=True, slots=True)
class _Units:
    """Base-unit spellings of a dimension and whether binary prefixes are allowed."""

    bases: tuple[str, ...]
    canonical: str
    binary: bool
    case_sensitive_base: bool


_UNITS: dict[Dimension, _Units] = {
    Dimension.BYTES: _Units(("B", "bytes", "byte"), "B", True, True),
    Dimension.BYTES_PER_S: _Units(("B/s", "Bps", "bytes/s"), "B/s", True, True),
    Dimension.BITS_PER_S: _Units(("b/s", "bps", "bit/s", "bits/s"), "bps", False, True),
    Dimension.FLOP_PER_S: _Units(("FLOPS", "FLOP/s", "OPS", "OP/s"), "FLOPS", False, False),
    Dimension.PER_S: _Units(("/s",), "/s", False, True),
    Dimension.WATTS: _Units(("W",), "W", False, True),
}

_NUMBER = re.compile(r"^\s*([+-]?(?:\d[\d_,]*\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(.*?)\s*$")


def _split(text: str, dimension: Dimension) -> tuple[float, str]:
    match = _NUMBER.match(text)
    if not match:
        raise UnitError(text, dimension.value, "expected a number followed by a unit")
    number = float(match.group(1).replace("_", "").replace(",", ""))
    return number, match.group(2).replace(" ", "")


def _valid_spellings(dimension: Dimension) -> str:
    if dimension is Dimension.COUNT:
        return "a plain number or one with K, M, B/G, T, P (e.g. 15T, 4M)"
    if dimension is Dimension.SECONDS:
        return "a plain number of seconds or one with " + ", ".join(_DURATIONS)
    units = _UNITS[dimension]
    examples = [f"G{units.bases[0]}", f"T{units.bases[0]}"]
    if units.binary:
        examples.append(f"Gi{units.bases[0]}")
    return "a unit among " + ", ".join(units.bases) + " with an optional prefix (e.g. " + ", ".join(examples) + ")"


def _multiplier(suffix: str, dimension: Dimension) -> float | None:
    if dimension is Dimension.COUNT:
        return _COUNT_SUFFIXES.get(suffix)
    if dimension is Dimension.SECONDS:
        return _DURATIONS.get(suffix) if suffix else 1.0
    units = _UNITS[dimension]
    for base in units.bases:
        matches = suffix.endswith(base) if units.case_sensitive_base else suffix.lower().endswith(base.lower())
        if not matches:
            continue
        prefix = suffix[: len(suffix) - len(base)]
        if prefix.upper() in _DECIMAL:
            return _DECIMAL[prefix.upper()]
        binary = prefix[:1].upper() + prefix[1:].lower()
        if units.binary and binary in _BINARY:
            return _BINARY[binary]
    return None


def parse(text: str | float | int, dimension: Dimension | str) -> float:
    """Return ``text`` in the base unit of ``dimension`` (bytes, bits/s, bytes/s, FLOP/s, s, W).

    Plain numbers are taken as already in the base unit. Raises ``UnitError`` naming the text,
    the dimension and the spellings that would be valid.
    """
    dimension = Dimension(dimension)
    if isinstance(text, bool):
        raise UnitError(str(text), dimension.value, "a boolean is not a quantity")
    if isinstance(text, int | float):
        value = float(text)
        suffix = ""
    else:
        value, suffix = _split(text, dimension)
        if not suffix and dimension not in (Dimension.COUNT, Dimension.SECONDS):
            return _check_finite(value, text, dimension)
    if not suffix:
        return _check_finite(value, str(text), dimension)
    multiplier = _multiplier(suffix, dimension)
    if multiplier is None:
        raise UnitError(str(text), dimension.value, f"unknown unit {suffix!r}; expected {_valid_spellings(dimension)}")
    return _check_finite(value * multiplier, str(text), dimension)


def _check_finite(value: float, text: str, dimension: Dimension) -> float:
    if not math.isfinite(value):
        raise UnitError(text, dimension.value, "the value must be a finite number")
    return value


def parse_bytes(text: str | float | int) -> float:
    """Bytes from ``"80GiB"``, ``"3.84TB"`` or a plain number of bytes."""
    return parse(text, Dimension.BYTES)


def parse_bits_per_s(text: str | float | int) -> float:
    """Bits per second from ``"400Gbps"``, ``"3.2Tb/s"``."""
    return parse(text, Dimension.BITS_PER_S)


def parse_bytes_per_s(text: str | float | int) -> float:
    """Bytes per second from ``"3.35TB/s"``, ``"820GiB/s"``, ``"200MBps"``."""
    return parse(text, Dimension.BYTES_PER_S)


def parse_flop_per_s(text: str | float | int) -> float:
    """FLOP per second from ``"989.4TFLOPS"``, ``"2.25PFLOP/s"``."""
    return parse(text, Dimension.FLOP_PER_S)


def parse_count(text: str | float | int) -> float:
    """A count from ``"15T"`` (tokens), ``"4M"``, ``"1.5B"`` or a plain number."""
    return parse(text, Dimension.COUNT)


def parse_seconds(text: str | float | int) -> float:
    """Seconds from ``"20us"``, ``"1.5h"``, ``"3d"`` or a plain number of seconds."""
    return parse(text, Dimension.SECONDS)


_FORMAT_PREFIXES = [("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3), ("", 1.0)]
_FORMAT_BINARY = [
    ("Ei", 2.0**60),
    ("Pi", 2.0**50),
    ("Ti", 2.0**40),
    ("Gi", 2.0**30),
    ("Mi", 2.0**20),
    ("Ki", 2.0**10),
    ("", 1.0),
]
_FORMAT_COUNT = [("P", 1e15), ("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3), ("", 1.0)]
_FORMAT_DURATION = [("d", 86400.0), ("h", 3600.0), ("min", 60.0), ("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)]


def _number(value: float, digits: int) -> str:
    text = f"{value:.{digits}g}"
    if "e" in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}e{int(exponent)}"
    return text


def format_quantity(value: float, dimension: Dimension | str, *, digits: int = 4, binary: bool = False) -> str:
    """Write ``value`` (base unit of ``dimension``) with the largest prefix that keeps it >= 1.

    ``binary=True`` uses powers of 1024 (for bytes). ``parse`` reads every result back.
    """
    dimension = Dimension(dimension)
    if dimension is Dimension.COUNT:
        table, unit, space = _FORMAT_COUNT, "", ""
    elif dimension is Dimension.SECONDS:
        table, unit, space = _FORMAT_DURATION, "", " "
    else:
        units = _UNITS[dimension]
        table = _FORMAT_BINARY if binary and units.binary else _FORMAT_PREFIXES
        unit, space = units.canonical, " "
    magnitude = abs(value)
    for prefix, scale in table:
        if magnitude >= scale:
            return f"{_number(value / scale, digits)}{space}{prefix}{unit}"
    prefix, scale = table[-1]
    return f"{_number(value / scale, digits)}{space}{prefix}{unit}"


def format_bytes(value: float, *, digits: int = 4, binary: bool = True) -> str:
    """``85899345920`` -> ``"80 GiB"`` (binary by default: capacities are GiB)."""
    return format_quantity(value, Dimension.BYTES, digits=digits, binary=binary)


def format_bits_per_s(value: float, *, digits: int = 4) -> str:
    """``3.2e12`` -> ``"3.2 Tbps"``."""
    return format_quantity(value, Dimension.BITS_PER_S, digits=digits)


def format_bytes_per_s(value: float, *, digits: int = 4) -> str:
    """``3.35e12`` -> ``"3.35 TB/s"`` (decimal: bandwidths are SI)."""
    return format_quantity(value, Dimension.BYTES_PER_S, digits=digits)


def format_flop_per_s(value: float, *, digits: int = 4) -> str:
    """``9.894e14`` -> ``"989.4 TFLOPS"``."""
    return format_quantity(value, Dimension.FLOP_PER_S, digits=digits)


def format_count(value: float, *, digits: int = 4) -> str:
    """``1.5e13`` -> ``"15T"``."""
    return format_quantity(value, Dimension.COUNT, digits=digits)


def format_seconds(value: float, *, digits: int = 4) -> str:
    """``0.00002`` -> ``"20 us"``; ``5400`` -> ``"1.5 h"``."""
    return format_quantity(value, Dimension.SECONDS, digits=digits)
