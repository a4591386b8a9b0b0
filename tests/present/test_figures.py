"""Every figure is drawn one way (clustersim.present.figures): written to its path and closed, also when
writing fails, so a process that draws many (the fuzz run, a notebook) holds none open."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.present.figures import figure
from clustersim.validation.cases import default_case_files

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
COMMANDS = [
    ["transport", "datapath"],
    ["transport", "compare", "--messages", "2", "--message", "4K"],
    ["reliability", "--runs", "50"],
    ["fabric", "simulate", "--nodes", "2", "--size", "1M"],
    ["fabric", "pattern", "--nodes", "2", "--size", "1M"],
    ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "2", "--pp", "1"],
    ["collective", "all_reduce", "--max", "1M"],
    ["storage", "checkpoint", "llama3-8b"],
    ["storage", "striping"],
    ["validate", str(dict(default_case_files())["memory.jsonl"])],
]


def test_a_figure_is_written_and_closed(tmp_path: Path):
    with figure(tmp_path / "f.png", ncols=2, figsize=(4, 2), dpi=50) as (fig, (left, _)):
        left.plot([0, 1], [0, 1])
        assert plt.fignum_exists(fig.number)
    assert (tmp_path / "f.png").stat().st_size > 0 and not plt.fignum_exists(fig.number)


def test_a_figure_that_cannot_be_written_is_closed_too(tmp_path: Path):
    with pytest.raises(OSError), figure(tmp_path / "missing" / "f.png", figsize=(4, 2)) as (fig, ax):
        ax.plot([0, 1], [0, 1])
    assert not plt.fignum_exists(fig.number)


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_no_command_leaves_a_figure_open(tmp_path: Path, command: list[str]):
    plt.close("all")
    result = runner.invoke(app, [*command, "--plot", str(tmp_path / "f.png")], env=ENV)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "f.png").stat().st_size > 0 and plt.get_fignums() == []
