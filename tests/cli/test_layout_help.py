"""The help says what a layout option's default means: the framework's where --tp and --pp give the
layout, a dimension of the search otherwise (the search used to override a stated default)."""

import pytest
import typer

from clustersim.cli.app import app

FLAGS = ("--zero", "--recompute", "--micro-batch", "--sp")


def _command(path):
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize("path", [["train"], ["fabric", "step"]])
def test_layout_defaults_say_they_are_searched(path):
    params = {opt: p for p in _command(path).params for opt in getattr(p, "opts", ())}
    for flag in FLAGS:
        param = params[flag]
        assert "else searched" in param.help, (flag, param.help)
        assert param.default is None, (flag, param.default)  # no stated value that the search overrides
