"""Recorded snapshots for tests: compared against, and written only when an explicit flag asks for it.

A test computes its output and calls ``recorded(path, text, flag=..., command=...)``: with ``flag=1``
in the environment the snapshot is (re)written first; without it a missing snapshot fails, naming the
file and the command that records it, and nothing is ever written.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def recorded(path: Path, text: str, *, flag: str, command: str) -> str:
    """The snapshot held at ``path``, after writing ``text`` there when the environment sets ``flag`` to 1.
    ``command`` is the pytest invocation that regenerates it (shown, with the flag, when it is missing)."""
    if os.environ.get(flag) == "1":
        path.write_text(text, encoding="utf-8")
    if not path.is_file():
        pytest.fail(
            f"snapshot {path} is missing; record it with `{flag}=1 {command}` and review it before committing",
            pytrace=False,
        )
    return path.read_text(encoding="utf-8")
