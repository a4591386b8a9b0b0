"""``--save-scenario`` and ``--scenario`` on train and serve: a replay prints the same --json, the job's
options are refused next to a scenario file (by name), and a malformed file exits 2 naming the problem."""

import json
import tomllib

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
TRAIN = ["train", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--tp", "8", "--pp", "2", "--json"]


def run(*args, env=None):
    return runner.invoke(app, list(args), env={**ENV, **(env or {})})


def test_train_replay_prints_the_same_json(tmp_path):
    path = tmp_path / "job.toml"
    first = run(*TRAIN, "--zero", "2", "--tokens", "300B", "--save-scenario", str(path))
    assert first.exit_code == 0, first.output
    saved = tomllib.loads(path.read_text())
    assert saved["kind"] == "training" and saved["model"] == "llama3-70b"
    assert saved["layout"]["dp"] == 4 and saved["layout"]["zero"] == 2 and saved["job"]["tokens"] == 3e11
    replay = run("train", "--scenario", str(path), "--json")
    assert replay.exit_code == 0, replay.output
    assert replay.stdout == first.stdout


def test_train_saves_the_chosen_layout_and_replays_its_step(tmp_path):
    path = tmp_path / "job.toml"
    first = run(
        "train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--save-scenario", str(path), "--json"
    )
    assert first.exit_code == 0, first.output
    text = path.read_text()
    assert "chosen by clustersim" in text and isinstance(tomllib.loads(text)["layout"], dict)
    replay = run("train", "--scenario", str(path), "--json")
    assert replay.exit_code == 0, replay.output
    a, b = json.loads(first.stdout), json.loads(replay.stdout)
    assert a["layout_chosen"] is True and b["layout_chosen"] is False  # the replay was given the layout
    assert b["layout"] == a["layout"] and b["step_s"] == a["step_s"]
    drop = {"layout_chosen", "notes"}
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def test_train_replay_takes_display_options(tmp_path):
    path = tmp_path / "job.toml"
    assert run(*TRAIN, "--save-scenario", str(path)).exit_code == 0
    table = run("train", "--scenario", str(path), "--ops")
    assert table.exit_code == 0, table.output
    assert "operations per micro-batch" in table.stdout and "MFU" in table.stdout
    compared = run("train", "--scenario", str(path), "--compare", "p5e.48xlarge", "--json")
    assert compared.exit_code == 0, compared.output
    assert json.loads(compared.stdout)["second"]["system"] == "8 x p5e.48xlarge"


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--nodes", "16"], "--nodes"),
        (["--nodes", "8"], "--nodes"),  # even at the file's value: an explicit flag is never dropped
        (["--tp", "4", "--no-sp"], "--tp, --sp/--no-sp"),
        (["--catalog", "somewhere"], "--catalog"),
    ],
)
def test_train_refuses_job_options_with_a_scenario(tmp_path, extra, named):
    path = tmp_path / "job.toml"
    assert run(*TRAIN, "--save-scenario", str(path)).exit_code == 0
    result = run("train", "--scenario", str(path), *extra)
    assert result.exit_code == 2
    assert named in result.stderr and "cannot be combined with a scenario file" in result.stderr
    assert "Traceback" not in result.output


def test_train_refuses_a_model_with_a_scenario_and_needs_one_without(tmp_path):
    path = tmp_path / "job.toml"
    assert run(*TRAIN, "--save-scenario", str(path)).exit_code == 0
    both = run("train", "llama3-8b", "--scenario", str(path))
    assert both.exit_code == 2 and "MODEL" in both.stderr
    neither = run("train")
    assert neither.exit_code == 2 and "give a MODEL" in neither.stderr


def test_serve_replay_prints_the_same_json_with_the_chosen_tp(tmp_path):
    path = tmp_path / "serve.toml"
    first = run("serve", "llama2-70b", "--precision", "fp8", "--input", "1024", "--save-scenario", str(path), "--json")
    assert first.exit_code == 0, first.output
    saved = tomllib.loads(path.read_text())
    assert saved["kind"] == "serving" and saved["system"]["tp"] == json.loads(first.stdout)["tp"]
    replay = run("serve", "--scenario", str(path), "--json")
    assert replay.exit_code == 0, replay.output
    assert replay.stdout == first.stdout


def test_serve_server_mode_round_trip(tmp_path):
    path = tmp_path / "serve.toml"
    args = ["serve", "llama2-70b", "--tp", "8", "--input", "512", "--output", "256", "--rate", "2", "--json"]
    first = run(*args, "--save-scenario", str(path))
    assert first.exit_code == 0, first.output
    assert tomllib.loads(path.read_text())["load"] == {"rate_per_s": 2.0}
    assert run("serve", "--scenario", str(path), "--json").stdout == first.stdout
    refused = run("serve", "--scenario", str(path), "--rate", "3")
    assert refused.exit_code == 2 and "--rate" in refused.stderr


def test_a_scenario_of_the_other_kind_is_refused(tmp_path):
    train, serve = tmp_path / "train.toml", tmp_path / "serve.toml"
    assert run(*TRAIN, "--save-scenario", str(train)).exit_code == 0
    assert run("serve", "llama2-70b", "--tp", "8", "--save-scenario", str(serve)).exit_code == 0
    wrong = run("serve", "--scenario", str(train))
    assert wrong.exit_code == 2 and "training scenario" in wrong.stderr and "clustersim train" in wrong.stderr
    wrong = run("train", "--scenario", str(serve))
    assert wrong.exit_code == 2 and "serving scenario" in wrong.stderr


def test_a_malformed_scenario_exits_2_naming_file_field_value_and_rule(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('kind = "training"\nmodel = "llama3-8b"\n[system]\ninstance = "p5.48xlarge"\nnodes = -1\n')
    result = run("train", "--scenario", str(path))
    assert result.exit_code == 2
    for part in ("bad.toml", "system.nodes", "-1", "greater than or equal to 1"):
        assert part in result.stderr
    assert "Traceback" not in result.output
    assert run("train", "--scenario", str(tmp_path / "none.toml")).exit_code == 2


def test_an_unwritable_save_exits_2_and_prints_no_estimate(tmp_path):
    result = run(*TRAIN, "--save-scenario", str(tmp_path / "missing-dir" / "job.toml"))
    assert result.exit_code == 2 and "cannot write the file" in result.stderr
    assert result.stdout == ""


def test_the_environment_catalog_is_saved_and_the_replay_ignores_the_environment(tmp_path):
    catalog = tmp_path / "hw"
    catalog.mkdir()
    (catalog / "price.toml").write_text(
        '[[instance]]\nid = "p5.48xlarge"\nbased_on = "p5.48xlarge"\n'
        'on_demand = { usd_per_hour = 1.0, as_of = 2026-11-01, region = "us-east-1", source = "our contract" }\n'
    )
    path = tmp_path / "job.toml"
    first = run(*TRAIN, "--save-scenario", str(path), env={"CLUSTERSIM_CATALOG": str(catalog)})
    assert first.exit_code == 0, first.output
    assert tomllib.loads(path.read_text())["options"]["catalog"] == [str(catalog.resolve())]
    replay = run("train", "--scenario", str(path), "--json", env={"CLUSTERSIM_CATALOG": ""})
    assert replay.stdout == first.stdout
    assert json.loads(replay.stdout)["job"]["price_usd_per_hour"] == 1.0
