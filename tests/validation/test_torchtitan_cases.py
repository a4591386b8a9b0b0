"""torchtitan's published throughput runs (``validation/project/training.jsonl``, source key ``pytorch/torchtitan``).

They judge the ``torchtitan`` software profile out of sample: every case names the framework, states its
whole layout (nothing left for the profile's defaults to fill), its degrees multiply to the devices, its
global batch is the local batch (micro-batch x pipeline micro-batches) times the data-parallel degree
(torchtitan accumulates no gradients in these runs), and each one is priced to a finite, positive throughput.
"""

from __future__ import annotations

import math

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.validation.cases import Case, primary_field, project_dir, read_cases, source_key
from clustersim.validation.training import case_assumptions, predict_training_case

SOURCE = "pytorch/torchtitan"
CASES_PER_FILE = {  # the file each case cites (its source's second word) and how many rows were taken
    "benchmarks/llama3_h100_202412_torchtitan.md": 18,
    "benchmarks/asyncTP_llama3_h100_2025-06_torchtitan.md": 12,
    "docs/performance.md": 11,
    "benchmarks/llama3-8b_h200_202506_trainy-whitefiber.md": 2,
}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


@pytest.fixture(scope="module")
def titan() -> list[Case]:
    cases = read_cases(project_dir() / "training.jsonl")
    return [c for c in cases if source_key(c.source) == SOURCE]


def test_the_rows_of_each_file_are_there(titan: list[Case]) -> None:
    counts: dict[str, int] = {}
    for case in titan:
        counts[case.source.split()[1]] = counts.get(case.source.split()[1], 0) + 1
    assert counts == CASES_PER_FILE


def test_every_case_is_a_torchtitan_run_with_its_layout_stated(titan: list[Case], catalog: Catalog) -> None:
    for case in titan:
        assert case.software is not None and case.software.framework == "torchtitan", case.id
        assert "@" in case.source, f"{case.id}: no commit in the source"
        assert primary_field(case) == "tokens_per_s_per_device", case.id
        p, s = case.parallel, case.system
        assert p is not None and s is not None and case.model is not None
        assert p.tp * p.pp * p.dp * (p.cp or 1) == s.devices, case.id
        # local batch = micro-batch x micro-batches (torchtitan's default: as many as pipeline stages), no accumulation
        assert p.micro_batch is not None and p.global_batch == p.micro_batch * p.pp * p.dp, case.id
        assert case_assumptions(case, catalog) == {}, f"{case.id}: left a layout field to the profile's defaults"


def test_every_case_is_priced(titan: list[Case], catalog: Catalog) -> None:
    for case in titan:
        value = predict_training_case(case, "tokens_per_s_per_device", catalog)
        assert math.isfinite(value) and value > 0, case.id
