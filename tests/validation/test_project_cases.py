"""The project's own ground-truth cases (``validation/project``): readable, sourced, unique, and new.

They follow the shared format (``validation/data/README.md``) and the folder's rule
(``validation/project/README.md``): every case names its source and explains itself in ``notes``,
its id is unique across the shared and project files, and none repeats a shared case.
"""

from __future__ import annotations

import fnmatch
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from clustersim.validation.cases import (
    Case,
    bundled_case_files,
    primary_field,
    project_case_files,
    project_dir,
    read_cases,
)

KIND_OF_FILE = {
    "training.jsonl": "training",
    "collectives.jsonl": "collective",
    "inference.jsonl": "inference",
    "memory.jsonl": "memory",
}
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


@pytest.fixture(scope="module")
def project() -> dict[str, list[Case]]:
    return {path.name: read_cases(path) for path in project_case_files()}


@pytest.fixture(scope="module")
def shared() -> list[Case]:
    return [case for path in bundled_case_files() for case in read_cases(path)]


def test_the_project_files_exist_and_read(project: dict[str, list[Case]]) -> None:
    assert (project_dir() / "README.md").is_file()
    assert set(project) >= {"training.jsonl", "collectives.jsonl"}
    assert set(project) <= set(KIND_OF_FILE), f"unexpected project files: {sorted(set(project) - set(KIND_OF_FILE))}"
    for name, cases in project.items():
        assert cases, name
        wrong = [c.id for c in cases if c.kind != KIND_OF_FILE[name]]
        assert not wrong, f"{name}: cases of another kind: {wrong}"
        for case in cases:
            primary_field(case)  # a measured field the format scores


def test_every_case_names_its_source_and_explains_itself(project: dict[str, list[Case]]) -> None:
    for cases in project.values():
        for case in cases:
            words = case.source.split()
            assert len(words) >= 3, f"{case.id}: source {case.source!r} is not a full citation"
            assert not words[0].startswith(("src/", "tests/", "clustersim")), f"{case.id}: cites this repository"
            assert case.notes and case.notes.strip(), f"{case.id}: no notes (derivations and assumptions go there)"
            assert case.software is not None and case.software.framework, f"{case.id}: no software.framework"


def test_ids_are_unique_across_shared_and_project_files(project: dict[str, list[Case]], shared: list[Case]) -> None:
    ids = [c.id for c in shared] + [c.id for cases in project.values() for c in cases]
    repeated = sorted({i for i in ids if ids.count(i) > 1})
    assert not repeated, f"ids used more than once: {repeated}"


def _dump(part: Any) -> Any:
    return None if part is None else part.model_dump(exclude_none=True)


def _signature(case: Case) -> str:
    """Everything that makes a case the same measurement: model, system, layout, job and measured values."""
    fields = {
        "kind": case.kind,
        "model": _dump(case.model),
        "system": _dump(case.system),
        "parallel": _dump(case.parallel),
        "precision": case.precision,
        "workload": _dump(case.workload),
        "op": case.op,
        "size_bytes": case.size_bytes,
        "algorithm": case.algorithm,
        "measured": case.measured,
    }
    return json.dumps(fields, sort_keys=True)


def _setup(case: Case) -> str:
    """A looser key: the same model shape, accelerator, device count, degrees, batch, precision (or collective
    op and size) and the same primary measured value, whatever fields were left null or notes written."""
    model = case.model.shape() if case.model else {}
    model.pop("name", None)
    system = case.system
    parallel = case.parallel
    degrees = (
        [getattr(parallel, k) or 1 for k in ("tp", "pp", "dp", "cp", "ep")] + [parallel.global_batch]
        if parallel
        else []
    )
    field = primary_field(case)
    key = {
        "kind": case.kind,
        "model": model,
        "accelerator": system.accelerator if system else None,
        "devices": system.devices if system else None,
        "nodes": system.nodes if system else None,
        "degrees": degrees,
        "precision": case.precision,
        "op": case.op,
        "size_bytes": case.size_bytes,
        "field": field,
        "value": round(case.measured[field], 6),
    }
    return json.dumps(key, sort_keys=True, default=str)


def test_no_project_case_repeats_a_shared_case(project: dict[str, list[Case]], shared: list[Case]) -> None:
    exact = {_signature(c): c.id for c in shared}
    loose = {_setup(c): c.id for c in shared}
    for cases in project.values():
        for case in cases:
            assert _signature(case) not in exact, f"{case.id} repeats shared case {exact[_signature(case)]}"
            assert _setup(case) not in loose, f"{case.id} repeats shared case {loose[_setup(case)]}"


def test_a_repeated_shared_case_would_be_caught(shared: list[Case]) -> None:
    original = next(c for c in shared if c.kind == "training" and c.parallel is not None)
    copy = original.model_copy(update={"id": "renamed", "notes": "other words", "source": "elsewhere x y"})
    assert _signature(copy) == _signature(original)
    assert _setup(copy) == _setup(original)


def test_the_project_files_are_package_data(project: dict[str, list[Case]]) -> None:
    if not PYPROJECT.is_file():
        pytest.skip("no pyproject.toml beside the tests (an installed copy)")
    patterns = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["clustersim"]
    for name in [*project, "README.md"]:
        relative = f"validation/project/{name}"
        assert any(fnmatch.fnmatch(relative, p) for p in patterns), f"{relative} is not covered by package-data"
