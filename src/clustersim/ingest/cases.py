"""nccl-tests tables as collective cases (``clustersim/validation/data/README.md``).

The system comes from the log where it says so (ranks, hosts, the GPU's name) and from the options
where it does not (``instance``, ``nodes``, ``accelerator``, ``inter_node_gbps``); where both say, they
must agree, or the file is refused naming what differs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.ingest.nccl_tests import OPS, NcclTable

# The names CUDA reports (cudaDeviceProp.name, as nccl-tests prints them) where no catalog alias matches.
CUDA_NAMES = {
    "h100 80gb hbm3": "h100-sxm",
    "h100": "h100-sxm",
    "h100 pcie": "h100-pcie",
    "h100 nvl": "h100-nvl",
    "h200": "h200-sxm",
    "h200 nvl": "h200-nvl",
    "b200": "b200",
    "gb200": "gb200",
}


@dataclass(frozen=True)
class SystemOptions:
    """What the command line says of the system: any of them may be None (the log says it)."""

    instance: str | None = None
    nodes: int | None = None
    accelerator: str | None = None
    inter_node_gbps: float | None = None
    op: str | None = None
    in_place: bool = False
    model: str | None = None  # serving runs and training logs: the zoo id or config of the model
    tp: int | None = None  # None: the log's (training), 1 (serving)
    dp: int | None = None
    precision: str | None = None
    pp: int | None = None  # training logs: what the log does not state
    cp: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    warmup_steps: int | None = None  # None: clustersim.ingest.training_run.DEFAULT_WARMUP_STEPS
    concurrency: int | None = None  # load generators that do not print it (genai-perf, AIPerf, trtllm-bench)
    framework: str | None = None  # the serving stack a load generator does not name


def accelerator_from_name(catalog: Catalog, gpu_name: str) -> str | None:
    """The catalog id of the GPU nccl-tests names (``NVIDIA H100 80GB HBM3`` -> ``h100-sxm``); None if unknown."""
    name = re.sub(r"^nvidia\s+", "", gpu_name.strip(), flags=re.IGNORECASE)
    if name.lower() in CUDA_NAMES:
        return CUDA_NAMES[name.lower()]
    try:
        return catalog.accelerator(name).id
    except UnknownNameError:
        return None


def _op(table: NcclTable, options: SystemOptions) -> str:
    if options.op is not None:
        if table.op is not None and table.op != options.op:
            raise ClusterSimError(
                f"{table.path}, line {table.line}: the log runs {table.op}_perf, --op says {options.op}", field="--op"
            )
        return options.op
    if table.op is not None:
        return table.op
    stem = Path(table.path).name.lower()
    found = [op for op in OPS if op in stem and not (op == "reduce" and ("all_reduce" in stem or "reduce_" in stem))]
    if len(found) == 1:
        return found[0]
    raise ClusterSimError(
        f"{table.path}, line {table.line}: cannot tell which collective this table is (no '# Collective test "
        f"starting' line, and the file name names {'none' if not found else ' and '.join(found)}); give --op "
        f"({', '.join(OPS)})",
        field="--op",
    )


def system_of(table: NcclTable, options: SystemOptions, catalog: Catalog) -> dict[str, Any]:
    """The case's ``system``: from the log's rank lines, checked against and completed by the options."""
    where = f"{table.path}, line {table.line}"
    ranks, hosts = len(table.ranks), table.hosts
    log_accelerator = None
    if table.gpu_names:
        if len(table.gpu_names) > 1:
            raise ClusterSimError(f"{where}: the ranks run on different GPUs ({', '.join(table.gpu_names)})")
        log_accelerator = accelerator_from_name(catalog, table.gpu_names[0])
    nodes = len(hosts) if hosts else options.nodes
    if hosts and options.nodes is not None and options.nodes != len(hosts):
        raise ClusterSimError(
            f"{where}: the log's ranks run on {len(hosts)} hosts ({', '.join(hosts[:4])}"
            f"{', ...' if len(hosts) > 4 else ''}), --nodes says {options.nodes}",
            field="--nodes",
            value=options.nodes,
        )
    system: dict[str, Any] = {}
    if options.instance is not None:
        instance = catalog.instance(options.instance)
        per_node = int(instance.num_accelerators.value)
        accelerator = instance.accelerator
        if log_accelerator is not None and log_accelerator != accelerator:
            raise ClusterSimError(
                f"{where}: the log's GPU is {table.gpu_names[0]!r} ({log_accelerator}); {instance.id} has "
                f"{accelerator}",
                field="--instance",
                value=options.instance,
            )
        system |= {"instance": instance.id}
    else:
        named = options.accelerator or (table.gpu_names[0] if table.gpu_names else None)
        if named is None:
            raise ClusterSimError(
                f"{where}: the log names no GPU; give --instance or --accelerator", field="--instance"
            )
        found = accelerator_from_name(catalog, named) if options.accelerator is None else None
        accelerator = found or catalog.accelerator(named).id
        per_node = ranks // len(hosts) if hosts else 0
        if not per_node:
            raise ClusterSimError(f"{where}: the log lists no ranks; give --instance", field="--instance")
    if nodes is None:
        nodes = 1 if not hosts and ranks and ranks <= per_node else None
    if nodes is None:
        raise ClusterSimError(f"{where}: the log lists no hosts; give --nodes", field="--nodes")
    devices = ranks or per_node * nodes
    if ranks and hosts and ranks != per_node * nodes:
        raise ClusterSimError(
            f"{where}: {ranks} ranks on {nodes} hosts, but {per_node} devices per node make {per_node * nodes}",
            field="--instance" if options.instance else "FILES",
        )
    system |= {"accelerator": accelerator, "devices": devices, "devices_per_node": per_node, "nodes": nodes}
    if options.instance is None and nodes > 1:
        if options.inter_node_gbps is None:
            raise ClusterSimError(
                f"{where}: {nodes} nodes and no catalogued instance; give --instance or --inter-node-gbps "
                f"(scale-out Gbit/s per node, e.g. 3200)",
                field="--inter-node-gbps",
            )
        system["inter_node_Gbps_per_node"] = options.inter_node_gbps
    return system


def table_cases(table: NcclTable, options: SystemOptions, catalog: Catalog, run: str = "") -> list[dict[str, Any]]:
    """One collective case per row of ``table``, in the bundled files' shape (id, source, measured, ...);
    ``run`` tells apart the ids of several tables of one file."""
    op = _op(table, options)
    system = system_of(table, options, catalog)
    name = Path(table.path).name
    stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(table.path).stem).strip("_") or "nccl"
    dtypes = {row.dtype for row in table.rows}
    columns = "in-place" if options.in_place else "out-of-place"
    version = " ".join(
        part
        for part in (
            f"nccl-tests {table.tests_version}" if table.tests_version else "nccl-tests",
            f"NCCL {table.nccl_version}" if table.nccl_version else "",
        )
        if part
    )
    notes = [f"read by clustersim ingest from {name} ({columns} columns)"]
    if table.graph:
        notes.append("CUDA graph launch (-G)")
    if table.wrong:
        lines = ", ".join(str(r.line) for r in table.wrong)
        notes.append(f"{len(table.wrong)} rows with #wrong > 0 left out (lines {lines})")
    cases = []
    for row in table.rows:
        group = row.in_place if options.in_place else row.out_of_place
        if group is None:
            raise ClusterSimError(f"{table.path}, line {row.line}: no in-place columns; drop --in-place")
        time_us, algbw, busbw = group
        if row.size_bytes == 0:
            continue  # nccl-tests' 0-byte row times an empty call: nothing to score
        # bandwidths printed as 0.00 are below the table's resolution: the time alone is measured
        measured = {"busbw_GBps": busbw, "algbw_GBps": algbw} if busbw > 0 and algbw > 0 else {}
        suffix = (f"_{row.dtype}" if len(dtypes) > 1 else "") + ("_inplace" if options.in_place else "")
        cases.append(
            {
                "id": f"{stem}{run}_{op}_{system['nodes']}nodes_{row.size_bytes}B{suffix}",
                "kind": "collective",
                "source": f"{name} line {row.line} (nccl-tests {op}_perf, {columns})",
                "notes": "; ".join(notes),
                "system": system,
                "op": op,
                "size_bytes": row.size_bytes,
                "algorithm": None,
                "dtype": row.dtype,
                "measured": measured | {"time_us": time_us},
                "software": {"framework": "nccl-tests", "version": version},
            }
        )
    return cases


def tables_cases(tables: Sequence[NcclTable], options: SystemOptions, catalog: Catalog) -> list[dict[str, Any]]:
    """The cases of every table, refusing two with the same id (the same file given twice)."""
    out: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    per_file: dict[str, int] = {}
    for table in tables:
        per_file[table.path] = per_file.get(table.path, 0) + 1
    counted: dict[str, int] = {}
    for table in tables:
        counted[table.path] = counted.get(table.path, 0) + 1
        run = f"_run{counted[table.path]}" if per_file[table.path] > 1 else ""
        for case in table_cases(table, options, catalog, run):
            if case["id"] in seen:
                raise ClusterSimError(f"{case['source']}: the same case as {seen[case['id']]} (a file given twice?)")
            seen[case["id"]] = case["source"]
            out.append(case)
    return out
