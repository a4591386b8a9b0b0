"""``train --network sim``: the step's groups simulated where the job sits on the fabric, what that place
costs against a packed, sprayed, non-blocking one fed into the step (issue 23 item 2)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.system import system_for_instance
from clustersim.training.contention import Contention, default_routing

runner = CliRunner()
DP_HEAVY = ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1",
            "--zero", "1", "--global-batch", "128", "--json"]  # fmt: skip


def _run(*extra: str) -> dict:
    result = runner.invoke(app, [*DP_HEAVY, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_packed_sprayed_and_non_blocking_is_the_analytic_answer_exactly():
    analytic, sim = _run(), _run("--network", "sim")
    assert sim["network_model"] == "sim" and "network" not in analytic
    assert sim["step_s"] == analytic["step_s"]
    net = sim["network"]
    assert (net["placement"], net["routing"], net["oversubscription"]) == ("packed", "spray", 1.0)
    assert set(net["factors"]) == {"tp", "dp reduce-scatter", "dp all-gather"}
    assert all(f == pytest.approx(1.0) for f in net["factors"].values()) and net["added_fraction"] == 0.0


def test_random_hosts_hashed_onto_a_two_to_one_spine_slow_the_data_parallel_step():
    """16 p5 at random on the cluster, ECMP, 2:1: the DP collectives cross the spines, whose hash
    collisions and halved uplinks about double them; TP stays inside the NVLink domain. The step grows
    by the exposed part of DP only, so by less than DP's factor."""
    analytic = _run()
    sim = _run("--network", "sim", "--placement", "random", "--routing", "ecmp", "--oversubscription", "2")
    factors = sim["network"]["factors"]
    assert factors["tp"] == pytest.approx(1.0)
    assert factors["dp reduce-scatter"] > 1.5 and factors["dp all-gather"] > 1.5
    assert sim["step_s"] > analytic["step_s"] * 1.02
    assert sim["step_s"] < analytic["step_s"] * factors["dp reduce-scatter"]
    assert sim["network"]["analytic_step_s"] == analytic["step_s"]
    assert sim["network"]["added_fraction"] == pytest.approx(sim["step_s"] / analytic["step_s"] - 1)


def test_the_text_output_says_which_network_model_ran_and_what_contention_cost():
    result = runner.invoke(app, [*DP_HEAVY[:-1], "--network", "sim", "--placement", "spread", "--routing", "ecmp"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert (
        "network: the flow simulator ran the step's groups on the fabric (spread placement, median of seeds 0-4, ecmp"
        in flat
    )
    assert "contention adds" in flat and "dp reduce-scatter x" in flat


def test_fabric_options_need_the_simulator_and_bad_values_are_refused_by_name():
    result = runner.invoke(app, [*DP_HEAVY, "--placement", "random"])
    assert result.exit_code == 2 and "need --network sim" in result.output
    result = runner.invoke(app, [*DP_HEAVY, "--network", "sim", "--placement", "scattered"])
    assert result.exit_code == 2 and "scattered" in result.output
    result = runner.invoke(app, [*DP_HEAVY, "--network", "sim", "--routing", "flood"])
    assert result.exit_code == 2 and "flood" in result.output
    result = runner.invoke(app, [*DP_HEAVY, "--network", "sim", "--oversubscription", "0.5"])
    assert result.exit_code == 2 and "--oversubscription" in result.output


def test_efa_sprays_and_infiniband_hashes_by_default():
    catalog = load_catalog(use_env=False)
    assert default_routing(system_for_instance(catalog, "p5.48xlarge", 2)) == "spray"
    assert default_routing(system_for_instance(catalog, "dgx-h100", 2)) == "ecmp"


def test_the_contention_line_reports_the_growth_of_the_step():
    found = Contention("random", "ecmp", 2.0, 3, {"dp": 2.5}, 10.0, 11.0)
    assert found.added_fraction == pytest.approx(0.1)
    assert "contention adds 10.0% to the step (10 s analytic -> 11 s; dp x2.50)" in found.describe()
    assert found.to_dict()["factors"] == {"dp": 2.5}


def test_a_drawn_answer_is_the_median_over_seeds_with_its_range_and_a_fixed_one_runs_once():
    packed = _run("--network", "sim")["network"]
    assert packed["seeds"] == [0] and packed["spread"] is None  # packed and sprayed: no seed draws anything
    drawn = _run("--network", "sim", "--placement", "random", "--routing", "ecmp", "--fabric-seed", "3")["network"]
    assert drawn["seeds"] == [3, 4, 5, 6, 7]
    for kind, factor in drawn["factors"].items():
        low, high = drawn["spread"][kind]["min"], drawn["spread"][kind]["max"]
        assert low <= factor <= high
    two = _run("--network", "sim", "--placement", "random", "--fabric-seeds", "2")["network"]
    assert two["seeds"] == [0, 1]
    result = runner.invoke(app, [*DP_HEAVY, "--fabric-seeds", "2"])
    assert result.exit_code == 2 and "need --network sim" in result.output
