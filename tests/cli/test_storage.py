"""``clustersim storage``: checkpoint and striping, their --json keys and their errors."""

import itertools
import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
PARAMS_405B = 405_853_388_800


def run(*args):
    return runner.invoke(app, ["storage", *args], env=ENV)


def test_checkpoint_json_has_the_issue_keys():
    result = run("checkpoint", "llama3.1-405b", "--nodes", "2048", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["checkpoint_bytes"] == PARAMS_405B * 14
    assert payload["bound"] == "file system"
    assert payload["save_s"] == pytest.approx(PARAMS_405B * 14 / 100.8e9)
    assert payload["load_s"] > 0 and payload["path"] == "efa-gds"
    assert set(payload["modes"]) == {"sync", "async", "nvme"}
    assert payload["modes"]["async"]["stall_s"] < payload["modes"]["nvme"]["stall_s"] < payload["save_s"]


def test_checkpoint_stripes_and_async_are_honoured():
    result = run(
        "checkpoint", "llama3-8b", "--nodes", "1", "--pattern", "aggregated", "--stripes", "1", "--async", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["bound"] == "stripes" and payload["mode"] == "async" and payload["stall_bound"] == "host copy"
    assert payload["layout"] == [{"end_bytes": None, "stripes": 1}]
    assert payload["stall_s"] < payload["save_s"] == pytest.approx(payload["drain_s"])


def test_checkpoint_table_names_the_bound():
    result = run("checkpoint", "llama3-8b", "--storage", "fsx:SCRATCH_2:2400GiB", "--nodes", "1")
    assert result.exit_code == 0, result.output
    assert "over ena" in result.stdout and "file system" in result.stdout and "*" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--storage", "fsx:PERSISTENT_2-1000:100TiB"), "nearest valid: 100,800 GiB or 103,200 GiB"),
        (("--storage", "fsx:PERSISTENT_2-1000:600GiB"), "below the"),
        (("--stripes", "85"), "85 is not between 1 and the 84 storage targets"),
        (("--storage", "fsx:SCRATCH_2:2400GiB", "--path", "efa"), "cannot be reached over EFA"),
        (("--async", "--nvme"), "choose one"),
        (("--format", "pickle"), "--format: unknown value 'pickle'"),
    ],
)
def test_checkpoint_errors(args, message):
    result = run("checkpoint", "llama3-8b", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_striping_rises_until_the_client_bound():
    result = run("striping", "--path", "efa", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 84 and rows[0]["bytes_per_s"] == pytest.approx(1.2e9) and rows[0]["bound"] == "stripes"
    assert rows[-1]["bound"] == "clients" and rows[-1]["bytes_per_s"] == pytest.approx(700e9 / 8)
    assert all(b["bytes_per_s"] >= a["bytes_per_s"] for a, b in itertools.pairwise(rows))


def test_striping_error_in_json():
    result = run("striping", "--size", "0", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stderr)["field"] == "--size"
