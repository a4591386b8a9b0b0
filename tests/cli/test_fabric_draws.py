"""A seeded fabric answer (ECMP's or flowlets' hash, a random placement, failures) is never shown as the
answer: one seed is called one draw, in text and JSON, and --seeds N gives the median with min-max."""

import json

from typer.testing import CliRunner

from clustersim.cli.app import app

ENV = {"CLUSTERSIM_CATALOG": ""}
SMALL = ["--instance", "p5.48xlarge", "--nodes", "8", "--fabric-hosts", "64", "--size", "16M"]


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, ["fabric", *args], env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_compare_with_one_seed_says_it_is_one_draw():
    text = _run("compare", *SMALL, "--collective", "alltoall", "--seed", "4")
    assert "one draw (seed 4) of the ECMP hash, the flowlet hash" in text and "--seeds N" in text
    out = json.loads(_run("compare", *SMALL, "--collective", "alltoall", "--seed", "4", "--json"))
    assert out["one_draw"] is True and out["seeds"] == [4] and "the ECMP hash" in out["seeded"]


def test_compare_over_seeds_shows_the_median_and_the_spread():
    args = ["compare", *SMALL, "--collective", "alltoall", "--placement", "random", "--seeds", "3"]
    out = json.loads(_run(*args, "--json"))
    assert out["one_draw"] is False and out["seeds"] == [0, 1, 2]
    ecmp = next(row for row in out["rows"] if row["routing"] == "ecmp")
    assert ecmp["time_min_s"] < ecmp["time_max_s"] and ecmp["time_min_s"] <= ecmp["time_s"] <= ecmp["time_max_s"]
    text = _run(*args)
    assert "the median of seeds 0-2, (min-max) beside it" in text
    assert f"({ecmp['time_min_s'] * 1e3:.3f}-{ecmp['time_max_s'] * 1e3:.3f})" in text


def test_a_run_no_seed_draws_says_nothing_of_draws():
    text = _run("simulate", *SMALL, "--routing", "spray")
    assert "draw" not in text
    out = json.loads(_run("simulate", *SMALL, "--routing", "spray", "--json"))
    assert out["one_draw"] is False and out["seeded"] == []


def test_simulate_and_step_with_ecmp_say_one_draw():
    assert "one draw (seed 0) of the ECMP hash" in _run("simulate", *SMALL, "--routing", "ecmp")
    step = ["step", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "4", "--tp", "8", "--pp", "1"]
    out = json.loads(_run(*step, "--routing", "ecmp", "--placement", "random", "--json"))
    assert out["one_draw"] is True and out["seeded"] == ["the ECMP hash", "the random placement"]


def test_transport_with_loss_says_its_draws_and_without_says_nothing():
    args = ["transport", "compare", "--instance", "p5.48xlarge", "--message", "64K", "--messages", "20"]
    lossy = CliRunner().invoke(app, [*args, "--loss", "1%", "--seed", "3", "--seeds", "1"], env=ENV)
    assert lossy.exit_code == 0 and "one draw (seed 3) of the losses" in lossy.stdout
    several = CliRunner().invoke(app, [*args, "--loss", "1%", "--seed", "3", "--seeds", "2"], env=ENV)
    assert several.exit_code == 0 and "the median of seeds 3-4" in several.stdout, several.output
    clean = CliRunner().invoke(app, [*args, "--json"], env=ENV)
    assert clean.exit_code == 0 and json.loads(clean.stdout)["one_draw"] is False


def test_a_random_permutation_says_it_is_one_draw():
    text = _run("pattern", "--nodes", "4", "--pattern", "permutation", "--size", "1M")
    assert "one draw (seed 0) of the permutation" in text
    assert "draw" not in _run("pattern", "--nodes", "4", "--pattern", "shift", "--size", "1M")


def test_transport_sweep_and_ring_with_loss_say_one_draw():
    sweep = ["transport", "sweep", "--over", "loss", "--values", "0,1%", "--messages", "20", "--message", "64K"]
    for args in (sweep, ["transport", "ring", "--buffer", "1M"]):
        result = CliRunner().invoke(app, [*args, "--seeds", "1"], env=ENV)
        assert result.exit_code == 0 and "one draw (seed 1) of the losses" in result.stdout, result.output
