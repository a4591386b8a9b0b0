"""``report --scenario FILE --network sim --background SHARE[:PATTERN]``: the fabric view runs with the other
tenants' traffic that ``train --network sim --background`` and ``fabric step --background`` take (one option
declaration, ``cli.train_inputs.BackgroundOpt``), and says so; refused where it cannot apply, as train refuses it.

The fabric is held to 48 hosts (32 of tenants) and two seeds to keep the runs short."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from tests.report.conftest import ENV, embedded, invoke

JOB = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1", "--zero", "1",
       "--global-batch", "128"]  # fmt: skip
THIN = ["--placement", "random", "--routing", "ecmp", "--oversubscription", "2", "--fabric-hosts", "48"]


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("background") / "job.toml"
    invoke("train", *JOB, "--tokens", "1T", "--save-scenario", str(path))
    return path


def _report(scenario: Path, *extra: str) -> dict:
    out = scenario.with_name(f"r{abs(hash(extra))}.html")
    invoke("report", "--scenario", str(scenario), "--network", "sim", *THIN, "--fabric-seeds", "2", *extra, "-o",
           str(out))  # fmt: skip
    return embedded(out)


def test_the_fabric_view_runs_with_the_background_as_fabric_step_does(scenario: Path):
    loaded, plain = _report(scenario, "--background", "0.6"), _report(scenario)
    fabric = loaded["cli"]["fabric"]
    step = json.loads(invoke("fabric", "step", *JOB, *THIN, "--seed", "0", "--background", "0.6", "--json"))
    for key in ("collectives", "together", "fabric", "routing", "links"):
        assert fabric[key] == step[key], key
    assert (fabric["background"]["share"], fabric["background"]["pattern"], fabric["background"]["hosts"]) == (
        0.6, "permutation", step["background"]["hosts"],
    )  # fmt: skip
    # the page's train JSON is train's with the same options, and the view carries its factors
    network = loaded["cli"]["train"]["network"]
    assert fabric["factors"] == network["factors"] and fabric["background"] == network["background"]
    # the tenants hash onto the thin spine the DP rings cross: slower than the same fabric without them
    dp = "dp reduce-scatter"
    times = {c["kind"]: c["time_s"] for c in fabric["collectives"]}
    unloaded = {c["kind"]: c["time_s"] for c in plain["cli"]["fabric"]["collectives"]}
    assert times[dp] > 1.2 * unloaded[dp] and times["tp"] == pytest.approx(unloaded["tp"])
    assert fabric["background"]["factors_without"] == plain["cli"]["fabric"]["factors"]
    assert plain["cli"]["fabric"]["background"] is None
    notes = " ".join(next(s for s in loaded["sections"] if s["id"] == "fabric-tiers")["notes"])
    assert "background: 0.6 of the other hosts' NICs busy (permutation), 32 hosts, in every run above" in notes
    assert f"{dp} x{fabric['background']['factors_without'][dp]:.2f}" in notes
    plain_notes = " ".join(next(s for s in plain["sections"] if s["id"] == "fabric-tiers")["notes"])
    assert "background" not in plain_notes


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--background", "0.5"], "--background 0.5: other tenants' traffic runs on the simulated fabric; it needs "
         "--network sim"),
        (["--network", "sim", "--background", "1.5"], "share '1.5' must be a number from 0 to 0.99"),
        (["--network", "sim", "--fabric-hosts", "16", "--background", "0.5"],
         "the fabric's 16 hosts are all the job's"),
    ],
)  # fmt: skip
def test_a_background_that_cannot_apply_is_refused_in_one_line(scenario: Path, args: list[str], said: str):
    out = scenario.with_name("refused.html")
    result = CliRunner().invoke(app, ["report", "--scenario", str(scenario), *args, "-o", str(out)], env=ENV)
    assert result.exit_code == 2, result.output
    assert said in " ".join(result.output.split()) and not out.exists()


def test_a_background_needs_a_scenario(tmp_path: Path):
    out = tmp_path / "r.html"
    result = CliRunner().invoke(
        app, ["report", "--validate", "--network", "sim", "--background", "0.5", "-o", str(out)], env=ENV
    )
    assert result.exit_code == 2 and "they need --scenario, not --validate" in result.output
    assert not out.exists()
