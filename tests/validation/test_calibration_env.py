"""`validate` scores with the user's calibration files when the environment names them."""

from __future__ import annotations

from clustersim.catalog.registry import load_catalog
from clustersim.network.analytic import ENV_VAR as COLLECTIVE_ENV
from clustersim.serving.engine import ENV_VAR as SERVING_ENV
from clustersim.validation.cases import bundled_case_files, read_cases
from clustersim.validation.collective import predict_collective_case
from clustersim.validation.inference import predict_inference_case

CATALOG = load_catalog(use_env=False)


def _first(kind_file: str, test) -> object:
    path = next(p for p in bundled_case_files() if p.name == kind_file)
    return next(case for case in read_cases(path) if test(case))


def test_a_lower_network_efficiency_in_the_environment_lowers_predicted_busbw(tmp_path, monkeypatch):
    case = _first("collectives.jsonl", lambda c: (c.system.nodes or 1) > 1 and (c.size_bytes or 0) >= 2**30)
    before = predict_collective_case(case, "busbw_GBps", CATALOG)
    overlay = tmp_path / "ours.toml"
    overlay.write_text('[network_efficiency]\nvalue = 0.5\nsource = "our cluster"\n', encoding="utf-8")
    monkeypatch.setenv(COLLECTIVE_ENV, str(overlay))
    after = predict_collective_case(case, "busbw_GBps", CATALOG)
    assert after < 0.9 * before


def test_a_slower_step_overhead_in_the_environment_lowers_predicted_throughput(tmp_path, monkeypatch):
    case = _first("inference.jsonl", lambda c: c.workload is not None and c.workload.scenario == "offline")
    before = predict_inference_case(case, "output_tokens_per_s", CATALOG)
    overlay = tmp_path / "ours.toml"
    overlay.write_text('[step_overhead_s]\nvalue = 0.05\nsource = "our engine"\n', encoding="utf-8")
    monkeypatch.setenv(SERVING_ENV, str(overlay))
    assert predict_inference_case(case, "output_tokens_per_s", CATALOG) < before


def test_a_negative_minimum_size_is_refused():
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    result = CliRunner().invoke(app, ["validate", "--min-size", "-5"])
    assert result.exit_code == 2 and "--min-size" in result.output and "negative" in result.output
