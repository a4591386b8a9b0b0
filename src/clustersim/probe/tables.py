"""The probe's collectives as nccl-tests prints them, and as the collective cases ``clustersim ingest``
writes from such a table (``ingest.cases.table_cases``: one record builder for both).

The printed table is the out-of-place half of nccl-tests' (``doc/PERFORMANCE.md``: size, count, type,
redop, root, time in us, algbw and busbw in GB/s), with the header lines ``clustersim ingest`` reads, so
``clustersim ingest`` of the printed text gives the same cases as ``-o`` (to the printed precision).
The cases say they were measured by ``torch-distributed`` with the backend and torch version, and carry
the repetitions' spread in a ``probe`` field (readers ignore fields they do not know).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Sequence
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.ingest.cases import SystemOptions, table_cases
from clustersim.ingest.nccl_tests import NcclRow, NcclTable
from clustersim.network.collectives import Op
from clustersim.probe.collectives import CollectiveResult
from clustersim.validation.cases import as_case

REDUCING = (Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.REDUCE)
ROOTED = (Op.BROADCAST, Op.REDUCE)
_HEADER = (
    f"#{'size':>11} {'count':>13} {'type':>9} {'redop':>7} {'root':>7} {'time':>9} {'algbw':>7} {'busbw':>7} #wrong"
)
_UNITS = f"#{'(B)':>11} {'(elements)':>13} {'':>9} {'':>7} {'':>7} {'(us)':>9} {'(GB/s)':>7} {'(GB/s)':>7}"


def redop(op: Op) -> str:
    """nccl-tests' redop column: sum for the reducing collectives, none for the others."""
    return "sum" if op in REDUCING else "none"


def root(op: Op) -> int:
    """nccl-tests' root column: rank 0 for the rooted collectives, -1 for the others."""
    return 0 if op in ROOTED else -1


def table_text(result: CollectiveResult, *, torch_version: str, warmup: int, repeats: int) -> list[str]:
    """The lines nccl-tests' ``<op>_perf`` would print for ``result`` (out-of-place columns; ``#wrong`` is
    N/A: the results are not checked)."""
    sizes = [row.size_bytes for row in result.rows]
    lines = [
        f"# clustersim probe: torch {torch_version}, {result.backend}, {result.ranks} ranks; time = median of "
        f"{repeats} calls, each after a barrier, slowest rank",
        f"# Collective test starting: {result.op.value}_perf",
        f"# nThread 1 nGpus 1 minBytes {min(sizes)} maxBytes {max(sizes)} warmup iters: {warmup} iters: {repeats} "
        f"agg iters: 1 validation: 0 graph: 0",
        "#",
        "# Using devices",
    ]
    for rank, (host, pid, name) in enumerate(result.placement):
        lines.append(f"#  Rank {rank:2d} Group  0 Pid {pid:6d} on {host} device {rank:2d} [0000:00:00] {name}")
    lines += ["#", f"#{'out-of-place':>64}", _HEADER, _UNITS]
    for row in result.rows:
        time_us, algbw, busbw = result.bandwidths(row)
        lines.append(
            f"{row.size_bytes:12d} {row.count:13d} {'float':>9} {redop(result.op):>7} {root(result.op):7d} "
            f"{time_us:9.2f} {algbw:7.3f} {busbw:7.3f}    N/A"
        )
    average = sum(result.bandwidths(row)[2] for row in result.rows) / len(result.rows)
    lines += ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {average:.4f}", "#"]
    return lines


def as_table(result: CollectiveResult, path: str, *, first_line: int = 1) -> NcclTable:
    """``result`` as the reader's ``NcclTable`` (full precision), its rows numbered as in ``table_text``
    starting at ``first_line``."""
    header_lines = 5 + len(result.placement) + 4
    table = NcclTable(path, first_line + 1, op=result.op.value, threads=1, gpus_per_thread=1)
    table.ranks = {rank: (host, name) for rank, (host, _, name) in enumerate(result.placement)}
    table.columns = ["size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong"]
    for index, row in enumerate(result.rows):
        group = result.bandwidths(row)
        table.rows.append(NcclRow(first_line + header_lines + index, row.size_bytes, "float", group, None, None))
    table.avg_busbw_GBps = sum(r.out_of_place[2] for r in table.rows) / len(table.rows)
    return table


def probe_cases(
    results: Sequence[CollectiveResult],
    options: SystemOptions,
    catalog: Catalog,
    *,
    torch_version: str,
    software_version: str,
    warmup: int,
    repeats: int,
    notes: str = "",
) -> list[dict[str, Any]]:
    """The collective cases of ``results`` (one per size), checked against the case format; ``software_version``
    is the torch and backend versions as the case's ``software.version`` says them."""
    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    cases: list[dict[str, Any]] = []
    line = 1
    for result in results:
        host = re.sub(r"[^A-Za-z0-9]+", "_", result.placement[0][0]).strip("_") or "host"
        table = as_table(result, f"probe_{host}_{stamp}", first_line=line)
        line += len(table_text(result, torch_version=torch_version, warmup=warmup, repeats=repeats))
        for case, row in zip(table_cases(table, options, catalog), result.rows, strict=True):
            stats = row.stats
            case["source"] = (
                f"clustersim probe on {result.placement[0][0]}, {stamp} ({result.op.value}, {result.ranks} ranks, "
                f"{result.backend})"
            )
            case["notes"] = "; ".join(
                part
                for part in (
                    f"measured by clustersim probe: torch.distributed {result.backend}, median of {repeats} calls "
                    f"after {warmup} warm-up, each after a barrier, slowest rank; out-of-place, float32",
                    notes,
                )
                if part
            )
            case["software"] = {"framework": "torch-distributed", "version": software_version}
            case["probe"] = {
                "time_us_min": stats.min_s * 1e6,
                "time_us_max": stats.max_s * 1e6,
                "time_us_p10": stats.p10_s * 1e6,
                "time_us_p90": stats.p90_s * 1e6,
                "repeats": stats.repeats,
                "warmup": stats.warmup,
                "count": row.count,
            }
            as_case(case, "collective")
            cases.append(case)
    return cases
