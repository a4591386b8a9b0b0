"""``plan --executor``: local is the default and says so in the JSON; Ray's options are refused without Ray's
executor, a missing ``ray`` names the extra, and ``--workers`` is refused beside ``--address``."""

from __future__ import annotations

import json
import sys

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
BASE = ("llama3-70b", "--tokens", "2T", "--instances", "p5.48xlarge", "--nodes", "4")


def plan(*args: str):
    return runner.invoke(app, ["plan", *BASE, *args], env=ENV)


def refused(result, line: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {line}\n"


def test_local_is_the_default_and_the_json_says_which_executor_ran():
    result = plan("--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["executor"] == "local" and payload["evaluated"] > 0


@pytest.mark.parametrize(
    ("flag", "value"), [("--workers", "2"), ("--address", "127.0.0.1:6379")], ids=["workers", "address"]
)
def test_ray_options_are_refused_with_the_local_executor(flag, value):
    refused(plan(flag, value), f"{flag}: only with --executor ray (local searches the points in this process)")


def test_workers_beside_an_address_are_refused():
    result = plan("--executor", "ray", "--address", "127.0.0.1:6379", "--workers", "2")
    refused(result, "--workers: sizes a new local Ray; the cluster at --address has its own CPUs")


def test_a_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    refused(
        plan("--executor", "ray"), "--executor ray needs Ray, which is not installed: pip install 'clustersim[ray]'"
    )
