"""``serve --simulate --pp N``: the request simulator on pipeline-parallel replicas."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()


def test_a_pipelined_simulation_runs_beside_its_closed_form():
    result = runner.invoke(
        app,
        [
            "serve",
            "llama2-70b",
            "--tp",
            "4",
            "--pp",
            "2",
            "--input",
            "512",
            "--output",
            "128",
            "--rate",
            "1",
            "--requests",
            "300",
            "--json",
        ],
        env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""},
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert (payload["tp"], payload["pp"], payload["dp"]) == (4, 2, 1)
    assert payload["closed_form"]["scenario"] == "server"
    assert payload["tpot_s"]["mean"] == pytest.approx(payload["closed_form"]["tpot_s"], rel=0.1)
