"""Ground-truth reading, scoring math, Spearman, and the ``validate`` command."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import clustersim.validation.run as validate_module
from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.cli.validate import validate_command
from clustersim.errors import ClusterSimError
from clustersim.validation.run import (
    PRIMARY_FIELDS,
    Case,
    default_predictors,
    primary_field,
    rank_average,
    read_cases,
    spearman,
    validate_cases,
)

SYSTEM = {"accelerator": "h100-sxm", "devices": 16, "devices_per_node": 8, "nodes": 2}
MODEL = {"name": "tiny", "layers": 2, "hidden": 64, "ffn_hidden": 256, "heads": 4, "vocab": 1000, "seq_len": 128}
SHARED = Path(__file__).resolve().parents[2] / "shared" / "validation"


def collective(case_id: str, busbw: float, size_bytes: int = 1 << 26, op: str = "all_reduce") -> dict[str, Any]:
    return {
        "id": case_id,
        "kind": "collective",
        "source": "test",
        "system": SYSTEM,
        "op": op,
        "size_bytes": size_bytes,
        "measured": {"busbw_GBps": busbw, "algbw_GBps": busbw / 2},
    }


def training(case_id: str, step_time_s: float) -> dict[str, Any]:
    return {"id": case_id, "kind": "training", "source": "test", "model": MODEL, "system": SYSTEM,
            "measured": {"step_time_s": step_time_s}}  # fmt: skip


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def times(factor: float) -> validate_module.Predictor:
    def predict(case: Mapping[str, Any], field: str, catalog: Catalog) -> float:
        return float(case["measured"][field]) * factor

    return predict


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


# reading


def test_read_cases_skips_blank_lines_and_ignores_unknown_fields(tmp_path: Path) -> None:
    row = collective("a", 100.0) | {"extra_context": {"nccl": "2.21"}, "notes": None}
    path = write_jsonl(tmp_path / "c.jsonl", [row, "", "   ", collective("b", 90.0)])
    cases = read_cases(path)
    assert [c.id for c in cases] == ["a", "b"]
    assert cases[0].size_bytes == 1 << 26 and cases[0].op == "all_reduce" and cases[0].model is None
    assert not hasattr(cases[0], "extra_context")


def test_null_measured_values_are_dropped(tmp_path: Path) -> None:
    row = training("t", 2.0)
    row["measured"] = {"step_time_s": None, "mfu": 0.4}
    (case,) = read_cases(write_jsonl(tmp_path / "t.jsonl", [row]))
    assert case.measured == {"mfu": 0.4}
    assert primary_field(case) == "mfu"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"kind": "training", "measured": {}}), "id"),
        (json.dumps({"id": "x", "measured": {}}), "kind"),
        (json.dumps({"id": "x", "kind": "training"}), "measured"),
        (json.dumps({"id": "x", "kind": "serving", "measured": {}}), "unknown kind 'serving'"),
        (json.dumps({"id": "x", "kind": "training", "measured": {"mfu": "high"}}), "measured.mfu"),
        (json.dumps(collective("a", 1.0)), "duplicate id 'a' (first on line 1)"),
    ],
)
def test_bad_line_names_file_line_and_problem(tmp_path: Path, line: str, expected: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [collective("a", 1.0), "", line])
    with pytest.raises(ClusterSimError) as info:
        read_cases(path)
    message = str(info.value)
    assert f"{path}, line 3" in message
    assert expected in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match=r"nowhere\.jsonl"):
        read_cases(tmp_path / "nowhere.jsonl")


def test_shipped_ground_truth_files_read() -> None:
    files = sorted(SHARED.glob("*.jsonl"))
    if not files:
        pytest.skip("no shared ground-truth files here")
    for path in files:
        for case in read_cases(path):
            assert primary_field(case) in PRIMARY_FIELDS[case.kind]


# primary field


@pytest.mark.parametrize(
    ("kind", "measured", "expected"),
    [
        ("training", {"mfu": 0.5, "tokens_per_s_per_device": 3000.0, "step_time_s": 1.0}, "step_time_s"),
        ("training", {"mfu": 0.5, "hw_tflops_per_device": 400.0}, "hw_tflops_per_device"),
        ("training", {"mfu": 0.5, "model_tflops_per_device": 300.0}, "model_tflops_per_device"),
        ("collective", {"time_us": 10.0, "algbw_GBps": 50.0, "busbw_GBps": 90.0}, "busbw_GBps"),
        ("collective", {"time_us": 10.0, "algbw_GBps": 50.0}, "algbw_GBps"),
        ("memory", {"activations_GiB_per_device": 10.0, "total_GiB_per_device": 60.0}, "total_GiB_per_device"),
        ("memory", {"activations_GiB_per_device": 10.0, "weights_and_optimizer_GiB_per_device": 40.0},
         "weights_and_optimizer_GiB_per_device"),
        ("inference", {"ttft_s": 0.2, "output_tokens_per_s": 5000.0}, "output_tokens_per_s"),
    ],
)  # fmt: skip
def test_primary_field_order(kind: str, measured: dict[str, float], expected: str) -> None:
    assert primary_field(Case.model_validate({"id": "x", "kind": kind, "measured": measured})) == expected


def test_no_primary_field_is_an_error() -> None:
    case = Case.model_validate({"id": "x", "kind": "inference", "measured": {"ttft_s": 0.2}})
    with pytest.raises(ClusterSimError, match="output_tokens_per_s"):
        primary_field(case)


# Spearman


def test_spearman_perfect_reversed_and_ties() -> None:
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert list(rank_average([10, 20, 20, 30])) == [1.0, 2.5, 2.5, 4.0]
    # ranks (1, 2.5, 2.5, 4) vs (1, 2, 3, 4): Pearson of the ranks
    assert spearman([1, 2, 2, 3], [1, 2, 3, 4]) == pytest.approx(4.5 / (4.5 * 5) ** 0.5)
    assert spearman([1, 1, 1], [1, 2, 3]) is None
    assert spearman([1.0], [2.0]) is None


@given(st.lists(st.integers(-10_000, 10_000), min_size=2, max_size=30, unique=True))
def test_spearman_of_increasing_transform_is_one(values: list[int]) -> None:
    measured = [float(v) for v in values]
    predicted = [float(3 * v**3 + v + 7) for v in values]  # strictly increasing, exact in a float
    assert spearman(predicted, measured) == pytest.approx(1.0)
    assert spearman([-p for p in predicted], measured) == pytest.approx(-1.0)


# scoring


def test_scoring_math_with_fake_predictor(tmp_path: Path, catalog: Catalog) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [collective(f"c{i}", 10.0 * (i + 1)) for i in range(4)])
    report = validate_cases([path], catalog, {"collective": times(1.1)})
    assert [c.id for c in report.cases] == ["c0", "c1", "c2", "c3"]
    assert all(c.error == pytest.approx(0.1) and c.field == "busbw_GBps" for c in report.cases)
    assert report.cases[0].predicted == pytest.approx(11.0) and report.cases[0].measured == 10.0
    (file,) = report.files
    assert (file.kind, file.cases, file.path) == ("collective", 4, str(path))
    assert file.mape == pytest.approx(0.1)
    assert file.spearman == pytest.approx(1.0)
    assert report.skipped == []


def test_mape_worst_and_groups(tmp_path: Path, catalog: Catalog) -> None:
    rows = [collective("a", 10.0), collective("b", 20.0), collective("c", 40.0), collective("d", 80.0)]
    rows += [collective(f"g{i}", v, op="all_gather") for i, v in enumerate([1.0, 2.0, 3.0])]
    rows.append(collective("lone", 5.0, op="broadcast"))
    errors = {"a": 0.1, "b": -0.3, "c": 0.2, "d": 0.0, "g0": 5.0, "g1": 1.0, "g2": 0.0, "lone": 0.0}

    def predict(case: Mapping[str, Any], field: str, catalog: Catalog) -> float:
        return float(case["measured"][field]) * (1 + errors[case["id"]])

    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", rows)], catalog, {"collective": predict})
    (file,) = report.files
    assert file.mape == pytest.approx(sum(abs(e) for e in errors.values()) / len(errors))
    assert file.worst_id == "g0" and file.worst_error == pytest.approx(5.0)
    # all_reduce group: order kept (1.0); all_gather: 6, 4, 3 vs 1, 2, 3 reversed (-1.0); broadcast too small
    assert file.spearman == pytest.approx(0.0)
    assert len({c.group for c in report.cases}) == 3


def test_kinds_without_predictor_are_skipped(tmp_path: Path, catalog: Catalog) -> None:
    path = write_jsonl(tmp_path / "mix.jsonl", [training("t1", 1.0), collective("c1", 10.0), training("t2", 2.0)])
    report = validate_cases([path], catalog, {})
    assert report.cases == []
    assert [(s.id, s.reason) for s in report.skipped] == [
        ("t1", "no model for kind 'training' yet"),
        ("c1", "no model for kind 'collective' yet"),
        ("t2", "no model for kind 'training' yet"),
    ]
    (file,) = report.files
    assert (file.kind, file.cases, file.mape, file.worst_id, file.spearman) == ("mixed", 0, None, None, None)
    assert report.to_json()["files"][0]["worst"] is None


def test_predictor_errors_and_bad_values_skip(tmp_path: Path, catalog: Catalog) -> None:
    def predict(case: Mapping[str, Any], field: str, catalog: Catalog) -> float:
        if case["id"] == "refused":
            raise ClusterSimError("no topology for 3 nodes")
        return float("nan") if case["id"] == "nan" else 1.0

    rows = [collective("refused", 1.0), collective("nan", 1.0), collective("zero", 0.0), collective("ok", 2.0)]
    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", rows)], catalog, {"collective": predict})
    reasons = {s.id: s.reason for s in report.skipped}
    assert reasons["refused"] == "no topology for 3 nodes"
    assert "nan" in reasons["nan"] and "is 0" in reasons["zero"]
    assert [c.id for c in report.cases] == ["ok"]
    assert report.cases[0].error == pytest.approx(-0.5)


def test_min_size_skips_small_collectives_only(tmp_path: Path, catalog: Catalog) -> None:
    rows = [collective("small", 1.0, size_bytes=1024), collective("big", 1.0, size_bytes=1 << 30), training("t", 1)]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    predictors = {"collective": times(1.0), "training": times(1.0)}
    report = validate_cases([path], catalog, predictors, min_size_bytes=64 * 2**20)
    assert [c.id for c in report.cases] == ["big", "t"]
    assert [s.id for s in report.skipped] == ["small"]


def test_json_shape_is_exact(tmp_path: Path, catalog: Catalog) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [collective("a", 10.0), training("t", 1.0)])
    payload = validate_cases([path], catalog, {"collective": times(0.9)}).to_json()
    assert set(payload) == {"files", "cases", "skipped"}
    assert set(payload["files"][0]) == {"path", "kind", "cases", "mape", "worst", "spearman"}
    assert set(payload["files"][0]["worst"]) == {"id", "error"}
    assert set(payload["cases"][0]) == {"id", "kind", "predicted", "measured", "error"}
    assert payload["skipped"] == [{"id": "t", "reason": "no model for kind 'training' yet"}]
    assert json.loads(json.dumps(payload)) == payload


def test_default_predictors_are_the_named_model_functions() -> None:
    predictors = default_predictors()
    assert {"collective", "training", "memory"} <= set(predictors)
    for kind, function in predictors.items():
        module, name = validate_module.PREDICTOR_MODULES[kind]
        assert (function.__module__, function.__name__) == (module, name)


def test_validate_uses_default_predictors(tmp_path: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(validate_module, "default_predictors", lambda: {"collective": times(2.0)})
    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", [collective("a", 10.0)])], catalog)
    assert report.cases[0].error == pytest.approx(1.0)


# CLI


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setattr(validate_module, "default_predictors", lambda: {"collective": times(1.1)})
    monkeypatch.delenv("CLUSTERSIM_CATALOG", raising=False)
    app = typer.Typer()
    app.command("validate")(validate_command)
    return app


def test_cli_json(tmp_path: Path, cli: typer.Typer) -> None:
    rows = [collective(f"c{i}", 10.0 * (i + 1), size_bytes=2**20 * 2**i) for i in range(8)] + [training("t", 1.0)]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    result = CliRunner().invoke(cli, [str(path), "--json", "--min-size", "8MiB"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [c["id"] for c in payload["cases"]] == ["c3", "c4", "c5", "c6", "c7"]
    assert payload["files"][0]["mape"] == pytest.approx(0.1)
    assert {s["id"] for s in payload["skipped"]} == {"c0", "c1", "c2", "t"}


def test_cli_human_output(tmp_path: Path, cli: typer.Typer) -> None:
    rows = [collective("c[1]", 10.0), collective("c2", 20.0), training("t1", 1.0), training("t2", 1.0)]
    result = CliRunner().invoke(cli, [str(write_jsonl(tmp_path / "c.jsonl", rows))])
    assert result.exit_code == 0, result.output
    for text in ("c[1]", "+10.0%", "validation summary", "mixed", "skipped 2", "no model for kind 'training'"):
        assert text in result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["missing.jsonl"], "missing.jsonl"), (["{good}", "--min-size", "lots"], "lots")],
)
def test_cli_errors_exit_2_with_one_line(tmp_path: Path, cli: typer.Typer, args: list[str], expected: str) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [collective("a", 1.0)])
    args = [str(tmp_path / a) if a == "missing.jsonl" else a.replace("{good}", str(good)) for a in args]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    assert expected in result.output and "Traceback" not in result.output


def test_mape_by_source_groups_cases_by_the_first_word_of_their_source(tmp_path: Path, catalog: Catalog) -> None:
    rows = [collective("a", 10.0), collective("b", 20.0), collective("c", 30.0)]
    rows[0]["source"] = "NVIDIA/nccl-tests issue #212 (ring)"
    rows[1]["source"] = "NVIDIA/nccl-tests issue #212 (NVLS)"
    rows[2]["source"] = "crazyguitar/bench data.csv"
    predictors = {"collective": lambda case, field, cat: 45.0 if case["id"] == "c" else case["measured"][field] * 1.1}
    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", rows)], catalog, predictors)
    by_source = {source: (count, mape) for _, source, count, mape, _ in validate_module.mape_by_source(report.cases)}
    assert by_source["NVIDIA/nccl-tests"] == (2, pytest.approx(0.1))
    assert by_source["crazyguitar/bench"] == (1, pytest.approx(0.5))
    assert validate_module.source_key("") == "(no source)"
