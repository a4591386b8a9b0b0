"""Request traces: when each request arrives, how long its prompt and output are, and which prompt prefix
it shares with earlier requests.

Two formats, one request a row:

* **CSV** with a header naming ``arrival_s``, ``input_tokens`` and ``output_tokens`` (other columns ignored), or
  the Azure LLM inference traces' ``TIMESTAMP`` (a date and time; arrivals counted from the first),
  ``ContextTokens`` and ``GeneratedTokens`` (Azure/AzurePublicDataset, the Splitwise paper's, ISCA 2024);
* **JSON Lines** (a ``.jsonl`` file, or any file whose first character is ``{``), each line an object with
  either those three keys or the keys of the Mooncake traces (kvcache-ai/Mooncake ``FAST25-release/traces``,
  the FAST'25 paper's conversation, tool-and-agent and synthetic workloads): ``timestamp`` (ms),
  ``input_length``, ``output_length`` and ``hash_ids``.

Either may be gzip-compressed (``.gz``: ``trace.jsonl.gz``).

``hash_ids`` name the prompt's blocks of ``HASH_BLOCK_TOKENS`` tokens, in order, so that two requests with
the same first k ids share their first k blocks (the last id covers the prompt's remainder). The serving
simulator takes from them how much of each prompt an engine's prefix cache already holds
(``cached_prefix_tokens``): the leading blocks still cached when the request arrives, under a cache of the
replica's KV capacity that evicts the least recently used block. That is how vLLM's and SGLang's prefix
caches evict (a block no running request holds, the least recently used first); it takes each request's
blocks as used when it arrives (not when its prompt runs) and leaves out the output blocks, which occupy
the cache without being shared (343 tokens a request in the conversation trace, against 12,035 of prompt).
"""

from __future__ import annotations

import gzip
import json
import math
import zlib
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError

HASH_BLOCK_TOKENS = 512  # Mooncake's hash_ids: "The block size is 512 tokens" (FAST25-release/README.md)
COLUMNS = ("arrival_s", "input_tokens", "output_tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")  # TIMESTAMP: e.g. 2023-11-16 18:17:03.9799600
MOONCAKE_KEYS = ("timestamp", "input_length", "output_length")  # timestamp in ms


@dataclass(frozen=True)
class Trace:
    """Requests read from a trace: arrival times (s, sorted) and lengths (tokens); ``prefix_hashes``: each
    request's prompt block ids (blocks of ``HASH_BLOCK_TOKENS``), None where the trace gives none."""

    arrival_s: npt.NDArray[np.float64]
    input_tokens: npt.NDArray[np.int64]
    output_tokens: npt.NDArray[np.int64]
    prefix_hashes: tuple[tuple[int, ...], ...] | None = None


Row = tuple[float, int, int, tuple[int, ...] | None]


def _refused(field: str, path: Path, message: str) -> ClusterSimError:
    """The error for a trace file that cannot be read as one: ``field: message``, naming the file."""
    return ClusterSimError(f"{field}: {message}", field=field, value=str(path))


def read_trace(path: str | Path, field: str = "--trace") -> Trace:
    """The trace in ``path`` (CSV or JSON Lines, see the module), sorted by arrival; ``ClusterSimError``
    naming ``field``, the file, the line and what is wrong."""
    path = Path(path)
    zipped = path.suffix.lower() == ".gz"
    try:
        text = gzip.decompress(path.read_bytes()).decode("utf-8") if zipped else path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError, zlib.error) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise _refused(field, path, f"cannot read {path}: {reason}") from None
    lines = text.splitlines()
    inner = path.with_suffix("") if zipped else path
    is_jsonl = inner.suffix.lower() in (".jsonl", ".json") or text.lstrip().startswith("{")
    rows = _jsonl_rows(lines, path, field) if is_jsonl else _csv_rows(lines, path, field)
    if not rows:
        raise _refused(field, path, f"{path} has no requests")
    hashed = [row[3] is not None for row in rows]
    if any(hashed) and not all(hashed):
        line = hashed.index(not hashed[0]) + 1
        raise _refused(field, path, f"{path} line {line}: hash_ids must be on every request or on none")
    rows.sort(key=lambda row: row[0])  # stable: requests at the same time keep the file's order
    arrival = np.array([row[0] for row in rows], dtype=np.float64)
    inputs = np.array([row[1] for row in rows], dtype=np.int64)
    outputs = np.array([row[2] for row in rows], dtype=np.int64)
    hashes = tuple(row[3] for row in rows if row[3] is not None) if all(hashed) else None
    return Trace(arrival, inputs, outputs, hashes)


def _checked(
    values: tuple[float, float, float], keys: Sequence[str], where: str, field: str, path: Path
) -> tuple[float, int, int]:
    arrival, n, o = values
    if not (math.isfinite(arrival) and arrival >= 0 and math.isfinite(n) and n >= 1 and math.isfinite(o) and o >= 1):
        raise _refused(
            field, path, f"{where}: {keys[0]} must be >= 0 and {keys[1]}/{keys[2]} >= 1, got {arrival:g}, {n:g}, {o:g}"
        )
    return arrival, round(n), round(o)


def _csv_rows(lines: list[str], path: Path, field: str) -> list[Row]:
    header = [name.strip() for name in lines[0].split(",")] if lines else []
    names = next((names for names in (COLUMNS, AZURE_COLUMNS) if all(name in header for name in names)), None)
    if names is None:
        missing = [name for name in COLUMNS if name not in header]
        raise _refused(
            field,
            path,
            f"{path} needs a CSV header with {', '.join(COLUMNS)} or Azure's {', '.join(AZURE_COLUMNS)} (or JSON "
            f"Lines, see clustersim serve --help); missing {', '.join(missing)}",
        )
    columns = [header.index(name) for name in names]
    rows: list[Row] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split(",")
        try:
            when, n, o = (cells[i].strip() for i in columns)
            arrival = float(when) if names is COLUMNS else _seconds(when)
            values = (arrival, float(n), float(o))
        except (ValueError, IndexError):
            raise _refused(
                field, path, f"{path} line {number}: {line.strip()!r} is not numbers in {', '.join(names)}"
            ) from None
        rows.append((*_checked(values, names, f"{path} line {number}", field, path), None))
    if names is AZURE_COLUMNS:  # arrivals from the first request
        start = min(row[0] for row in rows) if rows else 0.0
        rows = [(arrival - start, n, o, hashes) for arrival, n, o, hashes in rows]
    return rows


def _seconds(timestamp: str) -> float:
    """A date and time (ISO 8601, UTC taken) as seconds since the epoch."""
    return datetime.fromisoformat(timestamp).replace(tzinfo=UTC).timestamp()


def _jsonl_rows(lines: list[str], path: Path, field: str) -> list[Row]:
    rows: list[Row] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _refused(field, path, f"{where}: not JSON ({exc.msg})") from None
        if not isinstance(item, dict):
            raise _refused(field, path, f"{where}: each line must be a JSON object")
        keys, scale = (COLUMNS, 1.0) if all(k in item for k in COLUMNS) else (MOONCAKE_KEYS, 1e-3)
        missing = [k for k in keys if k not in item]
        if missing:
            raise _refused(
                field,
                path,
                f"{where}: needs {', '.join(COLUMNS)} or Mooncake's {', '.join(MOONCAKE_KEYS)}; "
                f"missing {', '.join(missing)}",
            )
        values = [item[k] for k in keys]
        if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
            raise _refused(field, path, f"{where}: {', '.join(keys)} must be numbers, got {values}")
        arrival, n, o = _checked((values[0], values[1], values[2]), keys, where, field, path)
        arrival *= scale
        rows.append((arrival, n, o, _hash_ids(item.get("hash_ids"), n, where, field, path)))
    return rows


def _hash_ids(value: object, n: int, where: str, field: str, path: Path) -> tuple[int, ...] | None:
    """A request's prompt block ids: one per ``HASH_BLOCK_TOKENS`` of its prompt, the last maybe partial."""
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(h, int) and not isinstance(h, bool) for h in value):
        raise _refused(field, path, f"{where}: hash_ids must be a list of integers")
    blocks = -(-n // HASH_BLOCK_TOKENS)
    if len(value) != blocks:
        raise _refused(
            field,
            path,
            f"{where}: {len(value)} hash_ids for a {n:,}-token prompt; blocks of {HASH_BLOCK_TOKENS} "
            f"tokens make {blocks}",
        )
    return tuple(value)


class PrefixCache:
    """One engine's prefix cache: ``capacity_blocks`` blocks of ``HASH_BLOCK_TOKENS``, the least recently
    used evicted first (``inf``: nothing evicted)."""

    def __init__(self, capacity_blocks: float) -> None:
        self.capacity_blocks = capacity_blocks
        self.blocks: OrderedDict[int, None] = OrderedDict()

    def found_tokens(self, blocks: Sequence[int], prompt_tokens: int) -> int:
        """The prompt tokens the cache holds now: its leading blocks found, at most all but the last token."""
        found = 0
        for h in blocks:
            if h not in self.blocks:
                break
            found += 1
        return min(found * HASH_BLOCK_TOKENS, int(prompt_tokens) - 1)

    def use(self, blocks: Sequence[int]) -> None:
        """A request uses ``blocks`` (found or added): they become the most recently used."""
        cache = self.blocks
        for h in blocks:
            cache[h] = None
            cache.move_to_end(h)
        while len(cache) > self.capacity_blocks:
            cache.popitem(last=False)


def cached_prefix_tokens(
    hashes: Sequence[Sequence[int]], input_tokens: Sequence[int], capacity_blocks: float
) -> npt.NDArray[np.int64]:
    """Per request, in arrival order, the prompt tokens a prefix cache of ``capacity_blocks`` blocks of
    ``HASH_BLOCK_TOKENS`` already holds when it arrives: its leading blocks that an earlier request used and
    that the least-recently-used eviction has kept, at most all but its last token (which always runs).

    ``capacity_blocks`` ``inf``: nothing is evicted (every repeat is found). Each request then uses all its
    blocks, the ones it found and the ones it adds, which become the most recently used."""
    cache = PrefixCache(capacity_blocks)
    cached = np.zeros(len(hashes), dtype=np.int64)
    for r, (blocks, n) in enumerate(zip(hashes, input_tokens, strict=True)):
        cached[r] = cache.found_tokens(blocks, n)
        cache.use(blocks)
    return cached
