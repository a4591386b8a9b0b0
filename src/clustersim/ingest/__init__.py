"""Readers of what real tools print, turned into the case format of ``clustersim.validation`` (JSON Lines).

``read_files`` picks each file's reader from its content: vLLM's serving benchmark (``vllm_bench``),
trtllm-bench (``trtllm_bench``) and genai-perf/AIPerf tables (``genai_perf``) into inference cases
(``serving_cases``), a Megatron training log (``megatron_log``) or a torchtitan log (``torchtitan_log``) into
one training case each (``training_run``), OSU point-to-point output (``osu``) into a transport measurement
set beside the data-path model (the case format has no transport kind), anything else as nccl-tests output
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
from clustersim.ingest.genai_perf import looks_like_genai_perf, read_genai_perf
from clustersim.ingest.megatron_log import looks_like_megatron, read_megatron_log
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.ingest.osu import compare_osu, looks_like_osu, read_osu
from clustersim.ingest.serving_cases import ServingRun, model_fields, serving_case, serving_system
from clustersim.ingest.torchtitan_log import looks_like_torchtitan, read_torchtitan_log
from clustersim.ingest.training_run import TrainingRun, training_case
from clustersim.ingest.trtllm_bench import looks_like_trtllm_bench, read_trtllm_bench
from clustersim.ingest.vllm_bench import looks_like_vllm, read_vllm_bench
from clustersim.serving.engines import engine_for_software
from clustersim.validation.cases import as_case
from clustersim.workload.zoo import load_model

__all__ = ["READERS", "FileCases", "SystemOptions", "ingest_files", "read_files", "write_cases"]

READERS = ("nccl-tests", "vllm-bench", "trtllm-bench", "genai-perf", "megatron", "torchtitan", "osu")
SERVING = ("vllm-bench", "trtllm-bench", "genai-perf")
TRAINING_ONLY = {"pp": "--pp", "cp": "--cp", "global_batch": "--global-batch", "seq_len": "--seq-len"}


@dataclass(frozen=True)
class FileCases:
    """The cases read from one file and the reader that read them (one of ``READERS``); ``measurement``: a
    record the case format has no kind for (OSU), with its comparison to the model where one was made."""

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
    if looks_like_megatron(text):
        return "megatron"
    if looks_like_torchtitan(text):
        return "torchtitan"
    if looks_like_osu(text):
        return "osu"
    return "nccl-tests"


def read_files(
    paths: Sequence[str | Path], options: SystemOptions, catalog: Catalog, *, partial: bool = False
) -> list[FileCases]:
    """The cases of every file in ``paths``, per file; each case is checked against the case format."""
    if not paths:
        raise ClusterSimError("no files given: name one or more tool outputs", field="FILES")
    readers = {Path(p): reader_of(Path(p)) for p in paths}
    _refuse_unused(options, set(readers.values()))
    nccl = [p for p, r in readers.items() if r == "nccl-tests"]
    tables = [table for path in nccl for table in read_nccl_tests(path, partial=partial)]
    collective = tables_cases(tables, options, catalog) if tables else []
    out = []
    for path, reader in readers.items():
        if reader == "nccl-tests":
            cases = [c for c in collective if c["source"].startswith(path.name + " ")]
        elif reader in SERVING:
            cases = _serving_cases(path, reader, options, catalog)
        elif reader == "osu":
            out.append(FileCases(str(path), reader, [], _osu_measurement(path, options, catalog)))
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
    if options.concurrency is not None and not readers & {"genai-perf", "trtllm-bench"}:
        raise ClusterSimError("--concurrency applies to genai-perf/AIPerf and trtllm-bench outputs, and none is given")
    if options.framework is not None:
        if "genai-perf" not in readers:
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


def _osu_measurement(path: Path, options: SystemOptions, catalog: Catalog) -> dict[str, Any]:
    run = read_osu(path)
    record = {"test": run.test, "version": run.version, "device_buffers": run.device_buffers}
    record["rows"] = [{"size_bytes": size, "value": value, "line": line} for size, value, line in run.rows]
    if options.instance is None:
        return {"record": record, "comparison": None, "note": "give --instance to compare it with the model"}
    return {"record": record, "comparison": compare_osu(run, catalog.instance(options.instance))}


def _serving_runs(path: Path, reader: str, options: SystemOptions) -> list[ServingRun]:
    if reader == "trtllm-bench":
        return [read_trtllm_bench(path, options.concurrency)]
    if reader == "genai-perf":
        return read_genai_perf(path, options.concurrency, options.framework)
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
