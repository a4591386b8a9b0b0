"""The sweep store: SQLite in WAL mode, one row per finished point, one transaction per finished partition.

Tables: ``meta`` (the spec's text, the command, the clustersim version, the point count), ``runs`` (one per
start or resume: executor, workers, start time) and ``points`` (id, order, inputs JSON, the command's JSON
result or its error, wall seconds, attempts, the run that computed it). A partition's rows are written in
one transaction, so a killed sweep leaves every partition whole or absent, never half-written.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError

MEMORY = ":memory:"
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run INTEGER PRIMARY KEY, started_unix_s REAL NOT NULL, executor TEXT NOT NULL, workers INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS points (
    id TEXT PRIMARY KEY,
    seq INTEGER NOT NULL UNIQUE,
    inputs TEXT NOT NULL,
    result TEXT,
    error TEXT,
    wall_s REAL NOT NULL,
    attempts INTEGER NOT NULL,
    partition INTEGER NOT NULL,
    run INTEGER NOT NULL REFERENCES runs(run),
    finished_unix_s REAL NOT NULL,
    CHECK ((result IS NULL) <> (error IS NULL))
);
"""


@dataclass(frozen=True)
class Outcome:
    """What running one point gave: the command's JSON result or its error (JSON text), and its wall time."""

    id: str
    result: str | None
    error: str | None
    wall_s: float


class SweepStore:
    """A sweep's rows in SQLite (``:memory:`` keeps them for one run only)."""

    def __init__(self, path: Path | str, option: str = "--store") -> None:
        self.path = str(path)
        try:
            self._db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            if self.path != MEMORY:
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise ClusterSimError(f"{option}: {self.path} is not a sweep store: {exc}", field=option) from None

    def close(self) -> None:
        """Close the connection (SQLite folds the write-ahead log back into the file)."""
        self._db.close()

    def meta(self) -> dict[str, str]:
        """The store's meta table: ``spec``, ``command``, ``version``, ``points``; empty for a new store."""
        return dict(self._db.execute("SELECT key, value FROM meta").fetchall())

    def begin_sweep(self, meta: dict[str, str], executor: str, workers: int) -> int:
        """Record the sweep's meta (a new store) and a new run; return the run's number."""
        with self._transaction():
            if not self.meta():
                self._db.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", sorted(meta.items()))
            cursor = self._db.execute(
                "INSERT INTO runs (started_unix_s, executor, workers) VALUES (?, ?, ?)",
                (time.time(), executor, workers),
            )
        return int(cursor.lastrowid or 0)

    def finished_ids(self) -> set[str]:
        """The ids of every point with a row."""
        return {row[0] for row in self._db.execute("SELECT id FROM points")}

    def commit_partition(
        self,
        outcomes: list[Outcome],
        seqs: dict[str, int],
        inputs: dict[str, str],
        partition: int,
        run: int,
        attempts: int,
    ) -> None:
        """Write one finished partition's rows in one transaction."""
        now = time.time()
        rows = [
            (o.id, seqs[o.id], inputs[o.id], o.result, o.error, o.wall_s, attempts, partition, run, now)
            for o in outcomes
        ]
        with self._transaction():
            self._db.executemany(
                "INSERT INTO points (id, seq, inputs, result, error, wall_s, attempts, partition, run, "
                "finished_unix_s) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )

    def rows(self) -> list[dict[str, Any]]:
        """Every row in the spec's order: id, seq, inputs, result (or None), error (or None), wall_s,
        attempts, partition and run."""
        cursor = self._db.execute(
            "SELECT id, seq, inputs, result, error, wall_s, attempts, partition, run FROM points ORDER BY seq"
        )
        return [
            {
                "id": pid,
                "seq": seq,
                "inputs": json.loads(inputs),
                "result": None if result is None else json.loads(result),
                "error": None if error is None else json.loads(error),
                "wall_s": wall_s,
                "attempts": attempts,
                "partition": partition,
                "run": run,
            }
            for pid, seq, inputs, result, error, wall_s, attempts, partition, run in cursor
        ]

    def _transaction(self) -> _Transaction:
        return _Transaction(self._db)


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on an exception."""

    def __init__(self, db: sqlite3.Connection) -> None:
        self._db = db

    def __enter__(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: object, *_: object) -> None:
        self._db.execute("COMMIT" if kind is None else "ROLLBACK")


def read_store(path: Path, option: str) -> tuple[dict[str, str], list[dict[str, Any]]]:
    """A finished or partial sweep's metadata and rows, read from ``path`` (given as ``option``); a missing
    file or one that holds no sweep is refused in one line naming the option."""
    if not path.is_file():
        raise ClusterSimError(f"{option}: no sweep store at {path}", field=option, value=str(path))
    opened = SweepStore(path, option)
    try:
        meta, rows = opened.meta(), opened.rows()
    finally:
        opened.close()
    if not meta:
        raise ClusterSimError(f"{option}: {path} holds no sweep", field=option, value=str(path))
    return meta, rows
