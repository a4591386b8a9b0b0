"""What the main commands print is labelled in words: no field name with its unit suffix leaks into a label
(``time s``, ``cost usd``, ``memory_required_bytes``)."""

import re
import shlex

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

COMMANDS = [
    "train llama3-70b --instance p5.48xlarge --nodes 16 --tp 8 --pp 2",
    "train llama3-70b --instance p5.48xlarge --nodes 16 --tp 8 --pp 2 --compare p5en.48xlarge",
    "serve llama2-70b --instance p5.48xlarge --tp 8",
    "serve llama2-70b --instance p5.48xlarge --tp 8 --compare p5en.48xlarge",
    "collective all_reduce --instance p5.48xlarge --nodes 2 --min 1M --max 4M",
    "storage checkpoint llama3-8b --nodes 16 --storage fsx:PERSISTENT_2-1000:4800GiB:efa",
    "reliability --nodes 128 --work 10d",
    "transport datapath --instance p5.48xlarge --message 4K",
    "fabric compare --instance p5.48xlarge --nodes 4 --collective all_reduce --size 64M",
]

SUFFIXES = r"(s|ms|us|bytes|bits|usd|kwh|wh|per s|per bytes)"
# a snake_case name with a unit suffix, or one with its underscores turned into spaces in a table cell
LEAKS = [
    re.compile(r"\b[a-z]+(?:_[a-z]+)*_(?:s|bytes|bits|usd|kwh|per_s)\b"),
    re.compile(r"[│|] *[a-z]+(?: [a-z]+)* " + SUFFIXES + r" *[│|]"),
]


@pytest.mark.parametrize("command", COMMANDS)
def test_no_field_name_leaks_into_a_label(command: str) -> None:
    result = CliRunner().invoke(app, shlex.split(command), env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    leaks = [line.strip() for line in result.output.splitlines() if any(p.search(line) for p in LEAKS)]
    assert not leaks, f"`clustersim {command}` labels with field names:\n" + "\n".join(leaks)
