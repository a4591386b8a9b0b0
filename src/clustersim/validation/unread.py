"""The fields a case states that no case model reads.

The format lets readers ignore unknown fields, and the case models do (``extra="ignore"``), so a misspelled
or unsupported field would be dropped without a word: ``validate`` names them per file instead.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from clustersim.records import record_type
from clustersim.validation.cases import Case


def unread_fields(value: Mapping[str, Any], model: type[BaseModel] = Case, prefix: str = "") -> list[str]:
    """The dotted names of the keys of ``value`` (a case, or a part of one read by ``model``) that no field holds."""
    unread: list[str] = []
    for key, item in value.items():
        field = model.model_fields.get(key)
        if field is None:
            unread.append(f"{prefix}{key}")
            continue
        inner = record_type(field.annotation)
        if inner is not None and isinstance(item, Mapping):
            unread += unread_fields(item, inner, f"{prefix}{key}.")
    return unread


def unread_in_file(path: str | Path) -> Counter[str]:
    """How many cases of a JSON Lines file state each unread field (lines that are not JSON objects are
    ``read_cases``'s to refuse)."""
    found: Counter[str] = Counter()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        try:
            raw = json.loads(line) if line.strip() else None
        except json.JSONDecodeError:
            continue
        if isinstance(raw, dict):
            found.update(unread_fields(raw))
    return found


def unread_by_file(files: Sequence[tuple[str, Path]]) -> dict[str, dict[str, int]]:
    """``validate --json``'s ``unread_fields``: per named file that states any, its unread fields and counts."""
    return {name: dict(found) for name, path in files if (found := unread_in_file(path))}


def unread_lines(unread: Mapping[str, Mapping[str, int]]) -> list[str]:
    """One line per file of ``unread`` (file name -> field -> cases stating it): the fields and their counts."""
    return [
        f"note: {name}: fields no reader takes, ignored as the format allows: "
        + ", ".join(f"{field} ({count})" for field, count in sorted(found.items()))
        for name, found in unread.items()
        if found
    ]
