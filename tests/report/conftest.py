"""Reports of each kind, written once per session, with the JSON of the commands they stand for (run in-process).

The ``browser`` marker (tests that open the pages in headless Chromium) is registered here.
"""

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

pytest.importorskip("plotly", reason="clustersim report needs the extra: pip install 'clustersim[report]'")
pytest.importorskip("jinja2", reason="clustersim report needs the extra: pip install 'clustersim[report]'")

ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
TRAIN = [
    *("train", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "2"),
    *("--tokens", "15T", "--storage", "fsx:PERSISTENT_2-1000:100800GiB:efa"),
]
# The job on a 2:1 fabric, spread over it, ECMP-hashed (one seed): its step's DP and PP contend (train --network sim).
FABRIC = [
    *("--network", "sim", "--placement", "spread", "--routing", "ecmp", "--oversubscription", "2"),
    *("--fabric-seeds", "1"),
]
PLAN = [
    "plan",
    "llama3-8b",
    "--tokens",
    "1T",
    "--instances",
    "p5.48xlarge,p5en.48xlarge",
    "--nodes",
    "2,4",
    "--top",
    "3",
]
SWEEP_SPEC = """command = "train"

[options]
model = "llama3-8b"
tokens = "1T"
tp = 1
pp = 1

[grid]
instance = ["p5.48xlarge", "p5en.48xlarge"]
nodes = [2]
"""


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "browser: opens reports in headless Chromium (skipped without `chromium`)")


def invoke(*args: str) -> str:
    """stdout of ``clustersim ARGS`` run in-process; a failure fails the test with its output."""
    result = CliRunner().invoke(app, list(args), env=ENV)
    assert result.exit_code == 0, result.output
    return result.stdout


def embedded(path: Path) -> dict[str, Any]:
    """The JSON a report page embeds (``<script type="application/json" id="data">``)."""
    found = re.search(r'<script type="application/json" id="data">(.*?)</script>', path.read_text(), re.S)
    assert found, f"{path}: no embedded data"
    data: dict[str, Any] = json.loads(found.group(1))
    return data


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, Any]]]:
    """Per kind (training; fabric: the same job with --network sim; plan, sweep, validation): the page written and
    the CLI's ``--json`` it stands for."""
    root = tmp_path_factory.mktemp("reports")
    out: dict[str, tuple[Path, dict[str, Any]]] = {}
    scenario = root / "job.toml"
    invoke(*TRAIN, "--save-scenario", str(scenario))
    invoke("report", "--scenario", str(scenario), "-o", str(root / "training.html"))
    out["training"] = (
        root / "training.html",
        {"train": json.loads(invoke("train", "--scenario", str(scenario), "--json"))},
    )
    invoke("report", "--scenario", str(scenario), *FABRIC, "-o", str(root / "fabric.html"))
    out["fabric"] = (
        root / "fabric.html",
        {"train": json.loads(invoke("train", "--scenario", str(scenario), *FABRIC, "--json"))},
    )
    plan = root / "plan.json"
    plan.write_text(invoke(*PLAN, "--json"))
    invoke("report", "--plan", str(plan), "-o", str(root / "plan.html"))
    out["plan"] = root / "plan.html", {"plan": json.loads(plan.read_text())}
    spec, store = root / "sweep.toml", root / "sweep.db"
    spec.write_text(SWEEP_SPEC)
    invoke("sweep", "run", str(spec), "--store", str(store), "--workers", "1")
    invoke("report", "--from", str(store), "-o", str(root / "sweep.html"))
    out["sweep"] = root / "sweep.html", {"sweep": json.loads(invoke("sweep", "show", str(store), "--json"))}
    invoke("report", "--validate", "-o", str(root / "validation.html"))
    out["validation"] = root / "validation.html", {"validate": json.loads(invoke("validate", "--json"))}
    return out
