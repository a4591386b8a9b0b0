"""File layouts as ``lfs setstripe`` gives them: extents of a file, each striped over a number of storage targets
(``-c``, -1 for all of them), a progressive layout's extents ending where ``-E`` says (``-1``: the end of the file);
sizes are binary as lfs reads them (1G is 1 GiB). A file system's default layouts are catalogued as these specs
(``catalog/data/storage.toml``); ``clustersim.storage.fsx`` applies them to a file system's targets."""

from __future__ import annotations

import math
from dataclasses import dataclass

from clustersim.errors import ClusterSimError, UnitError
from clustersim.units import parse_bytes


@dataclass(frozen=True)
class Extent:
    """One component of a (progressive) file layout: bytes from ``start_bytes`` up to ``end_bytes``
    (``inf``: to the end of the file) striped over ``stripes`` targets (-1: all of them)."""

    start_bytes: float
    end_bytes: float
    stripes: int


LAYOUT_FORMS = "'-c N' or '-E END -c N [-E END -c N ...]' (lfs setstripe's -E, -c and -S)"


def parse_layout(spec: str) -> tuple[Extent, ...]:
    """The extents of an ``lfs setstripe`` layout: ``-c 1`` or ``-E 1G -c 1 -E -1 -c 5`` (sizes binary). Each
    component takes one ``-c`` (stripe count) and may take ``-S`` (stripe size: read and checked, not priced: a
    stripe's rate is its target's share whatever the size); any other option, a component without ``-c``, or
    anything before the first ``-E`` of a progressive layout is refused, never skipped."""
    tokens = spec.split()
    progressive = "-E" in tokens
    ends: list[float] = []  # a progressive layout's extent ends, in order
    counts: list[int | None] = [] if progressive else [None]
    for at in range(0, len(tokens), 2):
        flag, value = tokens[at], tokens[at + 1] if at + 1 < len(tokens) else None
        if flag not in ("-E", "-c", "-S"):
            raise _layout_error(spec, f"unknown option or stray word {flag!r}")
        if value is None:
            raise _layout_error(spec, f"{flag} needs a value")
        if flag == "-E":
            ends.append(_extent_end(value, spec))
            counts.append(None)
        elif not counts:
            raise _layout_error(spec, f"{flag} {value} comes before the first -E")
        elif flag == "-c":
            if counts[-1] is not None:
                raise _layout_error(spec, "two stripe counts (-c) for one component")
            counts[-1] = _stripes(value, spec)
        else:
            _stripe_size(value, spec)
    if any(count is None for count in counts):
        raise _layout_error(spec, "every component needs a stripe count (-c)")
    stripes = [count for count in counts if count is not None]
    if not progressive:
        return (Extent(0.0, math.inf, stripes[0]),)
    extents: list[Extent] = []
    start = 0.0
    for end, count in zip(ends, stripes, strict=True):
        if end <= start:
            raise ClusterSimError(f"layout {spec!r}: extent ends must increase", field="layout", value=spec)
        extents.append(Extent(start, end, count))
        start = end
    if extents[-1].end_bytes != math.inf:
        raise ClusterSimError(f"layout {spec!r}: the last extent must end at -1 (EOF)", field="layout", value=spec)
    return tuple(extents)


def _layout_error(spec: str, what: str) -> ClusterSimError:
    return ClusterSimError(f"layout {spec!r}: {what}; expected {LAYOUT_FORMS}", field="layout", value=spec)


def _binary(size: str) -> str:
    """lfs reads 1G as 1 GiB."""
    return size[:-1] + size[-1].upper() + "iB" if size[-1] in "KkMmGgTt" else size


def _size(text: str, spec: str, what: str) -> float:
    try:
        return parse_bytes(_binary(text))
    except UnitError:
        raise ClusterSimError(
            f"layout {spec!r}: {what} {text!r} is not a size (e.g. 64M, 1G or 1GiB; a number alone is bytes)",
            field="layout",
            value=spec,
        ) from None


def _extent_end(text: str, spec: str) -> float:
    """An extent's end: a size, or -1 (the end of the file)."""
    return math.inf if text == "-1" else _size(text, spec, "extent end")


STRIPE_SIZE_UNIT = 64 * 2**10  # lfs setstripe -S: a whole multiple of 64 KiB (the Lustre manual's setstripe rules)


def _stripe_size(text: str, spec: str) -> None:
    """A stripe size (-S): a positive whole multiple of 64 KiB, as lfs takes it."""
    size = _size(text, spec, "stripe size")
    if not (size > 0 and size % STRIPE_SIZE_UNIT == 0):
        raise ClusterSimError(
            f"layout {spec!r}: stripe size {text!r} must be a positive multiple of 64 KiB (e.g. 1M, the default)",
            field="layout",
            value=spec,
        )


def _stripes(text: str, spec: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise ClusterSimError(
            f"layout {spec!r}: stripe count {text!r} is not a whole number (valid: 1 or more, or -1 for all targets)",
            field="layout",
            value=text,
        ) from None
    if count == 0 or count < -1:
        raise ClusterSimError(f"layout {spec!r}: stripe count must be >= 1 or -1 (all)", field="layout", value=count)
    return count
