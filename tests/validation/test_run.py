"""Scoring files with predictors, the explicit predictor registry, and the ``validate`` command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import clustersim.validation.run as run_module
from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.cli.validate import validate_command
from clustersim.errors import ClusterSimError
from clustersim.present.validation import skipped_lines
from clustersim.validation.cases import KINDS, Case
from clustersim.validation.collective import predict_collective_case
from clustersim.validation.inference import predict_inference_case
from clustersim.validation.run import PREDICTORS, default_predictors, validate_bundled, validate_cases
from clustersim.validation.scoring import Skipped, ValidationReport
from clustersim.validation.training import predict_memory_case, predict_training_case
from tests.validation.helpers import collective, times, training, write_jsonl

PACKAGED_INFERENCE = Path(run_module.__file__).parent / "data" / "inference.jsonl"


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


# scoring files


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


def test_predictors_get_the_typed_case(tmp_path: Path, catalog: Catalog) -> None:
    seen: list[Case] = []

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        seen.append(case)
        assert case.system is not None
        return float(case.system.devices or 0)

    path = write_jsonl(tmp_path / "c.jsonl", [collective("a", 8.0)])
    report = validate_cases([path], catalog, {"collective": predict})
    assert isinstance(seen[0], Case) and report.cases[0].error == pytest.approx(1.0)


def test_mape_worst_and_groups(tmp_path: Path, catalog: Catalog) -> None:
    rows = [collective("a", 10.0), collective("b", 20.0), collective("c", 40.0), collective("d", 80.0)]
    rows += [collective(f"g{i}", v, op="all_gather") for i, v in enumerate([1.0, 2.0, 3.0])]
    rows.append(collective("lone", 5.0, op="broadcast"))
    errors = {"a": 0.1, "b": -0.3, "c": 0.2, "d": 0.0, "g0": 5.0, "g1": 1.0, "g2": 0.0, "lone": 0.0}

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        return case.measured[field] * (1 + errors[case.id])

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
    def predict(case: Case, field: str, catalog: Catalog) -> float:
        if case.id == "refused":
            raise ClusterSimError("no topology for 3 nodes")
        return float("nan") if case.id == "nan" else 1.0

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


def test_mape_by_source_of_a_report(tmp_path: Path, catalog: Catalog) -> None:
    rows = [collective("a", 10.0), collective("b", 20.0), collective("c", 30.0)]
    rows[0]["source"] = "NVIDIA/nccl-tests issue #212 (ring)"
    rows[1]["source"] = "NVIDIA/nccl-tests issue #212 (NVLS)"
    rows[2]["source"] = "crazyguitar/bench data.csv"

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        return 45.0 if case.id == "c" else case.measured[field] * 1.1

    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", rows)], catalog, {"collective": predict})
    by_source = {source: (count, mape) for _, source, count, mape, _ in report.by_source()}
    assert by_source["NVIDIA/nccl-tests"] == (2, pytest.approx(0.1))
    assert by_source["crazyguitar/bench"] == (1, pytest.approx(0.5))


# the registry


def test_the_registry_names_an_adapter_for_every_kind() -> None:
    assert set(PREDICTORS) == set(KINDS)
    adapters = {
        "collective": predict_collective_case,
        "training": predict_training_case,
        "memory": predict_memory_case,
        "inference": predict_inference_case,
    }
    assert adapters == PREDICTORS
    assert default_predictors() == PREDICTORS and default_predictors() is not PREDICTORS


def test_validate_uses_the_registry(tmp_path: Path, catalog: Catalog, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_module, "PREDICTORS", {"collective": times(2.0)})
    report = validate_cases([write_jsonl(tmp_path / "c.jsonl", [collective("a", 10.0)])], catalog)
    assert report.cases[0].error == pytest.approx(1.0)


def test_the_validation_package_finds_no_predictor_by_name() -> None:
    source = Path(run_module.__file__).read_text(encoding="utf-8")
    assert "importlib" not in source and "import_module" not in source


BUNDLED_NAMES = ["collectives.jsonl", "inference.jsonl", "memory.jsonl", "training.jsonl"]
PROJECT_NAMES = [  # the project's own, after the shared copy
    "project/collectives.jsonl",
    "project/inference.jsonl",
    "project/memory.jsonl",
    "project/training.jsonl",
]


def test_bundled_cases_score_with_the_real_models(catalog: Catalog) -> None:
    report = validate_bundled(catalog)
    assert [f.path for f in report.files] == [*BUNDLED_NAMES, *PROJECT_NAMES]
    assert {c.kind for c in report.cases} == set(KINDS)
    assert all(f.cases > 0 and f.mape is not None for f in report.files)
    assert all("no model for kind" not in s.reason for s in report.skipped)


# presentation and the command


def test_skipped_lines_count_by_reason_most_common_first() -> None:
    skipped = [Skipped(f"x{i}", "too big") for i in range(5)] + [Skipped("y", "no [model]")]
    assert skipped_lines(skipped) == [
        "skipped 6 case(s):",
        "  5 x too big: x0, x1, x2, ... (2 more)",
        "  1 x no [model]: y",
    ]
    assert skipped_lines([]) == []


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.delenv("CLUSTERSIM_CATALOG", raising=False)
    app = typer.Typer()
    app.command("validate")(validate_command)
    return app


@pytest.fixture
def fake_cli(cli: typer.Typer, monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.setattr(run_module, "PREDICTORS", {"collective": times(1.1)})
    return cli


def test_cli_json(tmp_path: Path, fake_cli: typer.Typer) -> None:
    rows = [collective(f"c{i}", 10.0 * (i + 1), size_bytes=2**20 * 2**i) for i in range(8)] + [training("t", 1.0)]
    path = write_jsonl(tmp_path / "c.jsonl", rows)
    result = CliRunner().invoke(fake_cli, [str(path), "--json", "--min-size", "8MiB"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [c["id"] for c in payload["cases"]] == ["c3", "c4", "c5", "c6", "c7"]
    assert payload["files"][0]["mape"] == pytest.approx(0.1)
    assert {s["id"] for s in payload["skipped"]} == {"c0", "c1", "c2", "t"}


def test_cli_human_output(tmp_path: Path, fake_cli: typer.Typer) -> None:
    rows = [collective("c[1]", 10.0), collective("c2", 20.0), training("t1", 1.0), training("t2", 1.0)]
    result = CliRunner().invoke(fake_cli, [str(write_jsonl(tmp_path / "c.jsonl", rows))])
    assert result.exit_code == 0, result.output
    for text in ("c[1]", "+10.0%", "validation summary", "mixed", "skipped 2", "no model for kind 'training'"):
        assert text in result.output
    assert "  2 x no model for kind 'training' yet: t1, t2\n" in result.output  # one unwrapped line


@pytest.mark.parametrize(
    ("args", "expected"),
    [(["missing.jsonl"], "missing.jsonl"), (["{good}", "--min-size", "lots"], "lots")],
)
def test_cli_errors_exit_2_with_one_line(tmp_path: Path, fake_cli: typer.Typer, args: list[str], expected: str) -> None:
    good = write_jsonl(tmp_path / "good.jsonl", [collective("a", 1.0)])
    args = [str(tmp_path / a) if a == "missing.jsonl" else a.replace("{good}", str(good)) for a in args]
    result = CliRunner().invoke(fake_cli, args)
    assert result.exit_code == 2
    assert expected in result.output and "Traceback" not in result.output


def test_cli_without_files_scores_the_bundled_ground_truth(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [f["path"] for f in payload["files"]] == [*BUNDLED_NAMES, *PROJECT_NAMES]
    assert all(f["cases"] > 0 for f in payload["files"])
    table = CliRunner().invoke(cli, [], env={"COLUMNS": "200"})
    assert table.exit_code == 0, table.output
    assert all(f"│ {name}" in table.output for name in BUNDLED_NAMES)


def test_cli_help_says_what_no_files_means(cli: typer.Typer) -> None:
    result = CliRunner().invoke(cli, ["--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    assert "bundled" in result.output


# latency fields measured beside the primary one


def test_measured_latency_fields_get_their_own_figures_beside_the_throughput(tmp_path: Path, catalog: Catalog) -> None:
    """An inference case measuring tokens/s, TTFT and TPOT is scored on its primary field (tokens/s) in the
    file's figures, and on TTFT and TPOT apart: per case, per file and field, per source and field."""
    rows = [json.loads(line) for line in Path(PACKAGED_INFERENCE).read_text().splitlines() if line.strip()]
    with_latency = [r for r in rows if r["measured"].get("ttft_s") and r["measured"].get("tpot_s")][:3]
    assert len(with_latency) == 3
    path = write_jsonl(tmp_path / "i.jsonl", with_latency)
    halves = {"output_tokens_per_s": 2.0, "ttft_s": 0.5, "tpot_s": 4.0}

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        return case.measured[field] * halves[field]

    report = validate_cases([path], catalog, {"inference": predict})
    assert [c.field for c in report.cases] == ["output_tokens_per_s"] * 3
    assert report.files[0].mape == pytest.approx(1.0)  # throughput only: latency is not averaged in
    assert [(c.id, c.field) for c in report.field_cases] == [
        (r["id"], f) for r in with_latency for f in ("ttft_s", "tpot_s")
    ]
    by_field = {f.field: f for f in report.field_files}
    assert by_field["ttft_s"].mape == pytest.approx(0.5) and by_field["tpot_s"].mape == pytest.approx(3.0)
    assert by_field["ttft_s"].cases == 3 and by_field["ttft_s"].path == str(path)
    payload = report.to_json()
    assert {(f["field"], f["mape"]) for f in payload["fields"]} == {("ttft_s", 0.5), ("tpot_s", 3.0)}
    assert {(s["field"], s["cases"]) for s in payload["field_sources"]} == {("ttft_s", 3), ("tpot_s", 3)}
    assert payload["field_cases"][0]["error"] == pytest.approx(-0.5)


def _skipping_latency(tmp_path: Path, catalog: Catalog, reason: str) -> tuple[dict[str, Any], Path, ValidationReport]:
    """A packaged case with a measured TTFT, validated by a predictor that refuses every latency field with
    ``reason`` (``{field}`` in it replaced by the field)."""
    rows = [json.loads(line) for line in Path(PACKAGED_INFERENCE).read_text().splitlines() if line.strip()]
    row = next(r for r in rows if r["measured"].get("ttft_s"))

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        if field != "output_tokens_per_s":
            raise ClusterSimError(reason.format(field=field))
        return case.measured[field]

    path = write_jsonl(tmp_path / "i.jsonl", [row])
    return row, path, validate_cases([path], catalog, {"inference": predict})


def test_a_latency_field_the_model_cannot_predict_is_skipped_with_its_reason_and_the_primary_score_stands(
    tmp_path: Path, catalog: Catalog
) -> None:
    row, path, report = _skipping_latency(tmp_path, catalog, "cannot predict {field}")
    assert len(report.cases) == 1 and report.field_cases == [] and report.field_files == []
    assert report.to_json()["fields"] == []
    measured = [f for f in ("ttft_s", "tpot_s") if row["measured"].get(f)]
    assert report.skipped == [
        Skipped(f"{row['id']} {f}", f"{f}: cannot predict {f}", str(path)) for f in measured
    ]  # fmt: skip


def test_a_skipped_field_whose_reason_names_it_already_is_not_named_twice(tmp_path: Path, catalog: Catalog) -> None:
    row, _, report = _skipping_latency(tmp_path, catalog, "{field}: needs workload.requests")
    assert {s.reason for s in report.skipped} == {
        f"{f}: needs workload.requests" for f in ("ttft_s", "tpot_s") if row["measured"].get(f)
    }
