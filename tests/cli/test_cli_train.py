"""``clustersim train``: the breakdown, --json, a chosen layout, and errors without tracebacks."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()


def run(*args):
    return runner.invoke(
        app, ["train", *args], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
    )


def test_json_gives_terms_memory_and_job_cost():
    result = run("llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--tp", "8", "--pp", "2", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["layout"]["tp"] == 8 and payload["layout"]["dp"] == 4 and payload["layout_chosen"] is False
    assert payload["step_s"] == pytest.approx(sum(t["exposed_s"] for t in payload["terms"]))
    assert payload["global_batch_tokens"] == 512 * 8192  # the default: about 4M tokens a step
    assert 0 < payload["mfu"] < 1 and payload["fits"] is True
    assert payload["job"]["tokens"] == 1e12 and payload["job"]["cost_usd"] > 0
    assert payload["params"] == 70_553_706_496


def test_omitted_layout_is_chosen_and_named():
    result = run("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tokens", "15T")
    assert result.exit_code == 0, result.output
    assert "layout chosen" in result.stdout and "step" in result.stdout and "MFU" in result.stdout
    assert "15T tokens" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["lama3-8b"], "did you mean"),
        (["llama3-8b", "--instance", "p9.48xlarge"], "unknown instance"),
        (["llama3-8b", "--nodes", "2", "--tp", "3"], "does not divide the 16 devices"),
        (["llama3-8b", "--nodes", "2", "--tp", "8", "--pp", "5"], "does not divide"),
        (["llama3-8b", "--precision", "fp4"], "'fp4' is ambiguous: say nvfp4"),
        (["llama3-8b", "--precision", "nvfp4"], "nvfp4 GEMMs need tensor cores that h200-sxm (hopper) does not have"),
        (["llama3-8b", "--precision", "int3"], "unknown precision"),
        (["llama3-8b", "--tokens", "lots"], "cannot read"),
        (["llama3.1-405b", "--instance", "p5.48xlarge", "--nodes", "1"], "does not fit"),
        (["llama3-8b", "--tp", "0"], "--tp"),
        (["llama3-8b", "--tp", "8", "--cp", "0"], "--cp"),
        (["llama3-8b", "--zero", "5"], "--zero"),
        (["llama3-8b", "--seq", "0"], "--seq"),
        (["llama2-7b", "--instance", "trn1.32xlarge", "--devices-per-node", "24"], "valid: 16, 32"),
    ],
)
def test_errors_are_one_line_with_exit_code_2(args, message):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_neuron_cores_can_be_the_ranks():
    args = [
        "llama2-7b",
        "--instance",
        "trn1.32xlarge",
        "--nodes",
        "16",
        "--tp",
        "8",
        "--global-batch",
        "1024",
        "--json",
    ]
    chips = json.loads(run(*args).stdout)
    cores = json.loads(run(*args, "--devices-per-node", "32").stdout)
    assert chips["layout"]["dp"] == 32 and cores["layout"]["dp"] == 64
    assert cores["capacity_bytes"] == chips["capacity_bytes"] / 2  # a NeuronCore's share of the chip


def test_compare_runs_the_same_job_on_another_instance():
    args = ["llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--tp", "8", "--pp", "2", "--json"]
    result = run(*args, "--compare", "p5e.48xlarge")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["first"]["system"] == "8 x p5.48xlarge" and payload["second"]["system"] == "8 x p5e.48xlarge"
    ratios = payload["ratios_second_to_first"]
    assert ratios["capacity_bytes"] == pytest.approx(141 / 80)
    assert ratios["step_s"] <= 1.0  # same compute, more bandwidth: never slower
    table = run(*args[:-1], "--compare", "p5e.48xlarge")
    assert table.exit_code == 0 and "ratio" in table.stdout and "p5e.48xlarge" in table.stdout


def test_an_efficiency_file_changes_the_estimate(tmp_path):
    faster = tmp_path / "fast.toml"
    faster.write_text('[hopper]\ngemm_max = 0.95\nsource = "what-if"\n')
    args = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "1", "--global-batch", "64", "--json"]
    base = json.loads(run(*args).stdout)
    tuned = json.loads(run(*args, "--efficiency", str(faster)).stdout)
    assert tuned["step_s"] < base["step_s"]
    bad = tmp_path / "bad.toml"
    bad.write_text("[hopper]\ngemm_max = 7\n")
    result = run(*args, "--efficiency", str(bad))
    assert result.exit_code == 2 and "gemm_max" in result.output and "Traceback" not in result.output


def test_framework_picks_the_software_profile_and_a_scenario_keeps_it(tmp_path):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    runner = CliRunner()
    base = ["train", "llama3-8b", "--instance", "p4de.24xlarge", "--nodes", "1", "--tp", "1", "--pp", "1",
            "--zero", "3", "--recompute", "full", "--seq", "8192", "--global-batch", "16", "--json"]  # fmt: skip
    fsdp = runner.invoke(app, [*base, "--framework", "fsdp", "--save-scenario", str(tmp_path / "job.toml")])
    megatron = runner.invoke(app, base)
    assert fsdp.exit_code == 0 and megatron.exit_code == 0, fsdp.output + megatron.output
    first, second = json.loads(fsdp.stdout), json.loads(megatron.stdout)
    assert (first["framework"], second["framework"]) == ("fsdp", "megatron")
    # On A100 Megatron-LM's attention is unfused: the score matrices cost memory FSDP's flash attention does not.
    assert first["memory_bytes"]["activations"] < second["memory_bytes"]["activations"]
    assert 'framework = "fsdp"' in (tmp_path / "job.toml").read_text(encoding="utf-8")
    replay = runner.invoke(app, ["train", "--scenario", str(tmp_path / "job.toml"), "--json"])
    assert replay.exit_code == 0 and json.loads(replay.stdout)["step_s"] == first["step_s"]
    refused = runner.invoke(app, ["train", "--scenario", str(tmp_path / "job.toml"), "--framework", "megatron"])
    assert refused.exit_code == 2 and "--framework" in refused.output
    unknown = runner.invoke(app, [*base, "--framework", "fdsp"])
    assert unknown.exit_code == 2 and "did you mean fsdp" in unknown.output
