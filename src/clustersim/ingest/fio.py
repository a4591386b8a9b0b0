"""Read fio's JSON output (``fio --output-format=json``, also ``json,normal`` and ``json+``) into storage runs
(``storage_runs.StorageRun``), one per reporting group and direction.

Understood: text before and after the JSON object (fio's normal output, warnings), ``global options``
merged under each job's ``job options``, per direction ``io_bytes``, ``bw_bytes`` (fio 3.x; older outputs:
``bw`` in KiB/s), ``iops``, ``runtime`` and completion-latency percentiles (``clat_ns``, older ``clat`` in
microseconds), and of the options ``rw``, ``bs``, ``numjobs``, ``nrfiles``, ``filename``, ``filesize`` or
``size``, ``direct``, ``ioengine``, ``iodepth`` and ``group_reporting``. A group's jobs run together, so their
rates add; one file per job (``nrfiles`` each) unless ``filename`` names a shared one. The output is one
machine's jobs, so a run is one client's (``--nodes`` does not apply to it).

Refused, naming the file and line: no JSON object, JSON cut or broken, no ``jobs``, a job that ended with
an error, a direction with bytes but no rate, fio client/server output (``client_stats``: run fio on each
client instead), a file that moved no bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.ingest.storage_runs import StorageRun, binary_bytes
from clustersim.ingest.text import read_output

MARK = '"fio version"'
PERCENTILES = {"clat_p50_us": "50.000000", "clat_p99_us": "99.000000"}


def looks_like_fio(text: str) -> bool:
    """Whether ``text`` holds fio's JSON output."""
    return MARK in text


def read_fio(path: str | Path) -> list[StorageRun]:
    """The storage runs in ``path`` (see the module's docstring)."""
    path = Path(path)
    text = read_output(path)
    document, start = _document(path, text)
    if "client_stats" in document:
        raise ClusterSimError(
            f"{path}, line {start}: fio client/server output (client_stats) is not read; run fio on each client "
            f"and give --nodes",
            field="FILES",
        )
    jobs = document.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise ClusterSimError(f"{path}, line {start}: the fio JSON has no 'jobs'", field="FILES", value=str(path))
    shared = document.get("global options") or {}
    lines = _job_lines(text, start)
    groups: dict[tuple[int, str], list[tuple[dict[str, Any], dict[str, Any], int]]] = {}
    for index, job in enumerate(jobs):
        line = lines[index] if index < len(lines) else start
        options = {**shared, **(job.get("job options") or {})}
        if job.get("error"):
            raise ClusterSimError(
                f"{path}, line {line}: job {job.get('jobname')!r} ended with error {job['error']}; its rates are not "
                f"a measurement",
                field="FILES",
            )
        for op in ("read", "write"):
            stats = job.get(op) or {}
            if float(stats.get("io_bytes", 0) or 0) > 0:
                groups.setdefault((int(job.get("groupid", 0)), op), []).append((options, stats, line))
    if not groups:
        raise ClusterSimError(f"{path}, line {start}: no job read or wrote a byte", field="FILES", value=str(path))
    version = str(document.get("fio version", "fio"))
    return [_run(path, version, op, members) for (_, op), members in sorted(groups.items())]


def _document(path: Path, text: str) -> tuple[dict[str, Any], int]:
    lines = text.splitlines(keepends=True)
    offset = 0
    for number, line in enumerate(lines, start=1):
        if line.lstrip().startswith("{"):
            try:
                document, _ = json.JSONDecoder().raw_decode(text, offset + len(line) - len(line.lstrip()))
            except json.JSONDecodeError as exc:
                raise ClusterSimError(
                    f"{path}, line {exc.lineno}: the fio JSON is cut or broken ({exc.msg})", field="FILES"
                ) from None
            if isinstance(document, dict) and "fio version" in document:
                return document, number
        offset += len(line)
    raise ClusterSimError(f"{path}: no fio JSON object ('fio version') in the file", field="FILES", value=str(path))


def _job_lines(text: str, start: int) -> list[int]:
    lines = text.splitlines()
    return [n for n, line in enumerate(lines, start=1) if n >= start and line.strip().startswith('"jobname"')]


def _run(path: Path, version: str, op: str, members: list[tuple[dict[str, Any], dict[str, Any], int]]) -> StorageRun:
    rate = total = iops = 0.0
    files = 0
    first_options, first_stats, line = members[0]
    for options, stats, number in members:
        rate += _rate(path, op, stats, number)
        total += float(stats["io_bytes"])
        iops += float(stats.get("iops", 0.0) or 0.0)
        jobs = int(options.get("numjobs", 1)) if _on(options.get("group_reporting")) else 1
        files += 1 if options.get("filename") else jobs * int(options.get("nrfiles", 1))
    details = {
        "version": version,
        "rw": first_options.get("rw", "read" if op == "read" else "write"),
        "bs_bytes": _size(first_options.get("bs")),
        "numjobs": int(first_options.get("numjobs", 1)),
        "iodepth": int(first_options.get("iodepth", 1)),
        "direct": _on(first_options.get("direct")),
        "ioengine": first_options.get("ioengine", "psync"),
        "filesize_bytes": _size(first_options.get("filesize", first_options.get("size"))),
        "runtime_ms": float(first_stats.get("runtime", 0) or 0),
        "iops": round(iops, 3),
        **_percentiles(first_stats),
    }
    return StorageRun(str(path), line, "fio", op, rate, total, max(files, 1), 1, details)


def _rate(path: Path, op: str, stats: dict[str, Any], line: int) -> float:
    if "bw_bytes" in stats:
        return float(stats["bw_bytes"])
    if "bw" in stats:
        return float(stats["bw"]) * 1024  # fio before 3.0: KiB/s
    raise ClusterSimError(f"{path}, line {line}: the {op} side moved bytes but prints no bandwidth", field="FILES")


def _percentiles(stats: dict[str, Any]) -> dict[str, float | None]:
    if "clat_ns" in stats:
        table, scale = (stats["clat_ns"] or {}).get("percentile") or {}, 1e-3
    else:
        table, scale = ((stats.get("clat") or {}).get("percentile") or {}), 1.0
    return {key: (float(table[p]) * scale if p in table else None) for key, p in PERCENTILES.items()}


def _size(text: Any) -> float | None:
    if text is None or text == "":
        return None
    try:
        return binary_bytes(str(text).split(",")[0].split("-")[0])
    except ValueError:
        return None


def _on(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on", "") if value is not None else False
