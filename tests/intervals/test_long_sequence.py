"""A long sequence is a layout feature: its interval is never narrower than the long-sequence runs' left-out spread."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.intervals import load_residuals, spread_for
from clustersim.intervals.layout import LONG_SEQUENCE_TOKENS
from clustersim.validation.cases import Case, default_case_files, read_all
from clustersim.validation.intervals import training_layout


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


@pytest.fixture(scope="module")
def training_cases() -> list[Case]:
    cases = read_all([path for _, path in default_case_files()])
    return [c for c in cases if c.kind == "training" and c.model is not None]


@pytest.fixture(scope="module")
def long_cases(training_cases: list[Case]) -> list[Case]:
    return [c for c in training_cases if c.model is not None and (c.model.seq_len or 0) >= LONG_SEQUENCE_TOKENS]


def test_the_bundled_long_sequence_runs_carry_the_feature_in_their_residuals(
    catalog: Catalog, long_cases: list[Case]
) -> None:
    """Every training run of 16K tokens or more has the feature, and its left-out residual carries the layout its
    case has now (residuals written before the feature existed would lack it)."""
    held = {r.id: r for r in load_residuals().residuals if r.kind == "training"}
    assert len(long_cases) >= 30
    for case in long_cases:
        layout = training_layout(case, catalog)
        assert "long_sequence" in layout, case.id
        assert case.id in held and held[case.id].layout == layout, case.id


def test_a_short_sequence_has_no_such_feature(catalog: Catalog, training_cases: list[Case]) -> None:
    nemo = [c for c in training_cases if c.id.startswith("nemo_longseq")]
    by_length = {c.model.seq_len: training_layout(c, catalog) for c in nemo if c.model is not None}
    assert "long_sequence" not in by_length[8192] and "long_sequence" in by_length[16384]


def test_the_long_sequence_runs_widen_a_long_jobs_interval() -> None:
    """On the packaged residuals the long-sequence runs are spread wider than an H100 Megatron job's own stack at its
    scale, so a long job's interval says it borrowed their width (the evidence the feature was added for: 13.1% off
    left out against 8.5% for the others, 2026-12-07)."""
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "megatron", "devices": 256}
    plain, long = spread_for("training", **ask), spread_for("training", **ask, layout=("long_sequence",))
    assert plain is not None and long is not None
    assert long.q_hi > plain.q_hi
    assert "also have long_sequence" in long.note
