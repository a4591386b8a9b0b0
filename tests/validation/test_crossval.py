"""Leave-one-source-out cross-validation, and ``validate --cross-validate`` (tiny iteration budgets)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.cli.validate import validate_command
from clustersim.compute.efficiency import efficiency_table
from clustersim.validation.cases import Case, bundled_dir, project_dir
from clustersim.validation.crossval import _best_of_two_starts, cross_validate
from clustersim.validation.fit import fit, loss, prepare_cases
from clustersim.validation.manifest import fitted_case_ids, read_manifest
from clustersim.validation.run import validate_cases
from clustersim.validation.specs import SPECS, TRAINING_PRIORS
from tests.validation.helpers import write_jsonl

KEYS = {
    "file", "kind", "source", "cases", "fitted_cases", "shipped_mape", "in_sample_mape", "held_out_mape", "note",
    "held_at_prior", "skipped",
}  # fmt: skip


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


def _rows(name: str, wanted: int, test, directory: Path | None = None) -> list[dict[str, object]]:
    path = (directory or bundled_dir()) / name
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [row for row in lines if test(Case.model_validate(row))][:wanted]


@pytest.fixture(scope="module")
def collectives(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Multi-node cases of at least 64 MiB from two sources, and two under 1 MiB (scored, never fitted)."""
    big = [
        _rows("collectives.jsonl", 3, lambda c, s=s: s in c.source and _multi_node_and_big(c))
        for s in ("crazyguitar", "awsome")
    ]
    small = _rows("collectives.jsonl", 2, lambda c: "awsome" in c.source and (c.size_bytes or 0) < 2**25)
    small = [row | {"id": f"small{i}", "size_bytes": 2**16} for i, row in enumerate(small)]  # under 1 MiB
    return write_jsonl(tmp_path_factory.mktemp("cv") / "collectives.jsonl", [*big[0], *big[1], *small])


def _multi_node_and_big(case: Case) -> bool:
    return (case.size_bytes or 0) >= 2**26 and case.system is not None and (case.system.nodes or 1) > 1


def test_one_row_per_source_and_the_shipped_figures_are_validates(collectives: Path, catalog: Catalog) -> None:
    progress: list[tuple[str, int, int]] = []
    result = cross_validate(
        [("c.jsonl", collectives)], catalog, max_iterations=1, on_progress=lambda *a: progress.append(a)
    )
    assert [r.source for r in result.sources] == [
        "crazyguitar/aws-gpu-communication-benchmark",
        "aws-samples/awsome-distributed-training",
    ]
    first, second = result.sources
    assert (first.cases, first.fitted_cases, second.cases, second.fitted_cases) == (3, 3, 5, 3)
    report = validate_cases([collectives], catalog)
    shipped = {source: mape for _, source, _, mape, _ in report.by_source()}
    for row in result.sources:
        assert row.shipped_mape == pytest.approx(shipped[row.source], rel=1e-12)
        assert row.in_sample_mape is not None and row.held_out_mape is not None
        assert set(row.to_json()) == KEYS and row.kind == "collective" and row.file == "c.jsonl"
    assert [(done, total) for _, done, total in progress] == [(0, 3), (1, 3), (2, 3), (3, 3)]
    assert progress[1][0] == "c.jsonl: leaving out crazyguitar/aws-gpu-communication-benchmark"
    assert {p.constant.name for _, p in result.profiles} >= {"network_efficiency", "ramp_exponent"}


def test_no_iterations_refit_nothing(collectives: Path, catalog: Catalog) -> None:
    result = cross_validate([("c.jsonl", collectives)], catalog, max_iterations=0)
    for row in result.sources:
        assert row.shipped_mape == row.in_sample_mape == row.held_out_mape


def test_min_size_leaves_small_collectives_unscored(collectives: Path, catalog: Catalog) -> None:
    result = cross_validate([("c.jsonl", collectives)], catalog, max_iterations=0, min_size_bytes=2**20)
    assert [r.cases for r in result.sources] == [3, 3]  # the two small awsome cases are left out


def test_a_family_with_one_source_is_held_out_with_the_fallback_familys_constants(
    tmp_path: Path, catalog: Catalog
) -> None:
    rows = _rows("training.jsonl", 2, lambda c: c.id.startswith("neuron"))
    rows += _rows("training.jsonl", 2, lambda c: c.id.startswith("mcore080"))
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    result = cross_validate([("t.jsonl", path)], catalog, max_iterations=0)
    by_source = {r.source: r for r in result.sources}
    neuron = by_source["aws-neuron/aws-neuron-sdk"]
    assert neuron.note == "no other source fits trainium: held out with hopper's constants"
    assert neuron.in_sample_mape == neuron.shipped_mape != neuron.held_out_mape
    megatron = by_source["NVIDIA/Megatron-LM"]  # the fallback family itself has none to fall back on
    assert megatron.held_out_mape is None and megatron.note == "no other source fits the hopper constants"
    assert efficiency_table()["trainium"].gemm_max != efficiency_table()["hopper"].gemm_max  # nothing cached moved


def test_a_constant_one_source_alone_informs_is_held_at_its_prior_when_that_source_is_left_out(
    tmp_path: Path, catalog: Catalog
) -> None:
    # BF16 Hopper cases from two sources and Megatron-Bridge's FP8 MoE rows: only those depend on
    # fp8_efficiency_ratio (and on expert_gemm_s, which Hopper holds at a prior read off other sources).
    rows = _rows("training.jsonl", 2, lambda c: c.id.startswith("mcore080"))
    rows += _rows("training.jsonl", 2, lambda c: c.id.startswith("llmfoundry") and "h100" in c.id and "bf16" in c.id)
    rows += _rows("training.jsonl", 2, lambda c: c.id.startswith("mbridge_") and c.model.moe is not None)
    path = write_jsonl(tmp_path / "t.jsonl", rows)
    result = cross_validate([("t.jsonl", path)], catalog, max_iterations=0)
    by_source = {r.source: r for r in result.sources}
    bridge = by_source["NVIDIA-NeMo/Megatron-Bridge"]
    held_at = {h.constant: h.value for h in bridge.held_at_prior}
    assert held_at == {"hopper.fp8_efficiency_ratio": TRAINING_PRIORS["fp8_efficiency_ratio"][0]}
    assert "hopper.fp8_efficiency_ratio" in bridge.note and "expert_gemm_s" not in bridge.note
    assert efficiency_table()["hopper"].fp8_efficiency_ratio != TRAINING_PRIORS["fp8_efficiency_ratio"][0]
    # With nothing refitted, only the priors move Megatron-Bridge's predictions.
    held = [c for c in result.cases if c.source == bridge.source]
    assert len(held) == 2 and all(c.held_out is not None and c.held_out != c.shipped for c in held)
    assert {c.id for c in result.cases} == {r["id"] for r in rows}
    for row in result.sources:  # the other sources never see the MoE constant move
        if row.source != bridge.source:
            assert row.held_at_prior == ()


def test_the_folds_fit_only_what_the_shipped_fit_uses_and_a_users_own_cases(tmp_path: Path, catalog: Catalog) -> None:
    shipped = fitted_case_ids(read_manifest(SPECS["training"]))
    assert shipped is not None
    fitted = _rows("training.jsonl", 2, lambda c: c.id.startswith("mcore080") and c.id in shipped)
    # the model zoo's long-context H100 runs: packaged in the project's file, left out of every fit
    left = _rows("training.jsonl", 2, lambda c: c.id.startswith("mzoo_qwen3") and c.id not in shipped, project_dir())
    assert len(fitted) == len(left) == 2
    own = [dict(row, id=f"mine{i}") for i, row in enumerate(left)]  # the same runs, as a user's cases
    for rows, wanted in ((fitted + left, (2, 0)), (fitted + own, (2, 2))):
        path = write_jsonl(tmp_path / "t.jsonl", rows)
        result = cross_validate([("t.jsonl", path)], catalog, max_iterations=0)
        assert tuple(r.fitted_cases for r in result.sources) == wanted


def test_cases_that_cannot_be_predicted_are_listed_with_their_reason(tmp_path: Path, catalog: Catalog) -> None:
    rows = _rows("training.jsonl", 2, lambda c: c.id.startswith("mcore080"))
    refused = dict(rows[0], id="refused", parallel=dict(rows[0]["parallel"], tp=3))
    path = write_jsonl(tmp_path / "t.jsonl", [*rows, refused])
    result = cross_validate([("t.jsonl", path)], catalog, max_iterations=0)
    (row,) = result.sources
    assert [i for i, _ in row.skipped] == ["refused"] and "1 case(s) skipped" in row.note
    assert row.to_json()["skipped"][0]["reason"]


def test_files_of_kinds_without_fitted_constants_have_no_rows(catalog: Catalog) -> None:
    result = cross_validate([("memory.jsonl", bundled_dir() / "memory.jsonl")], catalog, max_iterations=0)
    assert result.sources == [] and result.profiles == []


# the command


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> typer.Typer:
    monkeypatch.delenv("CLUSTERSIM_CATALOG", raising=False)
    app = typer.Typer()
    app.command("validate")(validate_command)
    return app


def test_cli_json_has_the_cross_validation_list(cli: typer.Typer, collectives: Path) -> None:
    result = CliRunner().invoke(cli, [str(collectives), "--cross-validate", "--max-iterations", "1", "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    rows = payload["cross_validation"]
    assert [r["source"] for r in rows] == [s["source"] for s in payload["sources"]]
    assert all({"file", "source", "cases", "in_sample_mape", "held_out_mape"} <= set(r) for r in rows)
    assert all(r["file"] == str(collectives) for r in rows)
    assert {p["constant"] for p in payload["profiles"]} >= {"network_efficiency"}
    assert all(s["fit"] in ("in-sample", "held-out", "no manifest") or s["fit"].startswith("in-sample ")
               for s in payload["sources"])  # fmt: skip


def test_cli_tables(cli: typer.Typer, collectives: Path) -> None:
    result = CliRunner().invoke(
        cli, [str(collectives), "--cross-validate", "--max-iterations", "1"], env={"COLUMNS": "250"}
    )
    assert result.exit_code == 0, result.output
    for text in ("leave-one-source-out cross-validation", "in-sample", "left out", "profiles:", "fit"):
        assert text in result.output


def test_without_the_flag_nothing_is_refitted(cli: typer.Typer, collectives: Path, catalog: Catalog) -> None:
    payload = json.loads(CliRunner().invoke(cli, [str(collectives), "--json"]).stdout)
    assert "cross_validation" not in payload
    again = validate_cases([collectives], catalog).to_json()
    assert payload["cases"] == again["cases"] and payload["files"] == json.loads(json.dumps(again["files"]))


def test_max_iterations_must_not_be_negative(cli: typer.Typer, collectives: Path) -> None:
    result = CliRunner().invoke(cli, [str(collectives), "--cross-validate", "--max-iterations", "-1"])
    assert result.exit_code == 2


def test_files_of_one_kind_are_fitted_together(collectives: Path, tmp_path: Path, catalog: Catalog) -> None:
    rows = [json.loads(line) for line in collectives.read_text(encoding="utf-8").splitlines() if line.strip()]
    first = write_jsonl(tmp_path / "a.jsonl", [r for r in rows if "crazyguitar" in r["source"]])
    second = write_jsonl(tmp_path / "b.jsonl", [r for r in rows if "crazyguitar" not in r["source"]])
    progress: list[tuple[str, int, int]] = []
    split = cross_validate(
        [("a.jsonl", first), ("b.jsonl", second)], catalog, max_iterations=1, on_progress=lambda *a: progress.append(a)
    )
    whole = cross_validate([("c.jsonl", collectives)], catalog, max_iterations=1)
    assert progress[0][0] == "a.jsonl + b.jsonl: fitting every source" and progress[-1][1:] == (3, 3)
    assert [r.file for r in split.sources] == ["a.jsonl", "b.jsonl"]
    for one, other in zip(split.sources, whole.sources, strict=True):  # the same fit as one file of both
        assert (one.source, one.held_out_mape, one.in_sample_mape) == (
            other.source,
            other.held_out_mape,
            other.in_sample_mape,
        )
    assert {c.file for c in split.cases} == {"a.jsonl", "b.jsonl"}


def test_measured_latencies_are_held_out_beside_the_throughput(tmp_path: Path, catalog: Catalog) -> None:
    """A serving case's TTFT and TPOT are predicted with the constants fitted without its source, as its
    throughput is: the residuals of the latency intervals, and the latency table of --cross-validate."""
    shared = _rows("inference.jsonl", 4, lambda c: "inference_results_v4.0" in c.source)
    others = _rows("inference.jsonl", 4, lambda c: "TensorRT-LLM" in c.source)
    path = write_jsonl(tmp_path / "inference.jsonl", [*shared, *others])
    result = cross_validate([("i.jsonl", path)], catalog, max_iterations=1)
    latency = [c for c in result.cases if c.field in ("ttft_s", "tpot_s")]
    measured = {(row["id"], name) for row in shared for name in ("ttft_s", "tpot_s") if row["measured"].get(name)}
    assert measured and {(c.id, c.field) for c in latency} == measured
    assert all(c.held_out is not None and c.shipped is not None for c in latency)
    scored = validate_cases([path], catalog)
    shipped = {(s.id, s.field): s.predicted for s in scored.field_cases}
    assert all(c.shipped == pytest.approx(shipped[(c.id, c.field)], rel=1e-9) for c in latency)
    rows = {(r.field, r.source): r for r in result.latency_sources()}
    assert set(rows) == {(name, "mlcommons/inference_results_v4.0") for _, name in measured}
    for (name, _), row in rows.items():
        own = [c for c in latency if c.field == name]
        assert row.cases == len(own)
        assert row.held_out_mape == pytest.approx(sum(abs(c.held_out / c.measured - 1) for c in own) / len(own))


def test_a_held_out_fit_keeps_the_start_that_ends_lower(catalog: Catalog) -> None:
    """A fold's search runs from the shipped constants and from the middle of the bounds, and keeps the lower end:
    from a shipped Hopper gemm_max at its bound 0.95, one sweep ends higher than one from the middle of every
    constant's bounds, so the middle's fit is the one kept."""
    spec = SPECS["training"]
    rows = _rows("training.jsonl", 9, lambda c: c.id.startswith("mcore080"))
    cases = [Case.model_validate(r) for r in rows]
    table = efficiency_table(use_env=False)
    prepared, skipped = prepare_cases(spec, cases, catalog, table)
    assert len(prepared) == 9 and not skipped
    (group,) = {p.group for p in prepared}
    constants = [c for c in spec.constants(table, group, prepared) if c.key not in ("gemm_half_flop", "expert_gemm_s")]
    gemm = next(c for c in constants if c.key == "gemm_max")
    shipped = spec.replace(table, {gemm: gemm.high})
    kept = {(group, "gemm_half_flop"), (group, "expert_gemm_s")}
    from_shipped = fit(spec, prepared, shipped, priors=kept, max_iterations=1)
    picked = _best_of_two_starts(spec, prepared, shipped, constants, kept, 1, {group})
    middle = spec.replace(shipped, {c: (c.low * c.high) ** 0.5 for c in constants})
    from_middle = fit(spec, prepared, middle, priors=kept, max_iterations=1)
    assert from_middle.groups[0].residual < from_shipped.groups[0].residual  # the premise: the middle ends lower
    assert loss(spec.loss, prepared, picked) == pytest.approx(from_middle.groups[0].residual, rel=1e-12)
    assert spec.get(picked, gemm) == spec.get(from_middle.calibration, gemm) != spec.get(from_shipped.calibration, gemm)
    # with no search, nothing moves: the shipped start is the answer
    assert _best_of_two_starts(spec, prepared, shipped, constants, kept, 0, {group}) == shipped
