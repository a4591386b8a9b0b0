"""Options that mean nothing without another, or that another overrides, are refused naming both:
``train --compare-nodes`` without ``--compare``; ``serve --batch`` (offline) beside ``--rate``,
``--ttft-target`` or ``--tpot-target`` (server mode, where the rate sets the batch). The API refuses
the same, the CLI maps it."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.plan.serving import ServingScenario
from clustersim.scenario.schema import LoadSpec

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}


def test_compare_nodes_without_compare_is_refused_naming_both():
    result = runner.invoke(app, ["train", "llama3-8b", "--nodes", "2", "--compare-nodes", "4", "--json"], env=ENV)
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["field"] == "--compare-nodes" and "--compare" in payload["error"].replace("--compare-nodes", "")


@pytest.mark.parametrize(("flag", "value"), [("--rate", "2"), ("--ttft-target", "1"), ("--tpot-target", "0.05")])
def test_serve_batch_with_server_mode_is_refused_naming_both(flag, value):
    result = runner.invoke(
        app, ["serve", "llama3-8b", "--instance", "p5.48xlarge", "--batch", "8", flag, value, "--json"], env=ENV
    )
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["field"] == "--batch" and flag in payload["error"]


@pytest.mark.parametrize("server", [{"rate_per_s": 2.0}, {"ttft_target_s": 1.0}, {"tpot_target_s": 0.05}])
def test_the_api_refuses_a_batch_in_server_mode(server):
    with pytest.raises(ClusterSimError, match="--batch"):
        ServingScenario(batch=8, **server)
    with pytest.raises(ValueError, match="batch"):
        LoadSpec(batch=8, **server)
    assert ServingScenario(batch=8).batch == 8 and LoadSpec(**server).batch is None


@pytest.mark.parametrize(
    ("args", "option", "given"),
    [
        (
            ["fabric", "step", "llama3-8b", "--nodes", "4", "--routing", "ecmp", "--routing", "spray"],
            "--routing",
            "ecmp, spray",
        ),
        (
            ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--sp", "--no-sp"],
            "--sp",
            "--sp, --no-sp",
        ),
        (["collective", "all_reduce", "--nodes", "2", "--max=8G", "--max", "1G"], "--max", "8G, 1G"),
    ],
)
def test_an_option_given_twice_is_refused_naming_both_values(args: list[str], option: str, given: str) -> None:
    # click keeps the last value and drops the first silently: --routing ecmp --routing spray ran spray.
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.output.strip().splitlines()[-1])
    assert error["field"] == option and f"given 2 times ({given})" in error["error"]


def test_options_that_take_many_values_may_repeat() -> None:
    result = CliRunner().invoke(app, ["hw", "compare", "h100-sxm", "h200-sxm", "--json"])
    assert result.exit_code == 0, result.output
