"""``clustersim fabric pattern``: JSON keys and figures, flags honoured, errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
BASE = ["fabric", "pattern", "--nodes", "4", "--fabric-hosts", "64", "--size", "64M"]
GPU_RAILS = 4 * 100e9 / 8  # a p5 GPU's 4 EFA rails of 100 Gb/s, bytes/s
MIB64 = 64 * 2**20


def _json(*args: str) -> dict:
    result = runner.invoke(app, [*BASE, *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_carries_times_bound_slowdown_throughput_and_links():
    out = _json("--pattern", "incast", "--senders", "3", "--routing", "ecmp")
    keys = ("time_s", "p50_s", "p99_s", "ideal_s", "slowdown", "throughput_bytes_per_s", "max_link_utilization")
    assert all(isinstance(out[k], float) for k in keys)
    assert out["routing"] == "ecmp" and out["pattern"] == "incast" and out["num_flows"] == 3
    assert out["time_s"] == pytest.approx(3 * MIB64 / GPU_RAILS, rel=1e-9)  # 3 senders on the receiver's rails
    assert out["slowdown"] == pytest.approx(1, rel=1e-9) and out["binding_tier"] == "leaf->nic"
    assert out["hottest_links"][0]["link"].startswith("leaf ") and out["fabric"]["hosts"] == 64


def test_the_flags_are_honoured_and_the_same_seed_repeats():
    args = ("--pattern", "permutation", "--routing", "ecmp", "--oversubscription", "2", "--placement", "random")
    first = _json(*args, "--seed", "3", "--fail-links", "2")
    assert first == _json(*args, "--seed", "3", "--fail-links", "2")
    assert first["placement"] == "random" and first["failed_links"] == 2 and first["seed"] == 3
    assert first["fabric"]["oversubscription"] == 2 and first["fabric"]["links_down"] == 4  # 2 cables, both ways
    shifted = _json("--pattern", "shift", "--shift", "2", "--fail-leaves", "1", "--fail-switches", "1")
    assert shifted["description"].startswith("shift by 2 hosts") and shifted["num_flows"] == 32
    assert shifted["failed_leaves"] == 1 and shifted["failed_switches"] == 1 and shifted["slowdown"] >= 1 - 1e-9
    assert shifted["fabric"]["links_down"] > 0
    everyone = _json("--pattern", "all_to_all")
    assert everyone["num_flows"] == 32 * 31 and everyone["slowdown"] >= 1 - 1e-9


def test_the_table_and_the_plot(tmp_path: Path):
    shown = runner.invoke(app, [*BASE, "--pattern", "shift"])
    assert shown.exit_code == 0, shown.output
    assert "non-blocking bound" in shown.output and "slowdown" in shown.output and "hottest links" in shown.output
    png = tmp_path / "pattern.png"
    drawn = runner.invoke(app, [*BASE, "--pattern", "incast", "--plot", str(png), "--json"])
    assert drawn.exit_code == 0, drawn.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--pattern", "ring"], ["unknown pattern", "all_to_all, incast, permutation, shift"]),
        (["--pattern", "incast", "--senders", "32"], ["senders must be between 1 and 31", "got 32"]),
        (["--pattern", "shift", "--shift", "0"], ["shift must be between 1 and 3", "got 0"]),
        (["--pattern", "permutation", "--senders", "2"], ["senders applies to the incast pattern only"]),
        (["--pattern", "incast", "--shift", "2"], ["shift applies to the shift pattern only"]),
        (["--routing", "rip"], ["unknown routing"]),
    ],
)
def test_bad_input_is_one_line_naming_what_is_valid(args: list[str], words: list[str]):
    result = runner.invoke(app, [*BASE, *args])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert all(w in result.output for w in words), result.output
    as_json = runner.invoke(app, [*BASE, *args, "--json"])
    assert as_json.exit_code == 2 and json.loads(as_json.stderr)["error"]
