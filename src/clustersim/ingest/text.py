"""How every reader opens a tool's output: as UTF-8 text (undecodable bytes replaced), an unreadable file refused
in one line naming it."""

from __future__ import annotations

from pathlib import Path

from clustersim.errors import ClusterSimError


def read_output(path: Path) -> str:
    """The text of ``path``; ``ClusterSimError`` naming the file where it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ClusterSimError(f"{path}: cannot read: {exc.strerror or exc}", field="FILES", value=str(path)) from None
