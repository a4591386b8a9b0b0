"""The errors clustersim raises for user mistakes; each names the field, the value and what is valid."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from typing import Any


class ClusterSimError(Exception):
    """Base of every error caused by user input; the CLI prints its message and exits with code 2."""


class UnitError(ClusterSimError, ValueError):
    """A quantity that cannot be parsed in the expected dimension."""

    def __init__(self, text: str, dimension: str, rule: str) -> None:
        self.text = text
        self.dimension = dimension
        self.rule = rule
        super().__init__(f"cannot read {text!r} as {dimension}: {rule}")


def close_matches(value: str, candidates: Iterable[str], limit: int = 5) -> list[str]:
    """The candidates that look most like ``value`` (case-insensitive), best first."""
    lowered = {candidate.lower(): candidate for candidate in candidates}
    wanted = value.lower()
    hits = difflib.get_close_matches(wanted, list(lowered), n=limit, cutoff=0.5)
    hits += [low for low in lowered if wanted and wanted in low and low not in hits]
    return [lowered[hit] for hit in hits[:limit]]


class UnknownNameError(ClusterSimError, KeyError):
    """A name (catalog id, option value) that is not known, with the closest known ones."""

    def __init__(self, field: str, value: str, valid: Iterable[str], suggestions: Iterable[str] | None = None) -> None:
        self.field = field
        self.value = value
        self.valid = sorted(valid)
        self.suggestions = list(suggestions) if suggestions is not None else close_matches(value, self.valid)
        hint = f"; did you mean {', '.join(self.suggestions)}?" if self.suggestions else ""
        listing = ", ".join(self.valid[:30]) + (" ..." if len(self.valid) > 30 else "")
        super().__init__(f"unknown {field} {value!r}{hint} (known: {listing})")

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class CatalogFileError(ClusterSimError):
    """A catalog file that cannot be read or does not follow the schema."""

    def __init__(self, path: str, entry: str | None, field: str | None, value: object, rule: str) -> None:
        self.path = path
        self.entry = entry
        self.field = field
        self.value = value
        self.rule = rule
        where = path
        if entry:
            where += f", entry {entry!r}"
        if field:
            where += f", field {field!r}"
        shown = "" if value is None else f": value {value!r}"
        super().__init__(f"{where}{shown}: {rule}")


def validation_problems(errors: Iterable[Mapping[str, Any]]) -> str:
    """One line from pydantic's ``ValidationError.errors()``: field, value and rule of each problem."""
    return "; ".join(
        f"field {'.'.join(str(p) for p in err['loc']) or '(whole entry)'!r}: value {err.get('input')!r}: {err['msg']}"
        for err in errors
    )
