"""``train --calibration FILE``: the collective calibration overlay ``clustersim calibrate`` writes, read by
the training estimate for the command's duration (issue 27 item 2)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
DP_HEAVY = ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1",
            "--zero", "1", "--global-batch", "128", "--json"]  # fmt: skip


def _run(*extra: str) -> dict:
    result = runner.invoke(app, [*DP_HEAVY, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_collective_calibration_overlay_prices_trains_collectives_and_is_refused_in_a_scenario_file(tmp_path):
    """``train --calibration FILE`` reads the collective calibration overlay ``clustersim calibrate`` writes:
    a network that achieves 0.4 of line rate slows the data-parallel step; a scenario file cannot carry it."""
    overlay = tmp_path / "slow.toml"
    overlay.write_text('[network_efficiency]\nvalue = 0.4\nsource = "a slower network than the packaged fit"\n')
    plain, slow = _run(), _run("--calibration", str(overlay))
    assert slow["step_s"] > plain["step_s"] * 1.05
    assert _run()["step_s"] == plain["step_s"]  # the overlay lasts for its command only
    saved = runner.invoke(app, [*DP_HEAVY, "--calibration", str(overlay), "--save-scenario", str(tmp_path / "s.toml")])
    assert saved.exit_code == 2 and "--calibration is not part of a scenario file" in saved.output
    assert not (tmp_path / "s.toml").exists()
    missing = runner.invoke(app, [*DP_HEAVY, "--calibration", str(tmp_path / "none.toml")])
    assert missing.exit_code == 2 and "no such file" in missing.output
