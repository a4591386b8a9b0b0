"""Read libfabric's ``fi_pingpong`` (fabtests) output into the transport measurement OSU's reader makes, and
compare its per-transfer time with the data-path model through ``osu.compare_one_way``.

fi_pingpong sends ``iters`` messages each way; ``total`` counts both directions, ``MB/sec`` is total / time
(1e6 bytes) and ``usec/xfer`` is time / (2 x iters): one message's one-way time, what ``osu_latency``
prints. Only the latter is compared (a ping-pong's MB/sec is no streaming rate). Few iterations (the default
10) include the connection set-up in the smallest size's time, which the comparison shows as it is.

Understood: the table of either layout (``bytes iters total time MB/sec usec/xfer Mxfers/sec`` and the newer
``bytes #sent #ack total time ...``), sizes with k/m/g suffixes (binary: ``1k`` = 1,024 bytes), the provider
from a printed command line (``fi_pingpong -p efa``, ``-p "tcp;ofi_rxm"``: the core provider, ``tcp``) or a
``-v`` debug line (``- provider : efa``), launcher or rank prefixes (``[rank 1]``, ``0: ``). Compared with
``--instance``: ``efa`` on the EFA host path, ``tcp`` and ``sockets`` on the TCP/ENA path; other providers
(verbs, cxi, psm3, shm) are read but have no path in the model. Refused, naming the file and line: a row
that is not the header's fields or not numbers, sizes out of order, a header with no row (a cut run), a
second table in one file (server and client logs: split them), command lines naming different providers, a
command line of another fabtest (``fi_msg_bw``, ``fi_rdm_tagged_bw``: the same table, but their usec/xfer is
not a one-way time).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.catalog.schema import Instance
from clustersim.errors import ClusterSimError
from clustersim.ingest.osu import compare_one_way
from clustersim.ingest.storage_runs import binary_bytes
from clustersim.ingest.text import read_output
from clustersim.network.transport.datapath import PathKind

_PREFIX = re.compile(r"^\s*(?:\[rank \d+\]|\[[^\]]*\]<std(?:out|err)>:|\d+:)\s?")
_HEADER = re.compile(r"^bytes\s+(?:iters|#sent)\s")
_PROGRAM = re.compile(r"\b(fi_[a-z_]+(?:pingpong|_bw|_lat))\b")
_DEBUG = re.compile(r"-\s*provider\s*:\s*\[?([\w;]+)\]?")
PATHS = {"efa": PathKind.EFA_HOST, "tcp": PathKind.TCP_ENA, "sockets": PathKind.TCP_ENA}


@dataclass(frozen=True)
class PingpongRun:
    """One fi_pingpong table: ``rows`` are (message bytes, usec per transfer, line); ``provider`` the core
    provider (None: not printed); ``details`` per size the iterations and MB/sec printed."""

    path: str
    line: int
    provider: str | None
    rows: tuple[tuple[int, float, int], ...]
    details: tuple[dict[str, float], ...]


def looks_like_fi_pingpong(text: str) -> bool:
    """Whether ``text`` holds an fi_pingpong (fabtests) table."""
    return any(_HEADER.match(_PREFIX.sub("", line, count=1).strip()) for line in text.splitlines())


def read_fi_pingpong(path: str | Path) -> PingpongRun:
    """The fi_pingpong run in ``path`` (see the module's docstring)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    header: tuple[int, list[str]] | None = None
    providers: dict[str, int] = {}
    rows: list[tuple[int, float, int]] = []
    details: list[dict[str, float]] = []
    for number, raw in enumerate(lines, start=1):
        line = _PREFIX.sub("", raw, count=1).strip()
        if _HEADER.match(line):
            if header is not None:
                raise ClusterSimError(f"{path}, line {number}: a second fi_pingpong table in one file; split them")
            header = (number, line.split())
            continue
        _refuse_other_test(path, number, line)
        provider = _provider(line)
        if provider is not None:
            providers.setdefault(provider, number)
            continue
        if header is None or not line:
            continue
        if not line.split()[0][:1].isdigit():
            continue
        size, usec, extra = _row(path, number, line, header[1])
        if rows and size <= rows[-1][0]:
            raise ClusterSimError(f"{path}, line {number}: size {size} after {rows[-1][0]}: rows out of order")
        rows.append((size, usec, number))
        details.append(extra)
    if header is None:
        raise ClusterSimError(f"{path}: no fi_pingpong table ('bytes #sent ...' header)", field="FILES")
    if not rows:
        raise ClusterSimError(f"{path}, line {header[0]}: no measured row under the header (a cut run?)")
    if len(providers) > 1:
        named = ", ".join(f"{p} (line {n})" for p, n in providers.items())
        raise ClusterSimError(f"{path}: command lines name different providers: {named}", field="FILES")
    provider = next(iter(providers), None)
    return PingpongRun(str(path), header[0], provider, tuple(rows), tuple(details))


def _refuse_other_test(path: Path, number: int, line: str) -> None:
    """fabtests' bandwidth tests print the same table; their usec/xfer is time / iterations, one way at a time
    but back to back, not a ping-pong's half round trip."""
    for program in _PROGRAM.findall(line):
        if "pingpong" not in program:
            raise ClusterSimError(
                f"{path}, line {number}: {program}'s table, not fi_pingpong's: its usec/xfer is no one-way "
                f"latency (only pingpong tests are read)",
                field="FILES",
            )


def _provider(line: str) -> str | None:
    debug = _DEBUG.search(line)
    if debug and "pingpong" in line:
        return debug.group(1).split(";")[0].lower()
    if not re.search(r"\bfi_\w*pingpong\b", line):
        return None
    try:
        words = shlex.split(line)
    except ValueError:
        return None
    for flag, value in zip(words, [*words[1:], ""], strict=True):
        if flag == "-p" and value:
            return value.split(";")[0].lower()
    return None


def _row(path: Path, number: int, line: str, header: list[str]) -> tuple[int, float, dict[str, float]]:
    parts = line.split()
    if len(parts) != len(header):
        raise ClusterSimError(
            f"{path}, line {number}: {line!r} has {len(parts)} fields under a header of {len(header)} (a cut row?)",
            field="FILES",
        )
    cells = dict(zip(header, parts, strict=True))
    try:
        size = int(binary_bytes(cells["bytes"]))
        usec = float(cells["usec/xfer"])
        mb_s = float(cells["MB/sec"])
        iters = binary_bytes(cells.get("iters", cells.get("#sent", "0")))
    except (KeyError, ValueError):
        raise ClusterSimError(
            f"{path}, line {number}: {line!r} is not a size and numbers (a garbled row?)", field="FILES"
        ) from None
    return size, usec, {"iterations": iters, "mb_per_s": mb_s}


def compare_fi_pingpong(run: PingpongRun, instance: Instance) -> dict[str, Any] | None:
    """``run``'s usec/xfer beside the modelled one-way time of one of ``instance``'s NICs on the provider's
    path; None where the provider has no path in the model (or was not printed)."""
    kind = PATHS.get(run.provider or "")
    if kind is None:
        return None
    return compare_one_way("fi_pingpong", run.rows, instance, kind, device_buffers=False)


def no_comparison_note(run: PingpongRun) -> str:
    """Why ``compare_fi_pingpong`` gave nothing."""
    if run.provider is None:
        return "the provider is not printed (fi_pingpong -p ...): no path to compare with"
    return f"provider {run.provider!r} has no path in the data-path model (efa, tcp): read, not compared"
