"""Readers of what real tools print, turned into the case format of ``clustersim.validation`` (JSON Lines).

``ingest_files`` reads nccl-tests output (``nccl_tests``) into collective cases (``cases``) and vLLM's
serving benchmark (``vllm_bench``) into inference cases (``serving_cases``), telling them apart by content;
``write_cases`` writes them whole or not at all (a temporary file renamed over the target).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.files import write_whole
from clustersim.ingest.cases import SystemOptions, tables_cases
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.ingest.serving_cases import model_fields, serving_system
from clustersim.ingest.vllm_bench import looks_like_vllm, read_vllm_bench, serving_case
from clustersim.validation.cases import as_case
from clustersim.workload.zoo import load_model

__all__ = ["SystemOptions", "ingest_files", "write_cases"]


def ingest_files(
    paths: Sequence[str | Path], options: SystemOptions, catalog: Catalog, *, partial: bool = False
) -> list[dict[str, Any]]:
    """The cases of every nccl-tests output in ``paths``; each is checked against the case format."""
    if not paths:
        raise ClusterSimError("no files given: name one or more nccl-tests outputs", field="FILES")
    serving = [Path(p) for p in paths if _is_vllm(Path(p))]
    tables = [table for path in paths if Path(path) not in serving for table in read_nccl_tests(path, partial=partial)]
    cases = tables_cases(tables, options, catalog) if tables else []
    cases += _serving_cases(serving, options, catalog)
    if not cases:
        named = ", ".join(str(p) for p in paths)
        raise ClusterSimError(f"{named}: no row to keep (every row has #wrong > 0 or moves 0 bytes)", field="FILES")
    for case in cases:
        as_case(case, str(case["kind"]))  # the reader writes nothing the case format would refuse
    return cases


def _is_vllm(path: Path) -> bool:
    try:
        return looks_like_vllm(path.read_text(encoding="utf-8", errors="replace"))
    except OSError:
        return False  # the nccl-tests reader says why it cannot read it


def _serving_cases(paths: Sequence[Path], options: SystemOptions, catalog: Catalog) -> list[dict[str, Any]]:
    if not paths:
        return []
    if options.model is None:
        raise ClusterSimError(
            f"{paths[0]}: a serving benchmark does not print the model's shape; give --model (a zoo id or a "
            f"Hugging Face config.json)",
            field="--model",
        )
    model = model_fields(load_model(options.model))
    system, extra = serving_system(options, catalog, str(paths[0]))
    return [serving_case(run, model, system, extra) for path in paths for run in read_vllm_bench(path)]


def write_cases(cases: Sequence[dict[str, Any]], path: str | Path) -> None:
    """Write ``cases`` as JSON Lines to ``path``, whole or not at all (``clustersim.files.write_whole``)."""
    write_whole(path, "".join(json.dumps(case) + "\n" for case in cases), option="-o")
