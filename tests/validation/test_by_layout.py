"""Training error by layout feature: now and left out, one case in every group whose feature it has."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.intervals import Residual, ResidualTable
from clustersim.validation.by_layout import layout_groups
from clustersim.validation.scoring import CaseScore


def _score(
    case_id: str, error: float, layout: tuple[str, ...], kind: str = "training", source: str = "src"
) -> CaseScore:
    return CaseScore(case_id, kind, 1.0 + error, 1.0, error, "step_time_s", "g", source=source, layout=layout)


def _residual(case_id: str, field: str, r: float, layout: tuple[str, ...]) -> Residual:
    return Residual(case_id, "src", "training", "hopper", "h100-sxm", "megatron", 64, field, r, layout)


def test_each_case_counts_in_every_group_of_its_features_and_plain_ones_in_none():
    scores = [
        _score("moe_fp8", 0.10, ("experts", "fp8")),
        _score("moe", -0.30, ("experts",)),
        _score("dense", 0.05, ()),
        _score("serving", 0.9, (), kind="inference"),  # not a training case: in no group
    ]
    groups = {g.feature: g for g in layout_groups(scores, ResidualTable(()))}
    assert list(groups) == ["experts", "fp8", "none"]  # LAYOUT_FEATURES order; absent features have no row
    assert (groups["experts"].cases, groups["experts"].mape) == (2, pytest.approx(0.20))
    assert (groups["fp8"].cases, groups["fp8"].mape) == (1, pytest.approx(0.10))
    assert (groups["none"].cases, groups["none"].mape) == (1, pytest.approx(0.05))
    assert all(g.left_out_cases == 0 and g.left_out_mape is None for g in groups.values())  # no residuals held


def test_the_left_out_error_is_of_the_cases_own_field():
    # r = ln(measured / predicted) of the duration: a step time at r = ln 2 was predicted at half the measured
    # value (50% off); a rate's residual has its sign flipped, so a rate at r = ln 1.25 was predicted 25% high
    scores = [_score("step", 0.0, ("pipeline",)), _score("rate", 0.0, ("pipeline",))]
    table = ResidualTable(
        (
            _residual("step", "step_time_s", math.log(2), ("pipeline",)),
            _residual("rate", "tokens_per_s_per_device", math.log(1.25), ("pipeline",)),
            _residual("not_scored", "step_time_s", 5.0, ("pipeline",)),  # only the scored cases count
        )
    )
    (group,) = layout_groups(scores, table)
    assert group.left_out_cases == 2 and group.left_out_mape == pytest.approx((0.5 + 0.25) / 2)


def test_each_group_gives_its_figures_per_source_the_most_cases_first():
    """Two sources in one group: three easy runs of one and a hard one of the other; the group's 7.5% is their mix,
    and left out only the residual file's cases count (b's one case has none)."""
    scores = [
        _score("a1", 0.02, ("long_sequence",), source="a"),
        _score("a2", -0.04, ("long_sequence",), source="a"),
        _score("a3", 0.0, ("long_sequence",), source="a"),
        _score("b1", -0.24, ("long_sequence", "context"), source="b"),
    ]
    table = ResidualTable(tuple(_residual(i, "step_time_s", math.log(1.1), ("long_sequence",)) for i in ("a1", "a2")))
    groups = {g.feature: g for g in layout_groups(scores, table)}
    group = groups["long_sequence"]
    assert (group.cases, group.mape) == (4, pytest.approx(0.075))
    a, b = group.sources
    assert (a.source, a.cases, a.mape) == ("a", 3, pytest.approx(0.02))
    assert (a.left_out_cases, a.left_out_mape) == (2, pytest.approx(1 - 1 / 1.1))  # predicted at 1 / 1.1 of the step
    assert (b.source, b.cases, b.mape, b.left_out_cases, b.left_out_mape) == ("b", 1, pytest.approx(0.24), 0, None)
    (only,) = groups["context"].sources
    assert only.source == "b" and groups["context"].to_json()["sources"][0] == only.to_json()


def test_validate_reports_the_groups_in_json_and_on_the_console():
    runner = CliRunner()
    result = runner.invoke(app, ["validate", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    groups = {g["feature"]: g for g in payload["layout_features"]}
    assert {"pipeline", "experts", "fp8", "sharded", "context", "none"} <= set(groups)
    experts = groups["experts"]
    # the bundled MoE runs are all in the packaged residual file, scored now and left out
    assert experts["cases"] == experts["left_out_cases"] >= 70
    # two figures from two predictions (the shipped constants, the folds without each source), not one copied
    assert 0 < experts["mape"] < 1 and 0 < experts["left_out_mape"] < 1
    assert experts["left_out_mape"] != pytest.approx(experts["mape"], rel=1e-6)
    # per source: their cases add up to the group's, and the case-weighted mean of their MAPEs is the group's
    shares = experts["sources"]
    assert sum(s["cases"] for s in shares) == experts["cases"] and len(shares) >= 3
    assert sum(s["cases"] * s["mape"] for s in shares) / experts["cases"] == pytest.approx(experts["mape"])
    assert [s["cases"] for s in shares] == sorted((s["cases"] for s in shares), reverse=True)
    console = runner.invoke(app, ["validate"], env={"COLUMNS": "200"})
    assert "training by layout feature" in console.stdout and "left-out MAPE %" in console.stdout
