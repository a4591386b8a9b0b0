"""Read what an nccl-tests ``*_perf`` binary prints: its header, the devices and the result table.

Understood: every binary's table (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``alltoall``,
``broadcast``, ``reduce``, ``sendrecv``), its out-of-place and in-place column groups, the columns as
the header line names them (``redop`` and ``root`` present or not; ``#wrong`` or the older ``error``;
extra trailing columns such as rccl-tests' ``algo proto nchannels`` are ignored), several tables in one
file (one per ``# Collective test starting:`` or ``# nThread`` header, ``-d all`` types in one table),
line prefixes that launchers add (``0: `` from ``srun -l``, ``[1,0]<stdout>:`` from ``mpirun
--tag-output``), the ``nThread``/``nGpus``/``graph`` header, the ``#  Rank N Group G Pid P on HOST
device D [BUS] GPU NAME`` lines (ranks, hosts, the GPU's name), the nccl-tests and NCCL versions, and
the ``# Avg bus bandwidth`` footer. ``-c 0`` prints ``N/A`` in ``#wrong``: kept as unchecked.

Refused, naming the file and line: a row whose size, count, time or bandwidth is not a number, a row
with fewer columns than its header (a cut line), a table without its footer (a truncated run; unless
``partial``), a file with no table, and ``gather``/``scatter``/``hypercube`` (no model for them).
Rows with a non-zero ``#wrong`` (or an older ``error`` above 1e-2) are kept out and listed in ``NcclTable.wrong``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.text import read_output

OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv")
UNMODELLED = ("gather", "scatter", "hypercube")
_PREFIX = re.compile(r"^(?:\[\d+,\d+\]<std(?:out|err)>:|\d+: ?)")
_START = re.compile(r"#\s*Collective test starting:\s*(\w+)_perf")
_THREADS = re.compile(r"#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)")
_GRAPH = re.compile(r"graph:\s*(\d+)")
_RANK = re.compile(
    r"#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$"
)
_TESTS_VERSION = re.compile(r"#\s*nccl-tests version\s+(\S+)")
_NCCL_VERSION = re.compile(r"NCCL version\s+(\S+)")
_AVG = re.compile(r"#\s*Avg bus bandwidth\s*:\s*(\S+)")
_WRONG_NAMES = ("#wrong", "error")
MAX_RELATIVE_ERROR = 1e-2  # the older "error" column: a float sum's rounding is ~1e-6, a wrong result ~1


@dataclass(frozen=True)
class NcclRow:
    """One row: the line it is on, size (bytes), type, and per column group time (us), algbw and busbw
    (GB/s); ``wrong`` the errors nccl-tests counted (None: not checked)."""

    line: int
    size_bytes: int
    dtype: str
    out_of_place: tuple[float, float, float]
    in_place: tuple[float, float, float] | None
    wrong: int | None


@dataclass
class NcclTable:
    """One run of one binary: where it starts, what the header said, and its rows."""

    path: str
    line: int
    op: str | None = None
    threads: int | None = None
    gpus_per_thread: int | None = None
    graph: bool = False
    ranks: dict[int, tuple[str, str]] = field(default_factory=dict)  # rank -> (host, GPU name)
    tests_version: str | None = None
    nccl_version: str | None = None
    rows: list[NcclRow] = field(default_factory=list)
    wrong: list[NcclRow] = field(default_factory=list)
    avg_busbw_GBps: float | None = None
    columns: list[str] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        """The distinct hosts of the rank lines, in rank order."""
        return list(dict.fromkeys(host for _, (host, _) in sorted(self.ranks.items())))

    @property
    def gpu_names(self) -> list[str]:
        """The distinct GPU names of the rank lines."""
        return list(dict.fromkeys(name for host, name in self.ranks.values()))


def _strip(line: str) -> str:
    return _PREFIX.sub("", line.rstrip("\r\n")).rstrip()


def read_nccl_tests(path: str | Path, *, partial: bool = False) -> list[NcclTable]:
    """Every table in the nccl-tests output ``path`` (see the module's docstring for what is read)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    tables: list[NcclTable] = []
    current: NcclTable | None = None
    versions: dict[str, str | None] = {"tests_version": None, "nccl_version": None}
    for number, raw in enumerate(lines, start=1):
        line = _strip(raw)
        body = line.strip()
        if not body:
            continue
        where = f"{path}, line {number}"
        match = _START.search(body)
        threads = _THREADS.search(body)
        if match or (threads and (current is None or current.threads is not None or current.rows)):
            if current is not None:
                _close(current, where, partial)
            current = _new(path, number, versions)
            tables.append(current)
        if match:
            assert current is not None
            current.op = _op(match.group(1), where)
        if threads:
            assert current is not None
            current.threads, current.gpus_per_thread = int(threads.group(1)), int(threads.group(2))
            graph = _GRAPH.search(body)
            current.graph = bool(graph and int(graph.group(1)))
            continue
        version = _TESTS_VERSION.search(body)
        if version:
            versions["tests_version"] = version.group(1)
            if current is not None and not current.rows:
                current.tests_version = version.group(1)
            continue
        nccl = _NCCL_VERSION.search(body)
        if nccl and not body.startswith("#"):
            versions["nccl_version"] = nccl.group(1)
            if current is not None:
                current.nccl_version = nccl.group(1)
            continue
        tokens = body.split()
        header = tokens[0] == "#" and len(tokens) > 2 and tokens[1] == "size"
        if header and (current is None or current.rows or current.wrong):
            if current is not None:
                _close(current, where, partial)
            current = _new(path, number, versions)  # a table with no header lines above
            tables.append(current)
        if current is None:
            continue
        rank = _RANK.match(body)
        if rank:
            current.ranks[int(rank.group(1))] = (rank.group(2), rank.group(3))
            continue
        avg = _AVG.match(body)
        if avg:
            current.avg_busbw_GBps = _number(avg.group(1), "Avg bus bandwidth", where)
            continue
        if header:
            current.columns = tokens[1:]
            continue
        if body.startswith("#") or not tokens[0].isdigit():
            continue
        if not current.columns:
            raise ClusterSimError(f"{where}: a result row before nccl-tests' column header ('#  size  count ...')")
        _row(current, tokens, where, number)
    if current is not None:
        _close(current, f"{path}, line {len(lines)}", partial)
    if not tables or not any(t.rows or t.wrong for t in tables):
        raise ClusterSimError(
            f"{path}: no nccl-tests result table (a '#  size  count  type ...' header and its rows)",
            field="FILES",
            value=str(path),
        )
    return [t for t in tables if t.rows or t.wrong]


def _new(path: Path, line: int, versions: dict[str, str | None]) -> NcclTable:
    return NcclTable(str(path), line, tests_version=versions["tests_version"], nccl_version=versions["nccl_version"])


def _op(name: str, where: str) -> str:
    if name in UNMODELLED:
        raise ClusterSimError(f"{where}: {name}_perf is not modelled (valid: {', '.join(o + '_perf' for o in OPS)})")
    if name not in OPS:
        raise ClusterSimError(f"{where}: unknown nccl-tests binary {name}_perf (valid: {', '.join(OPS)})")
    return name


def _number(text: str, column: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ClusterSimError(f"{where}: column {column} is {text!r}, not a number", field=column, value=text) from None
    if value != value or value < 0 or value == float("inf"):
        raise ClusterSimError(f"{where}: column {column} is {text!r}; valid: a finite number >= 0", field=column)
    return value


def _row(table: NcclTable, tokens: list[str], where: str, number: int) -> None:
    columns = table.columns
    times = [i for i, name in enumerate(columns) if name == "time"]
    if not times:
        raise ClusterSimError(f"{where}: the column header above names no 'time' column")
    # Older versions leave redop (alltoall, all_gather) blank: the row is short by the blank columns.
    shift = min(len(tokens) - len(columns), 0)
    blank = sum(1 for name in ("redop", "root") if name in columns)
    if -shift > blank or len(tokens) < max(times) + shift + 3:
        raise ClusterSimError(
            f"{where}: {len(tokens)} columns, the header names {len(columns)} ({' '.join(columns)}): a cut line?"
        )
    size = _number(tokens[0], "size", where)
    if size != int(size):
        raise ClusterSimError(f"{where}: size {tokens[0]!r} is not a whole number of bytes", field="size")
    groups: list[tuple[float, float, float]] = []
    wrong: int | None = None
    for start in times[:2]:
        at = start + shift
        time_us, algbw, busbw = (_number(tokens[at + k], columns[start + k], where) for k in range(3))
        groups.append((time_us, algbw, busbw))
        check = start + 3
        if check < len(columns) and columns[check] in _WRONG_NAMES and at + 3 < len(tokens):
            text = tokens[at + 3]
            if text != "N/A":
                value = _number(text, columns[check], where)
                # '#wrong' counts wrong elements; the older 'error' is the largest relative error
                bad = value > 0 if columns[check] == "#wrong" else value > MAX_RELATIVE_ERROR
                wrong = (wrong or 0) + (int(value) if columns[check] == "#wrong" else int(bad))
    dtype = tokens[columns.index("type")] if "type" in columns else "float"
    row = NcclRow(number, int(size), dtype, groups[0], groups[1] if len(groups) > 1 else None, wrong)
    (table.wrong if wrong else table.rows).append(row)


def _close(table: NcclTable, where: str, partial: bool) -> None:
    """A table must end with nccl-tests' footer, unless ``partial`` keeps the rows of a cut run."""
    if (table.rows or table.wrong) and table.avg_busbw_GBps is None and not partial:
        last = (table.rows or table.wrong)[-1].line
        raise ClusterSimError(
            f"{table.path}, line {last}: the table starting on line {table.line} ends without nccl-tests' "
            f"'# Avg bus bandwidth' footer (a truncated run?); --partial keeps its complete rows",
            field="FILES",
            value=table.path,
        )
