"""Every command's --plot refuses what matplotlib would write somewhere else or not at all: an empty
name (a hidden ``.png``), a directory (``DIR.png`` beside it), a name without a suffix or with one
that is not a figure format; one shared callback, checked over the whole command tree."""

import json

import pytest
import typer
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.cli.common import PLOT_SUFFIXES, plot_path
from clustersim.validation.cases import default_case_files

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
COMMANDS = [
    ["reliability", "--runs", "50"],
    ["transport", "compare", "--messages", "2", "--message", "4K"],
    ["fabric", "simulate"],
    ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "2", "--pp", "1"],
    ["collective", "all_reduce", "--max", "1M"],
    ["storage", "checkpoint", "llama3-8b"],
    ["storage", "striping"],
    ["validate", str(dict(default_case_files())["memory.jsonl"])],
]


def _commands(group, prefix=()):
    for name, command in getattr(group, "commands", {}).items():
        yield from _commands(command, (*prefix, name))
    if not getattr(group, "commands", None):
        yield prefix, group


def test_every_plot_option_uses_the_shared_check():
    plots = [
        (path, param)
        for path, command in _commands(typer.main.get_command(app))
        for param in command.params
        if "--plot" in getattr(param, "opts", ())
    ]
    assert len(plots) >= 8
    for path, param in plots:
        assert param.callback is not None and "plot_path" in repr(param.callback), path


def test_the_suffixes_are_formats_matplotlib_writes():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    supported = fig.canvas.get_supported_filetypes()
    plt.close(fig)
    assert {s.lstrip(".") for s in PLOT_SUFFIXES} <= set(supported)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
@pytest.mark.parametrize(
    ("value", "words"),
    [("", "an empty name"), ("DIR", "is a directory"), ("x.txt", "suffix '.txt'"), ("figure", "no suffix")],
)
def test_bad_plot_paths_refused_before_anything_is_written(tmp_path, monkeypatch, command, value, words):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "DIR").mkdir()
    result = runner.invoke(app, [*command, "--plot", value, "--json"], env=ENV)
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["field"] == "--plot" and words in payload["error"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["DIR"] and not any((tmp_path / "DIR").iterdir())


def test_a_figure_name_is_kept(tmp_path):
    assert plot_path(None) is None
    assert plot_path(tmp_path / "spread.PDF") == tmp_path / "spread.PDF"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_an_unwritable_figure_is_refused_alike_by_every_command(tmp_path, command):
    """One writer of figures (cli.common.write_figure): the same one-line message whatever the command."""
    path = tmp_path / "missing" / "figure.png"
    result = runner.invoke(app, [*command, "--plot", str(path)], env=ENV)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: --plot: cannot write {path}: No such file or directory\n"
    result = runner.invoke(app, [*command, "--plot", str(path), "--json"], env=ENV)
    assert json.loads(result.output) == {
        "error": f"--plot: cannot write {path}: No such file or directory",
        "field": "--plot",
        "value": str(path),
    }
