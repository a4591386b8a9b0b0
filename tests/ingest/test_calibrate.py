"""calibrate on one cluster's nccl-tests output: fitted on part of it, the error falls on the rest;
the overlay it writes is what --calibration and the environment variable read."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.cli.calibrate import COLLECTIVE_ENV_VAR
from clustersim.ingest import SystemOptions, ingest_files, write_cases
from clustersim.network import analytic
from clustersim.network.analytic import collective_calibration
from clustersim.validation.cases import as_case
from clustersim.validation.collective import predict_collective_case
from clustersim.validation.user_calibration import calibrate_user, shipped_calibration, write_overlay

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
A3MEGA = DATA / "a3mega_2nodes_all_reduce.log"
CATALOG = load_catalog(use_env=False)
runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", COLLECTIVE_ENV_VAR: "", "COLUMNS": "200"}


def _a3mega_split() -> tuple[list, list]:
    """The 1 MiB-8 GiB rows of the 2-node A3 Mega run: every other size to fit, the rest held out."""
    cases = [as_case(c, "collective") for c in ingest_files([A3MEGA], SystemOptions(inter_node_gbps=1600), CATALOG)]
    large = [c for c in cases if (c.size_bytes or 0) >= 2**20]
    return large[::2], large[1::2]


def _mape(cases, cal) -> float:
    return sum(
        abs(predict_collective_case(c, "busbw_GBps", CATALOG, cal) / c.measured["busbw_GBps"] - 1) for c in cases
    ) / len(cases)


def test_fitted_on_half_the_sizes_the_other_half_improves(tmp_path: Path):
    fit_on, held_out = _a3mega_split()
    result = calibrate_user(fit_on, CATALOG)
    shipped = shipped_calibration()
    before, after = _mape(held_out, shipped), _mape(held_out, result.fit.calibration)
    assert before > 0.5 and after < before / 4, (before, after)  # 70% -> about 11% on sizes it never saw
    assert result.after_mape < result.before_mape and result.left_out is None  # 7 cases: too few to fold
    moved = {c.name for c in result.fit.moved}
    assert moved and moved <= {"ramp_exponent", "ramp_bytes.reduce"}
    held = {h.name: h.why for h in result.fit.held}
    assert held["network_efficiency"] == "a stated prior of the packaged file"
    assert held["ramp_bytes.gather"] == held["ramp_node_exponent.reduce"] == "no case of yours depends on it"
    overlay = tmp_path / "mine.toml"
    write_overlay(result, ["a3.jsonl"], overlay)
    read = collective_calibration([overlay], use_env=False)
    assert read == result.fit.calibration and read.ramp_bytes.gather == shipped.ramp_bytes.gather
    assert COLLECTIVE_ENV_VAR == analytic.ENV_VAR


def test_the_command_line_round_trip(tmp_path: Path):
    fit_on, held_out = _a3mega_split()
    train, test = tmp_path / "fit.jsonl", tmp_path / "held.jsonl"
    write_cases([c.model_dump(exclude_none=True) for c in fit_on], train)
    write_cases([c.model_dump(exclude_none=True) for c in held_out], test)
    overlay = tmp_path / "cluster.toml"
    done = runner.invoke(app, ["calibrate", str(train), "-o", str(overlay), "--max-iterations", "20"], env=ENV)
    assert done.exit_code == 0, done.output
    before, after = map(float, re.search(r"in sample: ([\d.]+)% packaged -> ([\d.]+)% fitted", done.stdout).groups())
    assert after < before
    scores = []
    for extra in ([], ["--calibration", str(overlay)]):
        ran = runner.invoke(app, ["validate", str(test), "--json", *extra], env=ENV)
        assert ran.exit_code == 0, ran.output
        scores.append(json.loads(ran.stdout)["files"][0]["mape"])
    assert scores[1] < scores[0] / 4, scores
    plain = runner.invoke(app, ["collective", "all_reduce", "--min", "16M", "--max", "16M", "--json"], env=ENV)
    mine = runner.invoke(
        app,
        ["collective", "all_reduce", "--min", "16M", "--max", "16M", "--json", "--calibration", str(overlay)],
        env=ENV,
    )
    assert plain.exit_code == mine.exit_code == 0 and plain.stdout != mine.stdout


def test_a_bad_overlay_or_nothing_to_fit_is_one_line(tmp_path: Path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[ramp_bites]\nvalue = 1.0\nsource = "typo"\n')
    ran = runner.invoke(app, ["collective", "all_reduce", "--calibration", str(bad)], env=ENV)
    assert ran.exit_code == 2 and "bad.toml" in ran.output and "ramp_bytes" in ran.output
    missing = runner.invoke(app, ["validate", "--calibration", str(tmp_path / "none.toml")], env=ENV)
    assert missing.exit_code == 2 and "no such file" in missing.output
    small = tmp_path / "small.jsonl"
    cases = ingest_files([A3MEGA], SystemOptions(inter_node_gbps=1600), CATALOG)
    write_cases([c for c in cases if c["size_bytes"] < 2**20], small)
    ran = runner.invoke(app, ["calibrate", str(small), "-o", str(tmp_path / "x.toml")], env=ENV)
    assert ran.exit_code == 2 and "no collective case of at least 1 MiB" in ran.output
    assert not (tmp_path / "x.toml").exists()


def test_ingest_writes_nothing_when_a_file_is_bad(tmp_path: Path):
    target = tmp_path / "cases.jsonl"
    target.write_text("kept\n")
    cut = tmp_path / "all_reduce_cut.log"
    cut.write_text("\n".join(A3MEGA.read_text().splitlines()[:50]) + "\n")
    ran = runner.invoke(app, ["ingest", str(A3MEGA), str(cut), "--inter-node-gbps", "1600", "-o", str(target)], env=ENV)
    assert ran.exit_code == 2 and "all_reduce_cut.log, line 50" in ran.output
    assert target.read_text() == "kept\n" and sorted(p.name for p in tmp_path.iterdir()) == [
        "all_reduce_cut.log",
        "cases.jsonl",
    ]
    ok = runner.invoke(app, ["ingest", str(A3MEGA), "--inter-node-gbps", "1600", "-o", str(target)], env=ENV)
    assert ok.exit_code == 0 and "wrote 31 cases (all_reduce)" in ok.stdout
