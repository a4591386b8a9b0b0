"""Read OSU micro-benchmark point-to-point output (``osu_latency``, ``osu_bw``, ``osu_bibw``) into a transport
measurement, and compare it with the host data-path model (``clustersim.network.transport.datapath``).

The case format has no transport kind, so a run is not a case: it is this module's record (``OsuRun``: the
test, its version, host or device buffers, and (size, value, line) rows; latency in microseconds, bandwidth
in OSU's MB/s = 1e6 bytes/s), and ``compare_osu`` sets it beside the model on a catalogued instance:
``osu_latency`` against one message's one-way time at each size; ``osu_bw`` (a window of messages in flight)
and ``osu_bibw`` (halved: per direction) at their largest size against the path's streaming ceiling. Host
buffers take the EFA host path (no staging copies); device buffers (``-d cuda``, ``# Send Buffer on DEVICE``)
take the EFA path the catalog gives the instance. One NIC: an MPI that stripes over several rails (Intel
MPI on p5) beats it, which the comparison shows rather than hides.

Understood: the ``# OSU MPI[-CUDA] Latency|Bandwidth|Bi-Directional Bandwidth Test vX`` header, ``# Size``
column header (``Latency (us)``, ``Avg Latency(us)``, ``Bandwidth (MB/s)``), launcher prefixes (``0: ``,
``[1,0]<stdout>:``). Refused, naming the file and line: a row that is not two numbers, sizes out of order, no
row, a file holding more than one test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.catalog.schema import Instance
from clustersim.errors import ClusterSimError
from clustersim.ingest.text import read_output
from clustersim.network.transport.datapath import DataPath, PathKind, build_path

_HEADER = re.compile(r"^# OSU MPI(-CUDA)? (Latency|Bandwidth|Bi-Directional Bandwidth) Test (v\S+)")
_PREFIX = re.compile(r"^\s*(?:\[[^\]]*\]<std(?:out|err)>:|\d+:)\s?")
_DEVICE = re.compile(r"Buffer on DEVICE|-d cuda", re.IGNORECASE)
TESTS = {"Latency": "osu_latency", "Bandwidth": "osu_bw", "Bi-Directional Bandwidth": "osu_bibw"}


@dataclass(frozen=True)
class OsuRun:
    """One OSU point-to-point run: ``rows`` are (message bytes, value, line): microseconds for
    ``osu_latency``, MB/s (1e6 bytes) for ``osu_bw`` and ``osu_bibw`` (both directions summed)."""

    path: str
    line: int
    test: str
    version: str
    device_buffers: bool
    rows: tuple[tuple[int, float, int], ...]


def looks_like_osu(text: str) -> bool:
    """Whether ``text`` is OSU point-to-point output."""
    return any(_HEADER.match(_PREFIX.sub("", line, count=1)) for line in text.splitlines())


def read_osu(path: str | Path) -> OsuRun:
    """The OSU run in ``path`` (see the module's docstring)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    header: tuple[int, re.Match[str]] | None = None
    device = False
    rows: list[tuple[int, float, int]] = []
    for number, raw in enumerate(lines, start=1):
        line = _PREFIX.sub("", raw, count=1).strip()
        found = _HEADER.match(line)
        if found:
            if header is not None:
                raise ClusterSimError(f"{path}, line {number}: a second OSU test in one file; split them")
            header, device = (number, found), device or bool(found.group(1))
            continue
        if line.startswith("#"):
            device = device or bool(_DEVICE.search(line))
            continue
        if not line or header is None:
            continue
        rows.append(_row(path, line, number, rows))
    if header is None:
        raise ClusterSimError(f"{path}: no '# OSU MPI ... Test' header", field="FILES", value=str(path))
    if not rows:
        raise ClusterSimError(f"{path}, line {header[0]}: no measured row under the header (a cut run?)")
    test = TESTS[header[1].group(2)]
    return OsuRun(str(path), header[0], test, header[1].group(3), device, tuple(rows))


def _row(path: Path, line: str, number: int, rows: list[tuple[int, float, int]]) -> tuple[int, float, int]:
    parts = line.split()
    try:
        size, value = int(parts[0]), float(parts[1])
    except (ValueError, IndexError):
        raise ClusterSimError(
            f"{path}, line {number}: {line!r} is not a size and a value (a cut or garbled row?)", field="FILES"
        ) from None
    if size < 0 or not value >= 0:
        raise ClusterSimError(f"{path}, line {number}: size {size}, value {value}: both must be >= 0")
    if rows and size <= rows[-1][0]:
        raise ClusterSimError(f"{path}, line {number}: size {size} after {rows[-1][0]}: rows out of order")
    return size, value, number


def nic_path(instance: Instance, kind: PathKind, device_buffers: bool) -> DataPath:
    """The data-path model of one of ``instance``'s NICs on path ``kind`` (host or device buffers)."""
    network = instance.network
    return build_path(
        kind,
        line_bits_per_s=float(network.card_bandwidth_bits_per_s.value),
        buffer="gpu" if device_buffers else "host",
        adapter=network.adapter,
        pcie_gen4=instance.accelerator.startswith("a100"),
    )


def compare_one_way(
    test: str, rows: tuple[tuple[int, float, int], ...], instance: Instance, kind: PathKind, device_buffers: bool
) -> dict[str, Any]:
    """Measured one-way microseconds per (size, value, line) row beside one message's modelled one-way time
    on ``kind`` (osu_latency, fi_pingpong's usec/xfer)."""
    path = nic_path(instance, kind, device_buffers)
    compared = [(size, value, path.one_way_s(max(size, 1)) * 1e6, line) for size, value, line in rows]
    return _comparison(test, instance, kind, device_buffers, "us one-way", compared)


def compare_osu(run: OsuRun, instance: Instance) -> dict[str, Any]:
    """``run`` beside the data-path model of one of ``instance``'s NICs (see the module's docstring): the
    path, and per compared size the measured and modelled value and their ratio less one."""
    gdr = bool(instance.network.gpudirect_rdma.value)
    kind = (PathKind.EFA_GDR if gdr else PathKind.EFA_HOST) if run.device_buffers else PathKind.EFA_HOST
    if run.test == "osu_latency":
        return compare_one_way(run.test, run.rows, instance, kind, run.device_buffers)
    size, value, line = run.rows[-1]
    per_direction = value / 2 if run.test == "osu_bibw" else value
    ceiling = nic_path(instance, kind, run.device_buffers).ceiling_bytes_per_s / 1e6
    return _comparison(
        run.test, instance, kind, run.device_buffers, "MB/s per direction", [(size, per_direction, ceiling, line)]
    )


def _comparison(
    test: str,
    instance: Instance,
    kind: PathKind,
    device_buffers: bool,
    unit: str,
    compared: list[tuple[int, float, float, int]],
) -> dict[str, Any]:
    return {
        "test": test,
        "instance": instance.id,
        "path": kind.value,
        "buffers": "device" if device_buffers else "host",
        "nic_gbps": float(instance.network.card_bandwidth_bits_per_s.value) / 1e9,
        "unit": unit,
        "rows": [_row_out(s, m, p, n) for s, m, p, n in compared],
    }


def _row_out(size: int, measured: float, model: float, line: int) -> dict[str, Any]:
    error = round(model / measured - 1, 4) if measured else None
    return {"size_bytes": size, "line": line, "measured": measured, "model": round(model, 3), "error": error}


def summary_line(comparison: dict[str, Any]) -> str:
    """One line of ``compare_osu``'s result: the smallest and the largest compared size."""
    rows = comparison["rows"]
    shown = [rows[0]] if len(rows) == 1 else [rows[0], rows[-1]]
    parts = [
        f"{r['size_bytes']} B: measured {r['measured']:g}, model {r['model']:g} {comparison['unit']}"
        + (f" ({r['error']:+.1%})" if r["error"] is not None else "")
        for r in shown
    ]
    return (
        f"{comparison['test']} vs the {comparison['path']} data path ({comparison['buffers']} buffers, one "
        f"{comparison['nic_gbps']:g} Gbit/s NIC of {comparison['instance']}): " + "; ".join(parts)
    )
