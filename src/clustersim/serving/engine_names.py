"""The packaged serving engine profiles by name, read straight from ``engines.toml`` without validating them.

The CLI's ``--engine`` help is built when the command module loads, before any command runs, so it
reads the profile names, the accelerator families each runs on and the families it is the default on
from the TOML itself (``based_on`` entries inherit the fields they do not give), with no pydantic: one
list of engines, the file's. ``clustersim.serving.engines`` validates the same file when an engine is used.
"""

from __future__ import annotations

import tomllib
from functools import cache
from importlib.resources import files
from typing import Any

PACKAGE, FILE_NAME = "clustersim.serving", "engines.toml"
GPU_FAMILIES = frozenset({"ampere", "hopper", "blackwell"})


@cache
def _entries() -> dict[str, dict[str, Any]]:
    text = files(PACKAGE).joinpath(FILE_NAME).read_text(encoding="utf-8")
    return {name: entry for name, entry in tomllib.loads(text).items() if isinstance(entry, dict)}


def _field(name: str, field: str) -> Any:
    """``field`` of profile ``name``, else of the profile it is ``based_on`` (None where none gives it)."""
    entries, seen = _entries(), set()
    while name in entries and name not in seen:
        seen.add(name)
        if field in entries[name]:
            return entries[name][field]
        name = entries[name].get("based_on", "")
    return None


def _where(families: list[str]) -> str:
    return "GPUs" if set(families) <= GPU_FAMILIES else ", ".join(f.capitalize() for f in families)


def engine_help() -> str:
    """The packaged profiles grouped by where they run, and each family's default, as help text."""
    groups: dict[str, list[str]] = {}
    defaults: dict[str, list[str]] = {}
    for name in _entries():
        families = list(_field(name, "accelerator_families") or [])
        groups.setdefault(_where(families), []).append(name)
        if _field(name, "default_on"):
            defaults.setdefault(name, []).append(_where(list(_field(name, "default_on"))))
    listed = "; ".join(f"{', '.join(names)} ({where})" for where, names in groups.items())
    chosen = ", ".join(f"{name} on {' and '.join(where)}" for name, where in defaults.items())
    return f"{listed}; default: the accelerator's ({chosen})"
