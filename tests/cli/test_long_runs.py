"""Long simulations (issue 20: ``fabric simulate --jobs 1024`` ran 10 minutes to 23 GB): estimated
before they start, refused above ``--max-events`` (one line naming the estimate, the bound and the
option), and shown with a progress bar on stderr that never reaches ``--json`` stdout."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
SMALL_FABRIC = ["--nodes", "4", "--fabric-hosts", "64", "--size", "64M", "--max-steps", "2"]
SMALL_TRANSPORT = ["--message", "64K", "--messages", "20"]


def _refused(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


def test_a_run_past_the_machines_memory_is_refused_at_once_naming_the_memory_it_would_take():
    line = _refused("fabric", "simulate", "--nodes", "2500", "--algo", "ring", "--max-steps", "64")
    assert "10,240,000 flows" in line and "24 GiB of arrays" in line and "8 GiB" in line and " min on a 2-core" in line


def test_a_hundred_and_fifty_jobs_are_refused_naming_the_bound_and_the_option_that_lifts_it():
    line = _refused("fabric", "simulate", "--nodes", "16", "--jobs", "150")
    # calibrated links (the default) run the flows twice: with the structure's latencies and without
    assert "flow-events" in line and "default bound of 1e10" in line and "--max-events 4.9e10" in line
    assert " min on a 2-core, 24 GiB machine" in line


def test_a_gigabyte_transport_compare_is_refused_by_default():
    line = _refused("transport", "compare", "--message", "1G", "--messages", "16")
    assert "8,211,216 packets" in line and "default bound of 2e7 packet events" in line
    assert "--max-events 9e7" in line  # RC on lossless links: an event per hop and per transmission


@pytest.mark.parametrize(
    "args",
    [
        ["fabric", "simulate", *SMALL_FABRIC],
        ["fabric", "simulate", *SMALL_FABRIC, "--jobs", "2"],
        ["fabric", "compare", *SMALL_FABRIC],
        ["fabric", "pattern", "--nodes", "4", "--fabric-hosts", "64"],
        ["fabric", "step", "llama3-8b", "--nodes", "2", "--fabric-hosts", "64", "--max-steps", "2"],
        ["transport", "compare", *SMALL_TRANSPORT],
        ["transport", "sweep", *SMALL_TRANSPORT, "--values", "0,1%"],
        ["transport", "incast", *SMALL_TRANSPORT, "--senders", "2"],
    ],
)
def test_a_given_bound_is_honoured_and_a_larger_one_lifts_it(args: list[str]):
    line = _refused(*args, "--max-events", "10")
    assert "more than the given bound of 10 " in line and "--max-events" in line
    result = runner.invoke(app, [*args, "--max-events", "1e12", "--json"])
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)


def test_a_bad_max_events_is_refused_naming_the_option():
    for value in ("0", "-5", "nan", "inf", "abc"):
        line = _refused("fabric", "simulate", *SMALL_FABRIC, "--max-events", value)
        assert "--max-events" in line


@pytest.mark.parametrize(
    ("args", "unit"),
    [
        (["fabric", "simulate", *SMALL_FABRIC, "--jobs", "2"], "flows/s"),
        (["fabric", "step", "llama3-8b", "--nodes", "2", "--fabric-hosts", "64", "--max-steps", "2"], "flows/s"),
        (["transport", "compare", "--message", "1M", "--messages", "30"], "events/s"),
    ],
)
def test_json_stdout_stays_json_while_the_progress_bar_goes_to_stderr(args: list[str], unit: str):
    result = runner.invoke(app, [*args, "--json"], env={"CLUSTERSIM_PROGRESS": "1"})
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # nothing but the JSON
    assert "simulating" in result.stderr and "ETA" in result.stderr
    quiet = runner.invoke(app, [*args, "--json"], env={"CLUSTERSIM_PROGRESS": "0"})
    assert quiet.stderr == "" and json.loads(quiet.stdout) == json.loads(result.stdout)
