"""``clustersim models``: the zoo listing, one model as JSON, and an unknown id."""

import json

from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, ["models", *args], env={"CLUSTERSIM_MODELS": "", "COLUMNS": "200"})


def test_listing_names_every_zoo_model():
    result = run("--json")
    assert result.exit_code == 0, result.output
    names = {row["name"] for row in json.loads(result.stdout)}
    assert {"gpt3-175b", "llama3.1-405b", "mixtral-8x7b"} <= names


def test_one_model_has_exact_parameters_and_flops():
    payload = json.loads(run("mixtral-8x7b", "--json").stdout)
    assert payload["params"] == 46_702_792_704 and payload["active_params"] == 12_879_925_248
    assert payload["model_flops_per_token"] > 6 * payload["active_params"]


def test_unknown_model_suggests_and_exits_2():
    result = run("lama2-7b")
    assert result.exit_code == 2 and "did you mean" in result.output and "Traceback" not in result.output
