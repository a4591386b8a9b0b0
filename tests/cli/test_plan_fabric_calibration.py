"""``plan --calibration`` and ``fabric simulate/compare/step --calibration``: the collective calibration
overlay ``clustersim calibrate`` writes prices their collectives for the command (issue 27 item 2), the
JSON names it, and ``--ideal`` (datasheet links, which no calibration touches) refuses it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_COLLECTIVE_CALIBRATION": "", "COLUMNS": "200"}
FABRIC = ["--nodes", "4", "--fabric-hosts", "64", "--size", "256M", "--max-steps", "2"]
STEP = ["step", "llama3-8b", "--nodes", "4", "--fabric-hosts", "64", "--global-batch", "64", "--tp", "8", "--pp", "1"]
PLAN = ["plan", "llama3-8b", "--tokens", "100B", "--instances", "p5.48xlarge", "--nodes", "16", "--global-batch",
        "128", "--seq", "1024", "--top", "1"]  # fmt: skip


@pytest.fixture
def slow(tmp_path: Path) -> Path:
    """An overlay of a network that reaches 0.4 of line rate (the packaged value is 0.97)."""
    path = tmp_path / "slow.toml"
    path.write_text('[network_efficiency]\nvalue = 0.4\nsource = "a slower network than the packaged fit"\n')
    return path


def _json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_slower_network_overlay_makes_a_plan_slower_and_the_json_names_it(slow: Path) -> None:
    plain, slowed = _json(*PLAN), _json(*PLAN, "--calibration", str(slow))
    assert plain["calibration"] == [] and slowed["calibration"] == [str(slow)]
    assert slowed["top"][0]["step_s"] > plain["top"][0]["step_s"] * 1.02
    text = runner.invoke(app, [*PLAN, "--calibration", str(slow)], env=ENV)
    assert text.exit_code == 0 and f"with {slow} over it" in " ".join(text.output.split())


@pytest.mark.parametrize("command", ["simulate", "compare"])
def test_a_slower_network_overlay_lengthens_fabric_simulate_and_compare(slow: Path, command: str) -> None:
    args = [command, *FABRIC, "--algo", "ring"]
    plain, slowed = _json("fabric", *args), _json("fabric", *args, "--calibration", str(slow))
    assert plain["calibration"] == [] and slowed["calibration"] == [str(slow)]
    if command == "simulate":
        assert slowed["time_s"] > plain["time_s"] * 1.5  # 0.97 -> 0.4 of line rate on a network-bound ring
    else:
        for before, after in zip(plain["rows"], slowed["rows"], strict=True):
            if before["model"] == "analytic, ideal links":
                assert after["time_s"] == before["time_s"]  # the link bound is the datasheet's
            else:
                assert after["time_s"] > before["time_s"] * 1.5, before["model"]


def test_a_slower_network_overlay_lengthens_fabric_steps_data_parallel_groups(slow: Path) -> None:
    plain, slowed = _json("fabric", *STEP), _json("fabric", *STEP, "--calibration", str(slow))
    assert slowed["calibration"] == [str(slow)]
    kinds = {c["kind"]: c for c in plain["collectives"]}
    after = {c["kind"]: c for c in slowed["collectives"]}
    dp = [kind for kind in kinds if kind.startswith("dp")]
    assert dp and all(after[k]["time_s"] > kinds[k]["time_s"] * 1.5 for k in dp)
    assert after["tp"]["time_s"] == pytest.approx(kinds["tp"]["time_s"])  # TP stays on NVLink


@pytest.mark.parametrize("args", [["simulate", *FABRIC], ["compare", *FABRIC], STEP])
def test_ideal_links_refuse_a_calibration_in_one_line(slow: Path, args: list[str]) -> None:
    result = runner.invoke(app, ["fabric", *args, "--ideal", "--calibration", str(slow)], env=ENV)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "--ideal" in line and "--calibration" in line


def test_a_missing_overlay_is_refused_naming_it(tmp_path: Path) -> None:
    result = runner.invoke(app, [*PLAN, "--calibration", str(tmp_path / "none.toml")], env=ENV)
    assert result.exit_code == 2 and "no such file" in result.output
