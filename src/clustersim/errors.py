"""The errors clustersim raises for user mistakes; each names the field, the value and what is valid."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any

MAX_SHOWN_CHARS = 80  # an echoed value longer than this is shortened in the middle


def shown(value: object, limit: int = MAX_SHOWN_CHARS) -> str:
    """``repr(value)`` for an error message, shortened in the middle (with its length) when longer than
    ``limit``, so a pasted 100 KB value is not echoed back whole."""
    text = repr(value)
    if len(text) <= limit:
        return text
    head = max(limit * 2 // 3, 1)
    tail = max(limit - head - 1, 1)
    return f"{text[:head]}…{text[-tail:]} ({len(text):,} characters)"


class ClusterSimError(Exception):
    """Base of every error caused by user input; the CLI prints its message and exits with code 2.

    ``field`` and ``value`` name what was wrong where the raiser knows it (the CLI's ``--json`` errors
    carry them); the message always names them too.
    """

    field: str | None = None
    value: object = None

    def __init__(self, *args: object, field: str | None = None, value: object = None) -> None:
        super().__init__(*args)
        if field is not None:
            self.field = field
        if value is not None:
            self.value = value


class UnitError(ClusterSimError, ValueError):
    """A quantity that cannot be parsed in the expected dimension."""

    def __init__(self, text: str, dimension: str, rule: str) -> None:
        self.text = text
        self.dimension = dimension
        self.rule = rule
        super().__init__(f"cannot read {shown(text)} as {dimension}: {rule}", value=text)


def close_matches(value: str, candidates: Iterable[str], limit: int = 5) -> list[str]:
    """The candidates that look most like ``value`` (case-insensitive), best first."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    wanted = value.lower()
    hits = difflib.get_close_matches(wanted, list(lowered), n=limit, cutoff=0.5)
    hits += [low for low in lowered if wanted and wanted in low and low not in hits]
    return [lowered[hit] for hit in hits[:limit]]


class UnknownNameError(ClusterSimError, KeyError):
    """A name (catalog id, option value) that is not known, with the closest known ones. ``field`` is an identifier
    (snake_case, as every error's); the message names it in words (``failure_rate``: "unknown failure rate")."""

    def __init__(self, field: str, value: str, valid: Iterable[str], suggestions: Iterable[str] | None = None) -> None:
        self.field = field
        self.value = value
        self.valid = sorted(valid)
        self.suggestions = list(suggestions) if suggestions is not None else close_matches(value, self.valid)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        listing = ", ".join(self.valid[:30]) + (" ..." if len(self.valid) > 30 else "")
        super().__init__(f"unknown {field.replace('_', ' ')} {shown(value)}{hint} (known: {listing})")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CatalogFileError(ClusterSimError):
    """A catalog file that cannot be read or does not follow the schema."""

    def __init__(self, path: str, entry: str | None, field: str | None, value: object, rule: str) -> None:
        self.path = path
        self.entry = entry
        # a problem with a whole entry or file names it (JSON errors never carry a null field)
        self.field = field or ("entry" if entry else "file")
        self.value = value if value is not None or field else (entry or path)
        self.rule = rule
        where = path
        if entry:
            where += f", entry {shown(entry)}"
        if field:
            where += f", field {shown(field)}"
        echoed = "" if value is None else f": value {shown(value)}"
        super().__init__(f"{where}{echoed}: {rule}")


def validation_problems(errors: Iterable[Mapping[str, Any]]) -> str:
    """One line from pydantic's ``ValidationError.errors()``: field, value and rule of each problem."""
    return "; ".join(
        f"field {shown('.'.join(str(p) for p in err['loc']) or '(whole entry)')}: value {shown(err.get('input'))}: "
        f"{err['msg']}"
        for err in errors
    )
