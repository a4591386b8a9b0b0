"""Scoring math: Spearman with ties (by hand), MAPE, worst case, groups, MAPE by source, JSON shape."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.validation.cases import as_case, source_key
from clustersim.validation.scoring import (
    CaseScore,
    ValidationReport,
    group_key,
    mape_by_source,
    rank_average,
    score_file,
    spearman,
)
from tests.validation.helpers import collective, training


def score(
    case_id: str, predicted: float, measured: float, group: str = "g", path: str = "f", source: str = "s"
) -> CaseScore:
    return CaseScore(case_id, "collective", predicted, measured, predicted / measured - 1, "busbw_GBps", group, path,
                     source)  # fmt: skip


def test_spearman_perfect_reversed_and_ties() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert list(rank_average([10, 20, 20, 30])) == [1.0, 2.5, 2.5, 4.0]
    # ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): Pearson of the ranks
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1.0], [2.0]) is None
    with pytest.raises(ValueError, match="equal length"):
        spearman([1.0, 2.0], [1.0])


def test_spearman_with_ties_on_both_sides_by_hand() -> None:
    # predicted ranks (1, 2.5, 2.5, 4, 5), measured [3, 1, 4, 4, 5] ranks (2, 1, 3.5, 3.5, 5); both mean 3.
    # centred: (-2, -.5, -.5, 1, 2) and (-1, -2, .5, .5, 2): dot 7.25, squared norms 9.5 and 9.5 -> 29/38.
    assert list(rank_average([3, 1, 4, 4, 5])) == [2.0, 1.0, 3.5, 3.5, 5.0]
    assert spearman([10, 20, 20, 40, 50], [3, 1, 4, 4, 5]) == pytest.approx(29 / 38)


@given(st.lists(st.integers(-10_000, 10_000), min_size=2, max_size=30, unique=True))
def test_spearman_of_increasing_transform_is_one(values: list[int]) -> None:
    measured = [float(v) for v in values]
    predicted = [float(3 * v**3 + v + 7) for v in values]  # strictly increasing, exact in a float
    assert spearman(predicted, measured) == pytest.approx(1.0)
    assert spearman([-p for p in predicted], measured) == pytest.approx(-1.0)


def test_score_file_mape_worst_and_spearman_per_group() -> None:
    scores = [score("a", 11, 10), score("b", 14, 20), score("c", 48, 40), score("d", 80, 80)]  # +10 -30 +20 0 %
    scores += [score("g0", 6, 1, "h"), score("g1", 4, 2, "h"), score("g2", 3, 3, "h")]  # +500 +100 0 %, reversed
    scores += [score("lone", 5, 5, "k")]
    file = score_file("f", ["collective"] * 9, scores)
    assert (file.path, file.kind, file.cases) == ("f", "collective", 8)
    assert file.mape == pytest.approx((0.1 + 0.3 + 0.2 + 0 + 5 + 1 + 0 + 0) / 8)
    assert file.worst_id == "g0" and file.worst_error == pytest.approx(5.0)
    # group g keeps the order (1), h is reversed (-1), k has fewer than three cases
    assert file.spearman == pytest.approx((1.0 - 1.0) / 2)


def test_score_file_kinds_and_nothing_scored() -> None:
    assert score_file("f", ["training", "collective"], []).kind == "mixed"
    empty = score_file("f", [], [])
    assert (empty.kind, empty.cases, empty.mape, empty.worst_id, empty.spearman) == ("none", 0, None, None, None)


def test_mape_by_source_groups_by_file_and_first_word() -> None:
    cases = [score("a", 11, 10, source="NVIDIA/nccl-tests"), score("b", 22, 20, source="NVIDIA/nccl-tests"),
             score("c", 45, 30, source="crazyguitar/bench"), score("d", 45, 30, path="other",
                                                                   source="NVIDIA/nccl-tests")]  # fmt: skip
    rows = mape_by_source(cases)
    assert [(path, source, count) for path, source, count, _, _ in rows] == [
        ("f", "NVIDIA/nccl-tests", 2), ("f", "crazyguitar/bench", 1), ("other", "NVIDIA/nccl-tests", 1)
    ]  # fmt: skip
    assert rows[0][3] == pytest.approx(0.1) and rows[1][3] == pytest.approx(0.5) and rows[1][4].id == "c"
    assert ValidationReport(cases=cases).by_source() == rows
    assert source_key("NVIDIA/nccl-tests issue #212 (ring)") == "NVIDIA/nccl-tests"
    assert source_key("  ") == "(no source)"


def test_group_key_shares_model_and_system_or_op_and_system() -> None:
    a, b = as_case(collective("a", 1.0)), as_case(collective("b", 2.0, size_bytes=1 << 30))
    assert group_key(a) == group_key(b) != group_key(as_case(collective("c", 1.0, op="all_gather")))
    t = as_case(training("t", 1.0))
    assert group_key(t) == group_key(as_case(training("u", 2.0) | {"notes": "another run"}))
    assert group_key(t) != group_key(as_case(training("v", 1.0) | {"system": {"accelerator": "a100-sxm4-80gb"}}))


def test_json_shape_is_exact() -> None:
    report = ValidationReport(cases=[score("a", 9, 10)])
    report.files.append(score_file("f", ["collective"], report.cases))
    payload = report.to_json()
    assert set(payload) == {
        "level", "files", "cases", "skipped", "sources", "fields", "field_sources", "field_cases", "layout_features",
        "accelerators",
    }  # fmt: skip
    assert set(payload["files"][0]) == {
        "path",
        "kind",
        "cases",
        "mape",
        "worst",
        "spearman",
        "coverage",
        "median_width",
    }
    assert payload["files"][0]["worst"] == {"id": "a", "error": pytest.approx(-0.1)}
    assert set(payload["cases"][0]) == {"id", "kind", "predicted", "measured", "error", "assumed", "interval"}
    assert set(payload["sources"][0]) == {"file", "source", "cases", "mape", "worst", "fit", "coverage", "median_width"}
    assert payload["sources"][0]["fit"] == "no fitted constants"  # no manifest was read for this report
    assert json.loads(json.dumps(payload)) == payload
