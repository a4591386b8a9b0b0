"""Checkpoint-like storage throughput: N writers each write one file in large chunks and fsync it, then N
readers read the files back; aggregate GB/s (1e9 bytes) per repetition, from the first open to the last close.

Reads follow ``posix_fadvise(POSIX_FADV_DONTNEED)`` on every file after its fsync (where the platform has
it), so they come from the device rather than the page cache; a file system that ignores the advice (or a
platform without it) reads from memory, and the result says whether the advice was given.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.probe.timing import Stats, summarize

CHUNK_BYTES = 4 << 20  # checkpoint writers write tensors in large pieces


@dataclass(frozen=True)
class StorageResult:
    """Writes or reads of ``writers`` files of ``file_bytes`` each: the repetitions' times."""

    name: str
    writers: int
    file_bytes: int
    stats: Stats
    cache_dropped: bool

    def as_dict(self) -> dict[str, Any]:
        """The result for JSON: aggregate GB/s at the median and its spread."""
        return {
            "name": self.name,
            "writers": self.writers,
            "file_bytes": self.file_bytes,
            "total_bytes": self.writers * self.file_bytes,
            **self.stats.rate_fields(self.writers * self.file_bytes, "GBps", 1e9),
            "page_cache_dropped": self.cache_dropped,
            "time": self.stats.as_dict(),
        }


def check_directory(path: Path) -> Path:
    """``path`` if it is a directory this process can create files in; else one line saying why not."""
    if not path.is_dir():
        raise ClusterSimError(f"--path {path}: not a directory", field="--path", value=str(path))
    try:
        with tempfile.NamedTemporaryFile(dir=path, prefix=".clustersim-probe-"):
            pass
    except OSError as exc:
        raise ClusterSimError(
            f"--path {path}: cannot write there ({exc.strerror or exc})", field="--path", value=str(path)
        ) from None
    return path


def _write(path: Path, size: int, chunk: bytes) -> bool:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        left = size
        while left > 0:
            left -= os.write(fd, chunk[: min(left, len(chunk))])
        os.fsync(fd)
        if hasattr(os, "posix_fadvise"):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            return True
        return False
    finally:
        os.close(fd)


def _read(path: Path, size: int) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        got = 0
        while True:
            block = os.read(fd, CHUNK_BYTES)
            if not block:
                break
            got += len(block)
    finally:
        os.close(fd)
    if got != size:
        raise ClusterSimError(f"{path}: read {got} bytes back of the {size} written", field="--path", value=str(path))


def measure_storage(
    directory: Path, writers: int, file_bytes: int, *, warmup: int, repeats: int, step: Callable[[], None]
) -> list[StorageResult]:
    """Parallel writes (fsync'd) then reads of ``writers`` files of ``file_bytes`` in a scratch folder of
    ``directory``, removed afterwards."""
    chunk = os.urandom(min(CHUNK_BYTES, file_bytes))
    write_s: list[float] = []
    read_s: list[float] = []
    dropped = True
    with (
        tempfile.TemporaryDirectory(dir=directory, prefix="clustersim-probe-") as scratch,
        ThreadPoolExecutor(writers) as pool,
    ):
        files = [Path(scratch) / f"shard-{i:04d}.bin" for i in range(writers)]
        for repetition in range(warmup + repeats):
            began = time.perf_counter()
            advised = list(pool.map(lambda f: _write(f, file_bytes, chunk), files))
            wrote = time.perf_counter() - began
            began = time.perf_counter()
            list(pool.map(lambda f: _read(f, file_bytes), files))
            read = time.perf_counter() - began
            if repetition >= warmup:
                write_s.append(max(wrote, 1e-9))
                read_s.append(max(read, 1e-9))
                dropped = dropped and all(advised)
            for f in files:
                f.unlink()
            step()
    return [
        StorageResult("write+fsync", writers, file_bytes, summarize(write_s, warmup), dropped),
        StorageResult("read", writers, file_bytes, summarize(read_s, warmup), dropped),
    ]
