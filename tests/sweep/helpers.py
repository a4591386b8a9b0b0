"""What the sweep tests share: a spec written to a file, the CLI run in-process with a clean environment."""

import json
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from clustersim.cli.app import app

ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "CLUSTERSIM_PROGRESS": "0"}
COLLECTIVE = """
command = "collective"
[options]
instance = "p5.48xlarge"
min = "1M"
max = "4M"
[grid]
op = ["all_reduce", "all_gather"]
nodes = [2, 4]
"""


def write(tmp_path: Path, text: str, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def invoke(*args: str) -> Any:
    """``clustersim ARGS`` in this process: the result (exit_code, stdout, stderr)."""
    return CliRunner().invoke(app, list(args), env=ENV)


def sweep_json(*args: str) -> list[dict[str, Any]]:
    """The rows ``clustersim sweep ARGS --json`` prints (it must exit 0)."""
    result = invoke("sweep", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["rows"]


def same_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows without their wall times, which differ from run to run."""
    return [{key: value for key, value in row.items() if key != "wall_s"} for row in rows]
