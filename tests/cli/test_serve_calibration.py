"""``serve --calibration``: the collective calibration overlay prices a tensor-parallel deployment's all-reduces
in the closed form and in the request simulator (issue 27 item 2); a scenario file cannot carry it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_COLLECTIVE_CALIBRATION": "", "COLUMNS": "200"}
SERVE = ["serve", "llama3.1-70b", "--instance", "p5.48xlarge", "--tp", "8", "--input", "512", "--output", "128"]


@pytest.fixture
def slow(tmp_path: Path) -> Path:
    """NVLink (and NVLink SHARP, which 8-GPU H100 all-reduces use) at a fraction of the packaged efficiency."""
    path = tmp_path / "slow.toml"
    path.write_text(
        '[nvlink_efficiency]\nvalue = 0.15\nsource = "a slower NVLink than the packaged fit"\n'
        '[nvls_efficiency]\nvalue = 0.15\nsource = "a slower NVLink SHARP than the packaged fit"\n'
    )
    return path


def _json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_slower_scaleup_overlay_lowers_tensor_parallel_throughput(slow: Path) -> None:
    plain, slowed = _json(*SERVE), _json(*SERVE, "--calibration", str(slow))
    assert slowed["output_tokens_per_s"] < plain["output_tokens_per_s"] * 0.98
    # one device: no collective, nothing for the overlay to price
    one = ["serve", "llama3.1-8b", "--instance", "p5.48xlarge", "--tp", "1", "--input", "512", "--output", "128"]
    assert _json(*one, "--calibration", str(slow))["output_tokens_per_s"] == _json(*one)["output_tokens_per_s"]


def test_the_overlay_reaches_the_request_simulator(slow: Path) -> None:
    sim = [*SERVE, "--concurrency", "8", "--requests", "64"]
    plain, slowed = _json(*sim), _json(*sim, "--calibration", str(slow))
    assert slowed["tpot_s"]["mean"] > plain["tpot_s"]["mean"] * 1.02


def test_calibration_is_refused_with_save_scenario_and_a_missing_file_is_named(slow: Path, tmp_path: Path) -> None:
    saved = runner.invoke(app, [*SERVE, "--calibration", str(slow), "--save-scenario", str(tmp_path / "s.toml")])
    assert saved.exit_code != 0 and "--calibration is not part of a scenario file" in saved.output
    assert not (tmp_path / "s.toml").exists()
    missing = runner.invoke(app, [*SERVE, "--calibration", str(tmp_path / "nope.toml")], env=ENV)
    assert missing.exit_code != 0 and "--calibration: no such file" in missing.output
