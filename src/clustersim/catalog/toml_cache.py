"""Parsed TOML documents kept on disk between processes, keyed by the text's SHA-256.

A fresh ``plan``, ``train`` or ``explain`` reads some twenty TOML files (the catalog, the zoo, the profiles,
the calibrations, the residuals); the pure-Python parser spends about 0.2 s on them, reading the same documents
back as JSON about a tenth of that. The key is the text itself, so an edited file is parsed again and a stale
entry can never be read. The cache lives in ``$CLUSTERSIM_CACHE_DIR`` (an empty value turns it off), else
``$XDG_CACHE_HOME/clustersim/toml`` or ``~/.cache/clustersim/toml``. Dates and times are kept as tagged
ISO strings and read back as the same objects; any failure to read or write the cache parses the text as if
there were none.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import tomllib
from pathlib import Path
from typing import Any

CACHE_ENV = "CLUSTERSIM_CACHE_DIR"
_TAG = "\u0000toml"  # the key of a tagged date or time (a TOML key holds a NUL only written as a quoted escape)
_KINDS: dict[str, Any] = {"datetime": dt.datetime, "date": dt.date, "time": dt.time}


def _tagged(value: object) -> dict[str, str]:
    for name, kind in _KINDS.items():  # datetime first: a datetime is a date too
        if isinstance(value, kind):
            return {_TAG: name, "iso": value.isoformat()}
    raise TypeError(f"{type(value).__name__} is not a TOML value")


def _untagged(table: dict[str, Any]) -> Any:
    if _TAG in table and len(table) == 2:
        return _KINDS[table[_TAG]].fromisoformat(table["iso"])
    return table


def cache_dir() -> Path | None:
    """Where parsed documents are kept (None: nowhere)."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return Path(chosen).expanduser() if chosen.strip() else None
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "clustersim" / "toml"


def parse_toml(text: str) -> dict[str, Any]:
    """``tomllib.loads(text)`` (its ``TOMLDecodeError`` included), read from the cache where it holds the text."""
    folder = cache_dir()
    if folder is None:
        return tomllib.loads(text)
    path = folder / f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}.json"
    try:
        known = json.loads(path.read_text("utf-8"), object_hook=_untagged)
        if isinstance(known, dict):
            return known
    except (OSError, ValueError):
        pass
    data = tomllib.loads(text)
    blob = json.dumps(data, default=_tagged)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = path.with_name(f"{path.name}.{os.getpid()}.part")
        partial.write_text(blob, "utf-8")
        os.replace(partial, path)  # whole or not at all, whoever writes it at the same time
    except OSError:
        pass
    return data
