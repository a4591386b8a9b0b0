"""``serve --speculative K --acceptance A [--draft-model M]``: speculative decoding in the simulator and its
closed form, from the command line."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
BASE = ("llama3.1-70b", "--tp", "8", "--input", "512", "--output", "128", "--requests", "100", "--concurrency", "8")


def run(*args):
    return runner.invoke(
        app, ["serve", *args], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
    )


def test_the_json_has_the_speculation_and_its_closed_form():
    plain = json.loads(run(*BASE, "--json").stdout)
    result = run(*BASE, "--speculative", "4", "--acceptance", "0.7", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["speculation"] == {
        "draft_tokens": 4,
        "acceptance": 0.7,
        "tokens_per_step": pytest.approx(2.7731, abs=1e-4),
        "draft": "one-layer head (EAGLE / MTP)",
    }
    closed = payload["closed_form"]
    assert closed["scenario"] == "concurrency, speculative" and closed["batch"] == 8
    # all 8 clients start at once here, so the simulation and its steady-state closed form differ; both are
    # well under the plain run's (tests/serving/test_speculative.py holds them together with a ramp)
    assert closed["tpot_s"] < plain["closed_form"]["tpot_s"] / 1.5
    assert payload["tpot_s"]["mean"] < plain["tpot_s"]["mean"] / 1.8


def test_a_draft_model_is_named_and_the_table_says_so():
    result = run(*BASE, "--speculative", "3", "--acceptance", "0.8", "--draft-model", "llama3.1-8b")
    assert result.exit_code == 0, result.output
    assert "speculative decoding: 3 draft tokens a step from llama3.1-8b" in result.output


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        (("--speculative", "4"), "--acceptance", "--speculative needs it"),
        (("--acceptance", "0.5"), "--speculative", "--acceptance needs it"),
        (("--draft-model", "llama3.1-8b"), "--draft-model", "give it too"),
        (("--speculative", "4", "--acceptance", "0.5", "--draft-model", "llama2-7b"), "--draft-model", "vocabulary"),
        (("--speculative", "4", "--acceptance", "0.5", "--disaggregate", "1:1"), "--speculative", "plain decoding"),
    ],
)
def test_refusals_name_the_option(extra, field, words):
    result = run(*BASE, *extra, "--json")
    assert result.exit_code == 2, result.output
    error = json.loads(result.stderr)
    assert error["field"] == field and words in error["error"]


def test_an_acceptance_outside_zero_one_is_refused():
    result = run(*BASE, "--speculative", "4", "--acceptance", "1.5")
    assert result.exit_code == 2 and "--acceptance" in result.output


# ---- without a simulation: the closed form ------------------------------------------------------------------------

CLOSED = ("llama3.1-70b", "--tp", "8", "--input", "512", "--output", "256", "--speculative", "4", "--acceptance")


def test_offline_speculation_helps_a_small_batch_and_costs_a_full_one():
    """At 8 sequences a 70B step is memory-bound: TPOT halves; at the largest batch that fits the step is
    compute-bound, the K extra tokens verified cost more than the accepted ones save (tokens/s falls)."""
    small = json.loads(run(*CLOSED, "0.7", "--batch", "8", "--json").stdout)
    full = json.loads(run(*CLOSED, "0.7", "--json").stdout)
    assert small["mode"] == "speculative closed form" and small["scenario"] == "offline, speculative"
    assert small["batch"] == 8 and small["tpot_s"] < small["without_speculation"]["tpot_s"] / 2
    assert full["batch"] == full["max_batch"]
    assert full["output_tokens_per_s"] < full["without_speculation"]["output_tokens_per_s"]
    table = run(*CLOSED, "0.7", "--batch", "8")
    assert table.exit_code == 0 and "without speculation at that batch" in table.output


def test_at_a_rate_the_closed_form_solves_the_batch():
    payload = json.loads(run(*CLOSED, "0.7", "--rate", "2", "--json").stdout)
    assert payload["scenario"] == "server, speculative" and payload["request_rate_per_s"] == pytest.approx(2.0)
    # Little's law: sequences in flight = rate x output / E steps x the step
    assert payload["batch"] == pytest.approx(2.0 * 256 * payload["tpot_s"], rel=1e-3)


@pytest.mark.parametrize("extra", [("--compare", "p5e.48xlarge"), ("--ttft-target", "1")])
def test_the_closed_form_refuses_what_it_does_not_price(extra):
    result = run(*CLOSED, "0.7", *extra, "--json")
    assert result.exit_code == 2 and json.loads(result.stderr)["field"] == extra[0]
