"""Readers of what real tools print, turned into the case format of ``clustersim.validation`` (JSON Lines).

``read_files`` picks each file's reader from its content: vLLM's serving benchmark (``vllm_bench``),
trtllm-bench (``trtllm_bench``) and genai-perf/AIPerf tables (``genai_perf``) into inference cases
(``serving_cases``), a Megatron training log (``megatron_log``) or a torchtitan log (``torchtitan_log``) into
one training case each (``training_run``), OSU point-to-point output (``osu``) and fi_pingpong tables
(``fi_pingpong``) into a transport measurement set beside the data-path model (the case format has no
transport kind), fio JSON (``fio``) and IOR output (``ior``) into a storage measurement set beside the FSx
for Lustre model (``storage_runs``; no storage kind either), anything else as nccl-tests output
(``nccl_tests``) into collective cases (``cases``). ``write_cases`` writes them whole or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.files import write_whole
from clustersim.ingest.cases import SystemOptions, tables_cases
from clustersim.ingest.fi_pingpong import (
    compare_fi_pingpong,
    looks_like_fi_pingpong,
    no_comparison_note,
    read_fi_pingpong,
)
from clustersim.ingest.fio import looks_like_fio, read_fio
from clustersim.ingest.genai_perf import (
    looks_like_genai_perf,
    looks_like_genai_perf_export,
    read_genai_perf,
    read_genai_perf_export,
)
from clustersim.ingest.ior import looks_like_ior, read_ior
from clustersim.ingest.megatron_log import looks_like_megatron, read_megatron_log
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.ingest.osu import compare_osu, looks_like_osu, read_osu, summary_line
from clustersim.ingest.serving_cases import ServingRun, model_fields, serving_case, serving_system
from clustersim.ingest.storage_runs import StorageOptions, StorageRun, compare_storage, storage_summary
from clustersim.ingest.torchtitan_log import looks_like_torchtitan, read_torchtitan_log
from clustersim.ingest.training_run import TrainingRun, training_case
from clustersim.ingest.trtllm_bench import looks_like_trtllm_bench, read_trtllm_bench
from clustersim.ingest.vllm_bench import looks_like_vllm, read_vllm_bench
from clustersim.serving.engines import engine_for_software
from clustersim.validation.cases import as_case
from clustersim.workload.zoo import load_model

__all__ = [
    "READERS",
    "FileCases",
    "StorageOptions",
    "SystemOptions",
    "ingest_files",
    "read_files",
    "write_cases",
]

READERS = (
    "nccl-tests",
    "vllm-bench",
    "trtllm-bench",
    "genai-perf",
    "genai-perf-export",
    "megatron",
    "torchtitan",
    "osu",
    "fi-pingpong",
    "fio",
    "ior",
)
SERVING = ("vllm-bench", "trtllm-bench", "genai-perf", "genai-perf-export")
GENAI = {"genai-perf", "genai-perf-export"}
STORAGE = ("fio", "ior")
MEASURED = ("osu", "fi-pingpong", *STORAGE)
TRAINING_ONLY = {"pp": "--pp", "cp": "--cp", "global_batch": "--global-batch", "seq_len": "--seq-len"}


@dataclass(frozen=True)
class FileCases:
    """The cases read from one file and the reader that read them (one of ``READERS``); ``measurement``: a
    record the case format has no kind for (OSU, fi_pingpong, fio, IOR), with its comparison to the model
    where one was made and ``lines``, what to print of it."""

    path: str
    reader: str
    cases: list[dict[str, Any]]
    measurement: dict[str, Any] | None = None


def reader_of(path: Path) -> str:
    """The reader for ``path``, from its content (nccl-tests where no other matches)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "nccl-tests"  # the nccl-tests reader says why it cannot read it
    if looks_like_vllm(text):
        return "vllm-bench"
    if looks_like_trtllm_bench(text):
        return "trtllm-bench"
    if looks_like_genai_perf(text):
        return "genai-perf"
    if looks_like_fio(text):
        return "fio"
    if looks_like_genai_perf_export(text):
        return "genai-perf-export"
    if looks_like_megatron(text):
        return "megatron"
    if looks_like_torchtitan(text):
        return "torchtitan"
    if looks_like_osu(text):
        return "osu"
    if looks_like_fi_pingpong(text):
        return "fi-pingpong"
    if looks_like_ior(text):
        return "ior"
    return "nccl-tests"


def read_files(
    paths: Sequence[str | Path],
    options: SystemOptions,
    catalog: Catalog,
    *,
    partial: bool = False,
    storage: StorageOptions | None = None,
) -> list[FileCases]:
    """The cases of every file in ``paths``, per file; each case is checked against the case format.
    ``storage``: the file system fio and IOR runs are compared with (none: the measurement alone)."""
    if not paths:
        raise ClusterSimError("no files given: name one or more tool outputs", field="FILES")
    storage = storage or StorageOptions()
    readers = {Path(p): reader_of(Path(p)) for p in paths}
    _refuse_unused(options, set(readers.values()))
    _refuse_unused_storage(storage, set(readers.values()), options.nodes)
    nccl = [p for p, r in readers.items() if r == "nccl-tests"]
    tables = [table for path in nccl for table in read_nccl_tests(path, partial=partial)]
    collective = tables_cases(tables, options, catalog) if tables else []
    out = []
    for path, reader in readers.items():
        if reader == "nccl-tests":
            cases = [c for c in collective if c["source"].startswith(path.name + " ")]
        elif reader in SERVING:
            cases = _serving_cases(path, reader, options, catalog)
        elif reader in MEASURED:
            out.append(FileCases(str(path), reader, [], _measurement(path, reader, options, storage, catalog)))
            continue
        else:
            run = read_megatron_log(path) if reader == "megatron" else read_torchtitan_log(path)
            cases = [_training_case(run, options, catalog)]
        out.append(FileCases(str(path), reader, cases))
    if not any(f.cases or f.measurement for f in out):
        named = ", ".join(str(p) for p in paths)
        raise ClusterSimError(f"{named}: no row to keep (every row has #wrong > 0 or moves 0 bytes)", field="FILES")
    for found in out:
        for case in found.cases:
            as_case(case, str(case["kind"]))  # the reader writes nothing the case format would refuse
    return out


def ingest_files(
    paths: Sequence[str | Path], options: SystemOptions, catalog: Catalog, *, partial: bool = False
) -> list[dict[str, Any]]:
    """The cases of every file in ``paths`` (``read_files``, flattened)."""
    return [case for found in read_files(paths, options, catalog, partial=partial) for case in found.cases]


def _refuse_unused(options: SystemOptions, readers: set[str]) -> None:
    training = bool(readers & {"megatron", "torchtitan"})
    if not training and not readers & set(SERVING):
        for key, option in (("model", "--model"), ("tp", "--tp"), ("dp", "--dp"), ("precision", "--precision")):
            if getattr(options, key) is not None:
                raise ClusterSimError(
                    f"{option} applies to serving and training outputs, and none is given", field=option
                )
    if options.concurrency is not None and not readers & {*GENAI, "trtllm-bench"}:
        raise ClusterSimError("--concurrency applies to genai-perf/AIPerf and trtllm-bench outputs, and none is given")
    if options.framework is not None:
        if not readers & GENAI:
            raise ClusterSimError("--framework applies to genai-perf/AIPerf tables, and none is among the files")
        engine_for_software(options.framework)  # one the serving model prices, or refused naming those it does
    for key, option in TRAINING_ONLY.items():
        if getattr(options, key) is not None and not training:
            raise ClusterSimError(f"{option} applies to training logs, and none is among the files", field=option)
    if options.warmup_steps is not None and not training:
        raise ClusterSimError("--warmup-steps applies to training logs, and none is among the files")


def _training_case(run: TrainingRun, options: SystemOptions, catalog: Catalog) -> dict[str, Any]:
    model = model_fields(load_model(options.model)) if options.model is not None else None
    return training_case(run, options, catalog, model)


def _refuse_unused_storage(storage: StorageOptions, readers: set[str], nodes: int | None) -> None:
    storage.check()
    if nodes is not None and "fio" in readers and not readers & {"nccl-tests", "ior"}:
        raise ClusterSimError(
            "--nodes: fio's JSON is one machine's jobs (its client/server output is not read); --nodes applies to "
            "nccl-tests and IOR outputs",
            field="--nodes",
            value=nodes,
        )
    if storage.storage is not None and not readers & set(STORAGE):
        raise ClusterSimError(
            "--storage applies to fio and IOR outputs, and none is among the files", field="--storage"
        )


def _measurement(
    path: Path, reader: str, options: SystemOptions, storage: StorageOptions, catalog: Catalog
) -> dict[str, Any]:
    if reader in STORAGE:
        runs = read_fio(path) if reader == "fio" else read_ior(path, options.nodes)
        return _storage_measurement(runs, storage, options, catalog)
    if reader == "fi-pingpong":
        return _pingpong_measurement(path, options, catalog)
    return _osu_measurement(path, options, catalog)


def _storage_measurement(
    runs: list[StorageRun], storage: StorageOptions, options: SystemOptions, catalog: Catalog
) -> dict[str, Any]:
    instance = catalog.instance(options.instance) if options.instance else None
    compared = [compare_storage(run, storage, catalog, instance) if storage.storage else None for run in runs]
    return {
        "records": [run.record() for run in runs],
        "comparisons": compared,
        "lines": [storage_summary(run, comparison) for run, comparison in zip(runs, compared, strict=True)],
    }


def _pingpong_measurement(path: Path, options: SystemOptions, catalog: Catalog) -> dict[str, Any]:
    run = read_fi_pingpong(path)
    record: dict[str, Any] = {"test": "fi_pingpong", "provider": run.provider}
    record["rows"] = [
        {"size_bytes": size, "usec_per_xfer": usec, "line": line, **extra}
        for (size, usec, line), extra in zip(run.rows, run.details, strict=True)
    ]
    if options.instance is None:
        note = "give --instance to compare it with the model"
        return {"record": record, "comparison": None, "note": note, "lines": [note]}
    comparison = compare_fi_pingpong(run, catalog.instance(options.instance))
    if comparison is None:
        note = no_comparison_note(run)
        return {"record": record, "comparison": None, "note": note, "lines": [note]}
    return {"record": record, "comparison": comparison, "lines": [summary_line(comparison)]}


def _osu_measurement(path: Path, options: SystemOptions, catalog: Catalog) -> dict[str, Any]:
    run = read_osu(path)
    record = {"test": run.test, "version": run.version, "device_buffers": run.device_buffers}
    record["rows"] = [{"size_bytes": size, "value": value, "line": line} for size, value, line in run.rows]
    if options.instance is None:
        note = "give --instance to compare it with the model"
        return {"record": record, "comparison": None, "note": note, "lines": [note]}
    comparison = compare_osu(run, catalog.instance(options.instance))
    return {"record": record, "comparison": comparison, "lines": [summary_line(comparison)]}


def _serving_runs(path: Path, reader: str, options: SystemOptions) -> list[ServingRun]:
    if reader == "trtllm-bench":
        return [read_trtllm_bench(path, options.concurrency)]
    if reader == "genai-perf":
        return read_genai_perf(path, options.concurrency, options.framework)
    if reader == "genai-perf-export":
        return [read_genai_perf_export(path, options.concurrency, options.framework)]
    return read_vllm_bench(path)


def _serving_cases(path: Path, reader: str, options: SystemOptions, catalog: Catalog) -> list[dict[str, Any]]:
    if options.model is None:
        raise ClusterSimError(
            f"{path}: a serving benchmark does not print the model's shape; give --model (a zoo id or a "
            f"Hugging Face config.json)",
            field="--model",
        )
    model = model_fields(load_model(options.model))
    cases = []
    for run in _serving_runs(path, reader, options):
        system, extra = serving_system(options, catalog, str(path), run)
        cases.append(serving_case(run, model, system, extra))
    return cases


def write_cases(cases: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Write ``cases`` as JSON Lines to ``path``, whole or not at all (``clustersim.files.write_whole``)."""
    write_whole(path, "".join(json.dumps(case) + "\n" for case in cases), option="-o")
