"""A sweep's rows as flat records (one column per input and per leaf of the result), and as CSV, JSON
or Parquet (with pyarrow, when it is installed)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, TextIO

from clustersim.errors import ClusterSimError

FORMATS = ("table", "csv", "json", "parquet")
Scalar = str | int | float | bool | None


def public(row: dict[str, Any]) -> dict[str, Any]:
    """A stored row as ``sweep --json`` prints it: id, inputs, the command's result or its error, wall time."""
    return {key: row[key] for key in ("id", "inputs", "result", "error", "wall_s")}


def flatten(value: Any, prefix: str = "") -> dict[str, Scalar]:
    """A JSON value's leaves by dotted path (a list's items by index: ``rows.0.busbw_GBps``)."""
    if isinstance(value, dict):
        out: dict[str, Scalar] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list):
        out = {}
        for index, item in enumerate(value):
            out.update(flatten(item, f"{prefix}.{index}" if prefix else str(index)))
        return out
    return {prefix: value}


def records(rows: list[dict[str, Any]]) -> list[dict[str, Scalar]]:
    """One flat record per row: seq, id, status, wall_s, ``inputs.KEY``, error, ``result.PATH``."""
    out = []
    for row in rows:
        inputs = {
            f"inputs.{key}": ",".join(map(str, value)) if isinstance(value, list) else value
            for key, value in row["inputs"].items()
        }
        error = row["error"]["error"] if row["error"] else None
        record: dict[str, Scalar] = {
            "seq": row["seq"],
            "id": row["id"],
            "status": "error" if error else "ok",
            "wall_s": row["wall_s"],
            **inputs,
            "error": error,
        }
        record.update(flatten(row["result"] or {}, "result"))
        out.append(record)
    return out


def columns(flat: list[dict[str, Scalar]]) -> list[str]:
    """Every column of ``flat``, in the order first seen."""
    return list(dict.fromkeys(key for record in flat for key in record))


def headline(flat: list[dict[str, Scalar]], limit: int = 5) -> list[str]:
    """The result's numbers that differ between points (every number where one point succeeded), the shallowest
    first, then in order, at most ``limit``; intervals, sensitivity tables and sources are left to the export."""
    found = []
    for key in columns(flat):
        if not key.startswith("result.") or any(part in key for part in ("interval", "sensitivity", "source")):
            continue
        values = [record.get(key) for record in flat if record.get("status") == "ok"]
        numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
        if numbers and len(numbers) == len(values) and (len(set(numbers)) > 1 or len(values) == 1):
            found.append(key)
    found.sort(key=lambda key: key.count("."))
    return found[:limit]


def write_csv(flat: list[dict[str, Scalar]], stream: TextIO) -> None:
    """The records as CSV with a header row; a missing leaf is an empty cell."""
    writer = csv.DictWriter(stream, fieldnames=columns(flat), lineterminator="\n")
    writer.writeheader()
    writer.writerows(flat)


def write_json(rows: list[dict[str, Any]], stream: TextIO) -> None:
    """``{"rows": [...]}`` as ``sweep --json`` prints it."""
    stream.write(json.dumps({"rows": [public(row) for row in rows]}, indent=2, allow_nan=False) + "\n")


def write_parquet(flat: list[dict[str, Scalar]], path: Path) -> None:
    """The records as a Parquet file (a column whose values mix types is written as text)."""
    import importlib

    try:  # imported by name: pyarrow is optional, and has no type stubs
        pa = importlib.import_module("pyarrow")
        pq = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise ClusterSimError(
            "--format parquet needs pyarrow, which is not installed: pip install pyarrow (or use csv or json)",
            field="--format",
            value="parquet",
        ) from None
    data: dict[str, list[Scalar]] = {}
    for key in columns(flat):
        values = [record.get(key) for record in flat]
        kinds = {type(v) for v in values if v is not None}
        if kinds == {int, float}:
            values = [None if v is None else float(v) for v in values]
        elif len(kinds) > 1:
            values = [None if v is None else str(v) for v in values]
        data[key] = values
    pq.write_table(pa.table(data), str(path))
