"""Output that is not a terminal (a pipe, a file; typer's test runner) is never wrapped, whatever $COLUMNS
says: a table's title, caption and cells each stay on one line, so grep and scripts read them."""

import shlex

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

# (command, texts that must each be whole on one line: titles, captions, long cells)
CASES = [
    (
        "train llama3-70b --instance p5.48xlarge --nodes 16 --tp 8 --pp 2",
        ["memory per device (capacity 80 GiB)", "bottleneck: compute (backward pass)"],
    ),
    (
        "transport datapath --instance p4d.24xlarge --message 4K",
        [
            "p4d.24xlarge (nitro-v3; GPUDirect RDMA): one 4 KiB message",
            "per NIC; crossover = message size at which one message reaches 90% of line rate",
            "libfabric post (no system call)",
        ],
    ),
    (
        "storage checkpoint llama3.1-405b --nodes 2048 --storage fsx:PERSISTENT_2-1000:100800GiB:efa",
        ["bounds (the lowest binds)", "what training waits for, by mode", "layout 1 to 100 MiB, 8 to 10 GiB"],
    ),
    ("reliability --nodes 2048 --work 54d", ["sensitivity (interval chosen again unless given)"]),
]


def _run(command: str, columns: str | None) -> str:
    env = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": columns}
    result = CliRunner().invoke(app, shlex.split(command), env=env)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize("command,whole", CASES, ids=[c for c, _ in CASES])
def test_piped_tables_are_not_wrapped_even_with_a_narrow_columns(command: str, whole: list[str]) -> None:
    narrow = _run(command, "30")
    assert narrow == _run(command, None), "$COLUMNS changes output that is not a terminal"
    lines = narrow.splitlines()
    for text in whole:
        assert any(text in line for line in lines), f"`clustersim {command}` splits {text!r}:\n{narrow}"
    table_lines = [line for line in lines if line[:1] in "┏┃┡│└"]
    assert max(map(len, lines)) > 30 and all(line[-1:] in "┓┃┩│┘" for line in table_lines)
