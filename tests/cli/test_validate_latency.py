"""``validate --latency simulated``: an MLPerf-style server case's TTFT and TPOT predicted through the request
simulator (``validation.serving_latency``), its throughput scored as before; a bad value is refused."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.validation.cases import bundled_dir

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
CASE = "mlperf40_llama2-70b_dgx-h100_8xh100_server"


def _fields(path: Path, *extra: str) -> dict[str, float]:
    result = runner.invoke(app, ["validate", str(path), "--json", *extra], env=ENV)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    (case,) = report["cases"]
    latency = {row["field"]: row["predicted"] for row in report["field_cases"] if row["id"] == CASE}
    return {"output_tokens_per_s": case["predicted"], **latency}


def test_simulated_latencies_replace_the_closed_forms_and_leave_throughput(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    rows = (bundled_dir() / "inference.jsonl").read_text().splitlines()
    path.write_text(next(r for r in rows if f'"{CASE}"' in r) + "\n")
    closed, simulated = _fields(path), _fields(path, "--latency", "simulated")
    assert simulated["output_tokens_per_s"] == closed["output_tokens_per_s"]
    assert {"ttft_s", "tpot_s"} <= closed.keys() == simulated.keys()
    assert simulated["tpot_s"] != closed["tpot_s"] and simulated["ttft_s"] != closed["ttft_s"]


def test_an_unknown_latency_predictor_is_refused() -> None:
    result = runner.invoke(app, ["validate", "--latency", "queue"], env=ENV)
    assert result.exit_code != 0 and "--latency: 'queue' is not closed or simulated" in result.output


def test_workers_without_the_simulated_latency_are_refused() -> None:
    """--workers runs the simulated searches: with the closed forms it would do nothing, so it is refused."""
    result = runner.invoke(app, ["validate", "--workers", "2"], env=ENV)
    assert result.exit_code != 0
    assert "--workers: runs the simulated server latencies' searches; give it with --latency simulated" in result.output
