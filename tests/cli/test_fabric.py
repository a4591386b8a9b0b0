"""``clustersim fabric simulate`` and ``compare``: JSON keys, flags honoured, errors as one line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
BASE = ["--nodes", "4", "--fabric-hosts", "64", "--size", "64M", "--max-steps", "2"]


def _json(*args: str) -> dict:
    result = runner.invoke(app, ["fabric", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_simulate_json_carries_time_busbw_utilization_and_routing():
    out = _json("simulate", *BASE, "--routing", "ecmp", "--algo", "ring", "--ideal")
    assert out["routing"] == "ecmp" and out["op"] == "all_reduce" and out["links"] == "ideal"
    assert abs(out["busbw_bytes_per_s"] / 400e9 - 1) < 1e-9  # 32 x 100 Gb/s at line rate
    assert out["time_s"] > 0 and 0 < out["max_link_utilization"] <= 1 + 1e-9
    assert out["fabric"]["hosts"] == 64


def test_without_algo_it_runs_what_nccls_tuner_picks_and_nvls_needs_nvlink_sharp():
    import numpy as np

    from clustersim.catalog.registry import load_catalog
    from clustersim.network.analytic import predict_collective
    from clustersim.network.collectives import Op
    from clustersim.network.topology import fabric_for_instance

    for instance, size in (("p5.48xlarge", "64M"), ("p5.48xlarge", "64K"), ("p4d.24xlarge", "64M")):
        out = _json("simulate", "--instance", instance, *BASE[:4], "--size", size, "--max-steps", "2")
        fabric = fabric_for_instance(load_catalog(), instance, 4)
        nbytes = 64 * 2**20 if size == "64M" else 64 * 2**10
        assert out["algorithm"] == predict_collective(Op.ALL_REDUCE, np.array([nbytes]), fabric).algorithm[0].value
    refused = runner.invoke(app, ["fabric", "simulate", "--instance", "p4d.24xlarge", *BASE, "--algo", "nvls"])
    assert refused.exit_code == 2 and "in-network reduction" in refused.output and "--algo" in refused.output


def test_the_flags_are_honoured_and_the_same_seed_repeats():
    args = ("simulate", *BASE, "--collective", "alltoall", "--routing", "ecmp", "--oversubscription", "2")
    spread = _json(*args, "--placement", "random", "--fail-links", "2", "--seed", "3")
    assert spread == _json(*args, "--placement", "random", "--fail-links", "2", "--seed", "3")
    assert spread["failed_links"] == 2 and spread["placement"] == "random"
    assert spread["fabric"]["oversubscription"] == 2


def test_compare_sets_ecmp_spray_and_the_analytic_model_side_by_side():
    out = _json("compare", *BASE, "--collective", "alltoall", "--ideal")
    rows = {row["model"]: row for row in out["rows"]}
    simulated = [f"simulated {r}" for r in ("ecmp", "spray", "flowlet", "adaptive")]
    # --ideal: every row is on the datasheet links; the analytic row is the link bound, no calibrated time
    assert list(rows) == [*simulated, "analytic, ideal links"] and out["links"] == "ideal"
    assert {row["links"] for row in out["rows"]} == {"ideal"}
    spray, ideal = rows["simulated spray"], rows["analytic, ideal links"]
    assert abs(spray["time_s"] / ideal["time_s"] - 1) < 0.05
    assert all(rows[name]["time_s"] >= spray["time_s"] * (1 - 1e-9) for name in simulated)  # spraying is best


def test_compare_on_calibrated_links_sets_the_calibrated_model_beside_them_and_the_link_bound_labelled():
    """Without --ideal the simulated rows run on the calibrated links, so the analytic model's calibrated time
    is their like; the link bound stays as the ceiling, labelled ideal. The table says the same."""
    out = _json("compare", *BASE, "--collective", "alltoall")
    rows = {row["model"]: row for row in out["rows"]}
    assert list(rows)[-2:] == ["analytic, ideal links", "analytic, calibrated"] and out["links"] == "calibrated"
    assert rows["analytic, ideal links"]["links"] == "ideal" and rows["analytic, calibrated"]["links"] == "calibrated"
    assert all(rows[f"simulated {r}"]["links"] == "calibrated" for r in ("ecmp", "spray", "flowlet", "adaptive"))
    assert rows["analytic, calibrated"]["time_s"] > rows["analytic, ideal links"]["time_s"]  # below line rate
    table = runner.invoke(app, ["fabric", "compare", *BASE, "--collective", "alltoall", "--ideal"]).stdout
    assert "analytic, ideal links" in table and "analytic, calibrated" not in table and "simulated on ideal" in table


def test_plot_writes_a_png(tmp_path: Path):
    target = tmp_path / "util.png"
    result = runner.invoke(app, ["fabric", "simulate", *BASE, "--plot", str(target)])
    assert result.exit_code == 0, result.output
    assert target.read_bytes()[:4] == b"\x89PNG"


def test_bad_input_is_one_line_naming_the_value():
    result = runner.invoke(app, ["fabric", "simulate", *BASE, "--routing", "flood"])
    assert result.exit_code == 2 and "flood" in result.output and "spray" in result.output
    result = runner.invoke(app, ["fabric", "simulate", *BASE, "--collective", "broadcast", "--json"])
    assert result.exit_code == 2 and "broadcast" in result.output


TRAIN = ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1"]


def test_train_network_sim_prices_the_collectives_with_the_simulator():
    analytic = json.loads(runner.invoke(app, [*TRAIN, "--json"]).stdout)
    result = runner.invoke(app, [*TRAIN, "--network", "sim", "--json"])
    assert result.exit_code == 0, result.output
    sim = json.loads(result.stdout)
    assert (analytic["network_model"], sim["network_model"]) == ("analytic", "sim")
    # Same compute; the simulator runs no NVLS, so its in-node all-reduce is no faster.
    assert sim["step_s"] >= analytic["step_s"] * (1 - 1e-9)


def test_train_network_refuses_an_unknown_model_and_a_scenario_it_cannot_hold(tmp_path: Path):
    result = runner.invoke(app, [*TRAIN, "--network", "packets"])
    assert result.exit_code == 2 and "packets" in result.output and "sim" in result.output
    result = runner.invoke(app, [*TRAIN, "--network", "sim", "--save-scenario", str(tmp_path / "s.toml")])
    assert result.exit_code == 2 and "--network sim" in result.output
    assert not (tmp_path / "s.toml").exists()


STEP = ["step", "llama3-8b", "--nodes", "4", "--fabric-hosts", "64", "--global-batch", "64"]


def test_step_json_carries_each_kinds_time_busbw_and_the_analytic_model():
    out = _json(*STEP, "--tp", "8", "--pp", "2", "--ideal")
    assert out["layout"]["tp"] == 8 and out["layout"]["dp"] == 2 and out["layout_chosen"] is False
    kinds = {c["kind"]: c for c in out["collectives"]}
    assert set(kinds) == {"tp", "pp", "dp reduce-scatter", "dp all-gather"}
    for c in kinds.values():
        assert c["time_s"] > 0 and c["busbw_bytes_per_s"] > 0 and c["analytic_time_s"] > 0
        assert abs(c["sim_over_ideal"] - 1) < 1e-9  # packed, sprayed, non-blocking: the link bound
        assert c["together_time_s"] >= c["time_s"] * (1 - 1e-9)
    assert kinds["dp reduce-scatter"]["group_ranks"] == 2 and kinds["tp"]["num_groups"] == 4
    assert 0 < out["max_link_utilization"] <= 1 + 1e-9 and out["routing"] == "spray"


def test_step_honours_the_fabric_flags_and_chooses_a_layout_as_train_does():
    args = (*STEP, "--routing", "ecmp", "--placement", "random", "--oversubscription", "2", "--seed", "3")
    out = _json(*args, "--fail-switches", "1")
    assert out["layout_chosen"] is True and out["routing"] == "ecmp" and out["placement"] == "random"
    assert out["fabric"]["oversubscription"] == 2 and out["failed_switches"] == 1
    assert out == _json(*args, "--fail-switches", "1")  # the same seed repeats
    job = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "4", "--global-batch", "64", "--json"]
    train = json.loads(runner.invoke(app, ["train", *job]).stdout)
    assert out["layout"] == train["layout"]


def test_step_refuses_bad_input_in_one_line():
    result = runner.invoke(app, ["fabric", *STEP, "--tp", "3", "--pp", "1"])
    assert result.exit_code == 2 and "tp*pp*cp = 3*1*1" in result.output and "Traceback" not in result.output
    result = runner.invoke(app, ["fabric", *STEP, "--tp", "8", "--pp", "2", "--routing", "flood", "--json"])
    assert result.exit_code == 2 and "flood" in result.output


def test_several_jobs_report_their_slowdown_against_running_alone():
    out = _json("simulate", *BASE, "--collective", "alltoall", "--jobs", "3", "--placement", "random", "--seed", "2")
    assert out["num_jobs"] == 3 and len(out["jobs"]) == 3
    for job in out["jobs"]:
        assert job["slowdown"] >= 1 - 1e-9 and abs(job["time_s"] / job["alone_time_s"] - job["slowdown"]) < 1e-12
    assert out["time_s"] == max(job["time_s"] for job in out["jobs"])  # the slowest job heads the result
    packed = _json("simulate", *BASE, "--jobs", "2")
    assert [job["slowdown"] for job in packed["jobs"]] == [1.0, 1.0]  # own leaves, non-blocking
    result = runner.invoke(app, ["fabric", "simulate", "--nodes", "40", "--fabric-hosts", "64", "--jobs", "2"])
    assert result.exit_code == 2 and "--jobs 2 of 40 nodes need 80 hosts" in result.output


def test_failed_switches_slow_a_cross_spine_alltoall_and_too_many_are_refused():
    args = ("simulate", "--nodes", "64", "--fabric-hosts", "64", "--size", "64M", "--max-steps", "2")
    whole = _json(*args, "--collective", "alltoall")
    broken = _json(*args, "--collective", "alltoall", "--fail-switches", "8")
    assert broken["failed_switches"] == 8 and broken["time_s"] > whole["time_s"]
    result = runner.invoke(app, ["fabric", *args, "--fail-switches", "10000", "--json"])
    assert result.exit_code == 2 and json.loads(result.stderr)["field"] == "fail_switches"


def test_a_failed_leaf_halves_the_rails_of_the_gpu_that_lost_one():
    # p5: 4 rails per GPU; the failed leaf takes rail k of every job host, so GPU k // 4 sends through a
    # peer GPU (PXN) whose 4 rails then carry both GPUs' ring channels: half the busbw.
    whole = _json("simulate", *BASE, "--algo", "ring", "--ideal")
    broken = _json("simulate", *BASE, "--algo", "ring", "--fail-leaves", "1", "--ideal")
    assert broken["failed_leaves"] == 1 and broken["fabric"]["links_down"] == 2 * 32 + 2 * 32  # ports, spines
    assert abs(broken["busbw_bytes_per_s"] / whole["busbw_bytes_per_s"] - 0.5) < 1e-9
    result = runner.invoke(app, ["fabric", "simulate", *BASE, "--fail-leaves", "99", "--json"])
    assert result.exit_code == 2 and json.loads(result.stderr)["field"] == "fail_leaves"


def test_step_honours_failed_leaves_devices_per_node_and_plot(tmp_path: Path):
    target = tmp_path / "step.png"
    out = _json(*STEP, "--tp", "8", "--pp", "2", "--fail-leaves", "1", "--plot", str(target), "--ideal")
    assert target.read_bytes()[:4] == b"\x89PNG" and out["failed_leaves"] == 1
    dp = next(c for c in out["collectives"] if c["kind"] == "dp reduce-scatter")
    assert abs(dp["sim_over_ideal"] - 2) < 1e-9  # one GPU's rails carry two GPUs' traffic
    trn = ["step", "llama3-8b", "--instance", "trn1.32xlarge", "--nodes", "2", "--fabric-hosts", "16"]
    split = _json(*trn, "--devices-per-node", "32", "--global-batch", "64", "--tp", "8", "--pp", "1")
    assert split["devices_per_node"] == 32 and split["fabric"]["gpus_per_host"] == 32
    assert {c["kind"]: c["num_groups"] for c in split["collectives"]}["tp"] == 8  # 64 NeuronCores in groups of 8
