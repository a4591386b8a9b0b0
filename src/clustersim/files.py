"""Writing a file whole or not at all: the text goes to a temporary file beside its destination and is
renamed over it once complete (and, where asked, checked), so an interrupted or refused write leaves the
old file or none, never half a file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from clustersim.errors import ClusterSimError


class WriteError(ClusterSimError):
    """A file that could not be written; ``reason`` says why without the option and path."""

    def __init__(self, option: str, target: Path, reason: str) -> None:
        super().__init__(f"{option}: cannot write {target}: {reason}", field=option, value=str(target))
        self.reason = reason


def write_whole(path: str | Path, text: str, *, option: str, verify: Callable[[Path], None] | None = None) -> Path:
    """Write ``text`` to ``path``; ``verify(temporary)`` may refuse it before the rename. The file keeps the
    permissions of the one it replaces (a new one: what the umask gives). ``WriteError`` names ``option``."""
    target = Path(path).expanduser()
    if target.is_dir():
        raise WriteError(option, target, "it is a directory; give a file name")
    directory = target.parent if str(target.parent) else Path(".")
    if not directory.is_dir():
        raise WriteError(option, target, f"no such directory {directory}")
    try:
        descriptor, name = tempfile.mkstemp(dir=directory, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise WriteError(option, target, str(exc.strerror or exc)) from None
    temporary = Path(name)
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, _mode(target))
        if verify is not None:
            verify(temporary)
        os.replace(temporary, target)
    except BaseException as exc:
        temporary.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise WriteError(option, target, str(exc.strerror or exc)) from None
        raise
    return target


def _mode(target: Path) -> int:
    """The replaced file's permissions, or what the umask gives a new file."""
    try:
        return target.stat().st_mode & 0o777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask
