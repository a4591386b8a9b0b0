"""The CLI surface as a snapshot: every command with its arguments and options, and the keys of each
command's --json output. An accidental change to the interface fails here.

A missing snapshot fails; after an intended change, rewrite it and review its diff:
``CLUSTERSIM_UPDATE_SNAPSHOTS=1 python -m pytest tests/cli/test_cli_surface.py``.
(``validate`` is listed by name only; its own tests own its options and output.)
"""

import json
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from clustersim.cli.app import app
from tests.snapshots import recorded

SNAPSHOT = Path(__file__).with_name("cli_surface.txt")
OWNED_ELSEWHERE = {"validate"}
runner = CliRunner()

# One invocation per --json shape (explicit layouts keep them fast).
JSON_CASES = {
    "hw list": ["hw", "list", "--kind", "accelerator", "--json"],
    "hw show": ["hw", "show", "h100-sxm", "--json"],
    "hw compare": ["hw", "compare", "h100-sxm", "h200-sxm", "--json"],
    "hw compare instances": ["hw", "compare", "p5en.48xlarge", "p6e-gb200.36xlarge", "--json"],
    "collective": ["collective", "all_reduce", "--nodes", "2", "--min", "1M", "--max", "2M", "--json"],
    "models": ["models", "--json"],
    "models MODEL": ["models", "llama3-8b", "--json"],
    "datasets": ["datasets", "--json"],
    "datasets DATASET": ["datasets", "random", "--json"],
    "train": ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1", "--json"],
    "train --compare": [
        *("train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1"),
        *("--compare", "p5e.48xlarge", "--json"),
    ],
    "serve": ["serve", "llama2-70b", "--tp", "8", "--json"],
    "train --storage": [
        *("train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1"),
        *("--storage", "fsx:PERSISTENT_2-1000:2400GiB", "--json"),
    ],
    "storage checkpoint": ["storage", "checkpoint", "llama3-8b", "--nodes", "2", "--json"],
    "storage striping": ["storage", "striping", "--json"],
    "reliability": ["reliability", "--work", "1d", "--runs", "100", "--json"],
    "serve --compare": ["serve", "llama2-70b", "--tp", "8", "--compare", "p5e.48xlarge", "--json"],
    "transport compare": ["transport", "compare", "--message", "64K", "--messages", "3", "--paths", "2", "--json"],
    "transport datapath": ["transport", "datapath", "--instance", "p4d.24xlarge", "--message", "4K", "--json"],
    "transport nccl": ["transport", "nccl", "--sizes", "8", "--json"],
    "fabric simulate": ["fabric", "simulate", "--nodes", "2", "--fabric-hosts", "64", "--size", "1M", "--json"],
    "fabric compare": ["fabric", "compare", "--nodes", "2", "--fabric-hosts", "64", "--size", "1M", "--json"],
    "fabric simulate --jobs": [
        *("fabric", "simulate", "--nodes", "2", "--fabric-hosts", "64", "--size", "1M", "--jobs", "2", "--json"),
    ],
    "fabric step": [
        *("fabric", "step", "llama3-8b", "--nodes", "2", "--fabric-hosts", "64", "--tp", "8", "--pp", "1"),
        *("--global-batch", "16", "--json"),
    ],
    "fabric pattern": ["fabric", "pattern", "--nodes", "2", "--fabric-hosts", "64", "--size", "1M", "--json"],
    "explain": [
        *("explain", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1"),
        *("--measured-step", "1.5", "--json"),
    ],
}


def _param(param: Any) -> str:
    if param.param_type_name == "argument":
        return f"{(param.metavar or param.name).upper()} (argument{', required' if param.required else ''})"
    return "/".join([*param.opts, *param.secondary_opts]) + (" (required)" if param.required else "")


def surface() -> list[str]:
    """One line per command and per parameter of each command: ``train --tp``."""
    lines: list[str] = []

    def walk(command: Any, path: str) -> None:
        commands = getattr(command, "commands", None)
        if path in OWNED_ELSEWHERE:
            lines.append(f"{path} (its options: see its own tests)")
            return
        lines.append(f"{path or 'clustersim'}" + (f" [{' '.join(sorted(commands))}]" if commands else ""))
        lines.extend(f"{path or 'clustersim'} {_param(param)}" for param in command.params)
        for name, sub in sorted((commands or {}).items()):
            walk(sub, f"{path} {name}".strip())

    walk(typer.main.get_command(app), "")
    return lines


def key_paths(value: Any, prefix: str = "") -> list[str]:
    """The dotted key paths of a JSON value (a list's items as ``[]``: every item's keys, in first-seen order, a
    leaf only where no item has keys below it, so the paths do not depend on which item comes first)."""
    if isinstance(value, dict):
        out = [prefix] if prefix and not value else []
        for key, item in value.items():
            out += key_paths(item, f"{prefix}.{key}" if prefix else key)
        return out
    if isinstance(value, list) and value:
        paths = list(dict.fromkeys(path for item in value for path in key_paths(item, f"{prefix}[]")))
        return [path for path in paths if not any(other.startswith((path + ".", path + "[]")) for other in paths)]
    return [prefix]


def json_lines() -> list[str]:
    """One line per key path of each command's --json output: ``json train: layout.tp``."""
    env = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
    env["CLUSTERSIM_SERVING_DATASETS"] = ""  # the packaged request sets only
    lines = []
    for name, args in JSON_CASES.items():
        result = runner.invoke(app, args, env=env)
        assert result.exit_code == 0, f"{name}: {result.output}"
        lines += [f"json {name}: {path}" for path in key_paths(json.loads(result.stdout))]
    return lines


@pytest.fixture(scope="module")
def current() -> list[str]:
    return surface() + json_lines()


@pytest.fixture(scope="module")
def snapshot(current: list[str]) -> list[str]:
    """The recorded surface (written first only under CLUSTERSIM_UPDATE_SNAPSHOTS=1; a missing one fails)."""
    text = "\n".join(current) + "\n"
    command = "python -m pytest tests/cli/test_cli_surface.py"
    return recorded(SNAPSHOT, text, flag="CLUSTERSIM_UPDATE_SNAPSHOTS", command=command).splitlines()


def test_every_command_and_option_is_as_recorded(current, snapshot):
    wanted = [line for line in snapshot if not line.startswith("json ")]
    assert [line for line in current if not line.startswith("json ")] == wanted, (
        "the CLI's commands or options changed; if intended, rerun with CLUSTERSIM_UPDATE_SNAPSHOTS=1"
    )


@pytest.mark.parametrize("case", sorted(JSON_CASES))
def test_json_keys_are_as_recorded(current, snapshot, case):
    mine = f"json {case}: "
    assert [line for line in current if line.startswith(mine)] == [
        line for line in snapshot if line.startswith(mine)
    ], f"the --json keys of '{case}' changed; if intended, rerun with CLUSTERSIM_UPDATE_SNAPSHOTS=1"


def test_every_command_is_in_the_snapshot():
    top = typer.main.get_command(app)
    assert set(top.commands) == {
        "calibrate",
        "collective",
        "datasets",
        "explain",
        "fabric",
        "hw",
        "ingest",
        "models",
        "plan",
        "probe",
        "reliability",
        "report",
        "serve",
        "storage",
        "sweep",
        "train",
        "transport",
        "validate",
    }
    assert set(top.commands["storage"].commands) == {"checkpoint", "striping"}
    assert set(top.commands["sweep"].commands) == {"run", "show"}
    assert set(top.commands["hw"].commands) == {"list", "show", "compare"}
    assert set(top.commands["transport"].commands) == {"compare", "sweep", "incast", "ring", "datapath", "nccl"}
    assert set(top.commands["fabric"].commands) == {"simulate", "compare", "step", "pattern"}
