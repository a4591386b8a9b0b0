"""Read IOR's text output into storage runs (``storage_runs.StorageRun``), one per summary row.

Understood: the ``Summary of all tests:`` table, its columns found by name (IOR 3 and 4 layouts, with or
without the OPs and Stonewall columns): the mean, max and min MiB/s over repetitions, ``#Tasks``, ``tPN``,
``reps``, ``fPP``, ``segcnt``, ``blksiz``, ``xsize`` and ``API``; the ``IOR-x.y`` banner; the ``Options:``
block (``api``, ``access``, ``nodes``, ``tasks``, ``clients per node``, ``xfersize``, ``blocksize``,
``segments``). An excerpt that keeps only ``Max Write:`` / ``Max Read:`` is read too, its layout from the
``Options:`` block or the printed command line (``srun -N 2 --ntasks-per-node 36 ior -t 1m -b 16m -s 4 -F``),
and its rate is the maximum, said in the run's notes. A summary row's rate is the mean over repetitions.

Refused, naming the file and line: a summary row with a field missing or not a number, a ``Summary of all
tests:`` with no row under it, no summary and no ``Max`` line (a cut run), an excerpt that does not say how
many tasks ran, ``--nodes`` that disagrees with the output.
"""

from __future__ import annotations

import math
import re
import shlex
from itertools import pairwise
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.storage_runs import StorageRun, binary_bytes
from clustersim.ingest.text import read_output

MIB = 2**20
_BANNER = re.compile(r"^IOR-(\S+): MPI Coordinated Test of Parallel I/O")
_MAX = re.compile(r"^Max (Write|Read):\s+([\d.]+) MiB/sec")
_OPTION = re.compile(r"^([a-z][a-z ]*[a-z])\s*:\s*(.*?)\s*$")
_LAUNCH = {
    "-N": "nodes",
    "--nodes": "nodes",
    "--ntasks-per-node": "per_node",
    "--npernode": "per_node",
    "-np": "tasks",
    "-n": "tasks",
    "--ntasks": "tasks",
}


def looks_like_ior(text: str) -> bool:
    """Whether ``text`` is IOR output (its banner, its summary table or its ``Max Write/Read`` lines)."""
    return bool(
        "Summary of all tests:" in text
        or any(_BANNER.match(line.strip()) for line in text.splitlines())
        or (any(_MAX.match(line.strip()) for line in text.splitlines()) and " ior " in f" {text} ")
    )


def read_ior(path: str | Path, nodes: int | None = None) -> list[StorageRun]:
    """The storage runs in ``path`` (see the module's docstring)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    version = next((m.group(1) for line in lines if (m := _BANNER.match(line.strip()))), None)
    options = _options(lines)
    rows = _summary(path, lines)
    if rows:
        return [_summary_run(path, version, row, nodes) for row in rows]
    maxima = [
        (n, m.group(1).lower(), float(m.group(2))) for n, line in enumerate(lines, 1) if (m := _MAX.match(line.strip()))
    ]
    if not maxima:
        raise ClusterSimError(
            f"{path}, line {len(lines)}: no 'Summary of all tests:' table and no 'Max Write/Read' line (a cut run?)",
            field="FILES",
            value=str(path),
        )
    layout = {**_command(lines), **options}
    return [_max_run(path, version, line, op, mib_s, layout, nodes) for line, op, mib_s in maxima]


def _options(lines: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    inside = False
    for line in lines:
        text = line.strip()
        if text.startswith("Options:"):
            inside = True
            continue
        if inside:
            found = _OPTION.match(text)
            if not found:
                if text.startswith("Results:"):
                    break
                continue
            out[found.group(1)] = found.group(2)
    return out


def _command(lines: list[str]) -> dict[str, str]:
    """The layout a printed command line gives: the launcher's node and task counts, IOR's -t -b -s -F -a."""
    for line in lines:
        text = re.sub(r"^(?:Command line\s*:|\$)\s*", "", line.strip())
        try:
            words = shlex.split(text)
        except ValueError:
            continue
        at = next((i for i, w in enumerate(words) if Path(w).name == "ior"), None)
        if at is None:
            continue
        out: dict[str, str] = {}
        for flag, value in pairwise(words[: at + 1]):
            if flag in _LAUNCH and value:
                out[_LAUNCH[flag]] = value
        ior = words[at + 1 :]
        for i, word in enumerate(ior):
            flag, _, inline = word.partition("=")
            value = inline or (ior[i + 1] if i + 1 < len(ior) else "")
            names = {"-t": "xfersize", "-b": "blocksize", "-s": "segments", "-a": "api"}
            if flag in names:
                out[names[flag]] = value
            elif flag == "-F":
                out["access"] = "file-per-process"
        if "nodes" in out and "per_node" in out and "tasks" not in out:
            out["tasks"] = str(int(out["nodes"]) * int(out["per_node"]))
        return out
    return {}


def _summary(path: Path, lines: list[str]) -> list[tuple[int, dict[str, str]]]:
    rows: list[tuple[int, dict[str, str]]] = []
    for index, line in enumerate(lines):
        if not line.strip().startswith("Summary of all tests:"):
            continue
        header_at = index + 1
        if header_at >= len(lines) or not lines[header_at].split()[:1] == ["Operation"]:
            raise ClusterSimError(f"{path}, line {index + 1}: 'Summary of all tests:' without its header (cut?)")
        header = lines[header_at].split()
        found = 0
        for number in range(header_at + 1, len(lines)):
            parts = lines[number].split()
            if not parts or parts[0] not in ("write", "read"):
                break
            if len(parts) != len(header):
                raise ClusterSimError(
                    f"{path}, line {number + 1}: a summary row of {len(parts)} fields under a header of "
                    f"{len(header)} (a cut or garbled row?)",
                    field="FILES",
                )
            rows.append((number + 1, dict(zip(header, parts, strict=True))))
            found += 1
        if not found:
            raise ClusterSimError(f"{path}, line {header_at + 1}: the summary table has no row (a cut run?)")
    return rows


def _number(path: Path, line: int, row: dict[str, str], column: str) -> float:
    try:
        return float(row[column])
    except (KeyError, ValueError):
        raise ClusterSimError(
            f"{path}, line {line}: column {column} is {row.get(column)!r}, not a number", field=column
        ) from None


def _summary_run(
    path: Path, version: str | None, numbered: tuple[int, dict[str, str]], nodes: int | None
) -> StorageRun:
    line, row = numbered
    tasks = int(_number(path, line, row, "#Tasks"))
    per_node = int(_number(path, line, row, "tPN"))
    block, xfer = _number(path, line, row, "blksiz"), _number(path, line, row, "xsize")
    segments = int(_number(path, line, row, "segcnt"))
    file_per_process = _number(path, line, row, "fPP") == 1
    printed = math.ceil(tasks / max(per_node, 1))
    _agree(path, line, printed, nodes)
    details = {
        "version": version,
        "api": row.get("API"),
        "tasks": tasks,
        "tasks_per_node": per_node,
        "repetitions": int(_number(path, line, row, "reps")),
        "file_per_process": file_per_process,
        "block_bytes": block,
        "transfer_bytes": xfer,
        "segments": segments,
        "max_mib_s": _number(path, line, row, "Max(MiB)"),
        "min_mib_s": _number(path, line, row, "Min(MiB)"),
        "mean_s": _number(path, line, row, "Mean(s)"),
    }
    mean = _number(path, line, row, "Mean(MiB)") * MIB
    files = tasks if file_per_process else 1
    return StorageRun(str(path), line, "IOR", row["Operation"], mean, tasks * block * segments, files, printed, details)


def _max_run(
    path: Path, version: str | None, line: int, op: str, mib_s: float, layout: dict[str, str], nodes: int | None
) -> StorageRun:
    if "tasks" not in layout:
        raise ClusterSimError(
            f"{path}, line {line}: the output does not say how many tasks ran (no Options block, no command line)",
            field="FILES",
        )
    tasks = int(layout["tasks"])
    try:
        block = binary_bytes(layout.get("blocksize", "1m").replace(" ", ""))
        xfer = binary_bytes(layout.get("xfersize", "256k").replace(" ", ""))
    except ValueError as exc:
        raise ClusterSimError(f"{path}, line {line}: {exc}", field="FILES") from None
    segments = int(layout.get("segments", 1))
    printed = int(layout["nodes"]) if "nodes" in layout else None
    if printed is None and "clients per node" in layout:  # IOR 3 prints tasks and clients per node
        printed = math.ceil(tasks / max(int(layout["clients per node"]), 1))
    if printed is not None:
        _agree(path, line, printed, nodes)
    clients = printed or nodes or 1
    file_per_process = layout.get("access", "").startswith("file-per-process")
    notes = ["the excerpt keeps only the maximum over repetitions: its 'Max' rate is the measurement"]
    if printed is None and nodes is None:
        notes.append("one client machine assumed (give --nodes)")
    details = {
        "version": version,
        "api": layout.get("api", "POSIX"),
        "tasks": tasks,
        "file_per_process": file_per_process,
        "block_bytes": block,
        "transfer_bytes": xfer,
        "segments": segments,
        "max_mib_s": mib_s,
    }
    files = tasks if file_per_process else 1
    return StorageRun(
        str(path), line, "IOR", op, mib_s * MIB, tasks * block * segments, files, clients, details, tuple(notes)
    )


def _agree(path: Path, line: int, printed: int, nodes: int | None) -> None:
    if nodes is not None and nodes != printed:
        raise ClusterSimError(
            f"{path}, line {line}: the output says {printed} node(s), --nodes says {nodes}",
            field="--nodes",
            value=nodes,
        )
