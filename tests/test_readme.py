"""The README's examples run as written, and every number they quote is what they print today.

Three kinds of example are checked:

- a ```console block: each ``$ clustersim ...`` line is run in-process (typer's CliRunner) and every
  number of the lines quoted under it must appear, in order, in what the command prints now (new
  numbers in between, such as an interval added to a line, are allowed);
- a ```python block: it runs; where it ends with a ``# expected:`` comment, the comment lines after it
  are the quoted output and are compared in the same way;
- a number in the prose: ``PROSE`` names the command beside it in the README and the text quoted.

A number matches within its printed precision: ``56.4`` quotes ``56.37``, ``1,157.8`` quotes ``1157.83``.
Blocks too slow for the suite are listed in ``NOT_RUN`` with the reason (none is skipped silently).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text(encoding="utf-8")

# commands of ```console blocks that the suite does not run, each with its reason; CLUSTERSIM_README_ALL=1 runs them
NOT_RUN: dict[str, str] = {
    "clustersim fabric compare --instance p5.48xlarge --nodes 128 --collective alltoall --size 1G --seeds 3 --ideal": (
        "simulates 127 all-to-all rounds over 1,024 GPUs 8 times (ECMP and flowlets over 3 seeds): 25-100 s"
    ),
}
RUN_ALL = os.environ.get("CLUSTERSIM_README_ALL") == "1"


_STEP_128 = (
    "clustersim fabric step llama3-70b --instance p5.48xlarge --nodes 128 --fabric-hosts 512 --tp 8 --pp 4"
    " --routing ecmp --placement random"
)
# prose that gives other options for a command shown just before it: the whole command they make
PROSE_BASE = {
    "--storage fsx:PERSISTENT_2-125:100800GiB": (
        "clustersim train llama3.1-405b --instance p5.48xlarge --nodes 2048 --tp 8 --pp 16 --uneven-stages"
        " --recompute full --tokens 15.6T --global-batch 2048 --storage fsx:PERSISTENT_2-125:100800GiB"
    ),
    "--framework deepspeed --zero 1 --recompute full": (
        "clustersim fabric step mixtral-8x7b --instance p5.48xlarge --nodes 8 --tp 8 --pp 1 --ep 4"
        " --framework deepspeed --zero 1 --recompute full --ideal"
    ),
}
# numbers in the prose: (the command shown beside them in the README, the quoted texts whose numbers it prints)
PROSE: list[tuple[str, list[str]]] = [
    (
        "clustersim transport compare --instance p5.48xlarge --background 0.9 --paths 16 --lossy --rc-recovery"
        " go-back-n --rc-timeout 14",
        [
            "it sends 13.76 Gbit/s (13.70-14.01) against RC's 3.70 (2.31-5.15; one hashed path)",
            "TCP's 8.18 (8.11-8.20)",
        ],
    ),
    (
        "clustersim train llama3-70b --instance p5en.48xlarge --nodes 16 --tp 8 --pp 2 --tokens 15T",
        ["`step 26.9 s (80%: 23-31.5 s)`"],
    ),
    (
        "clustersim collective all_reduce --instance p6e-gb200.36xlarge --nodes 36 --min 64M --max 4G --factor 4",
        ["busbw 580 GB/s"],
    ),
    (
        "clustersim storage checkpoint llama3-8b --nodes 2048"
        " --storage fsx:PERSISTENT_2-1000:100800GiB:efa:mdiops=1500",
        ["16,384 per-rank files from 2,048 p5 instances take 10.9 s"],
    ),
    (
        "clustersim train llama3.1-405b --instance p5.48xlarge --nodes 2048 --tp 8 --pp 16 --uneven-stages"
        " --recompute full --tokens 15.6T --global-batch 2048 --storage fsx:PERSISTENT_2-1000:100800GiB:efa",
        ["127.5 days failure-free", "| sync | 56.4 s (file system) | 18.1 min | 82.8% |"],
    ),
    (_STEP_128 + " --seed 1 --ideal", ["--placement random --seed 1 --ideal`: 264 ms"]),  # 352 ms at seeds 0, 2
    (_STEP_128 + " --oversubscription 2 --seed 2 --ideal", ["--seed 2 --ideal`: 440 ms"]),  # 352 at 0, 1
    (
        "clustersim fabric step mixtral-8x7b --instance p5.48xlarge --nodes 8 --tp 8 --pp 1 --ep 4 --etp 8"
        " --precision fp8 --ideal",
        ["one dispatch takes 0.48 ms and one combine 0.94 ms"],
    ),
    (
        "clustersim fabric pattern --pattern shift --shift 32 --nodes 128 --fabric-hosts 512 --size 64MiB"
        " --routing ecmp",
        ["takes 8.05 ms with ECMP against a bound of 1.34 ms (slowdown 6.0, p50 4.03 ms;"],
    ),
    (
        "clustersim fabric pattern --pattern incast --senders 127 --nodes 128 --fabric-hosts 512 --size 64MiB",
        ["= 170.5 ms (`clustersim"],
    ),
    (
        "--storage fsx:PERSISTENT_2-125:100800GiB",  # in place of the 405B table's --storage
        ["25.17 min of work between saves, 1.879 min stall each, goodput 76.6%, 127.51 d failure-free become 166.55"],
    ),
    (
        "--framework deepspeed --zero 1 --recompute full",  # in place of --precision fp8 in the command above
        ["1.01 ms each, with `--framework deepspeed"],
    ),
]

_NUMBER = re.compile(r"(?<![\w.])(-?)(\d{1,3}(?:,\d{3})+|\d+)(\.\d+)?(e[-+]?\d+)?(?![\w])", re.IGNORECASE)


@dataclass(frozen=True)
class Number:
    text: str
    value: float
    tolerance: float


@dataclass(frozen=True)
class Example:
    line: int  # README line of the command (or of the block)
    command: str  # the `clustersim ...` command line, or the Python source
    quoted: tuple[tuple[int, str], ...]  # (README line, text) of each quoted output line


def numbers(text: str) -> list[Number]:
    """The numbers of ``text`` with the tolerance their printed precision gives (half a unit of the last digit)."""
    found = []
    for match in _NUMBER.finditer(text):
        sign, whole, fraction, exponent = match.groups()
        if sign and match.start() > 0 and text[match.start() - 1].isdigit():
            sign = ""  # a range (40.3-80.4), not a negative number
        digits = len(fraction) - 1 if fraction else 0
        scale = 10.0 ** int(exponent[1:]) if exponent else 1.0
        value = float(sign + whole.replace(",", "") + (fraction or "") + (exponent or ""))
        found.append(Number(match.group(0), value, 0.5 * 10.0**-digits * scale * (1 + 1e-9)))
    return found


def _blocks(language: str) -> list[tuple[int, list[str]]]:
    """(README line of the first line inside, lines) of every fenced block in ``language``."""
    blocks, lines, inside, start = [], TEXT.splitlines(), None, 0
    for number, line in enumerate(lines, start=1):
        if inside is None and line.strip() == f"```{language}":
            inside, start = [], number + 1
        elif inside is not None and line.strip() == "```":
            blocks.append((start, inside))
            inside = None
        elif inside is not None:
            inside.append(line)
    return blocks


def console_examples() -> list[Example]:
    examples: list[Example] = []
    for start, lines in _blocks("console"):
        for offset, line in enumerate(lines):
            if line.startswith("$ "):
                examples.append(Example(start + offset, line[2:].strip(), ()))
            elif examples and examples[-1].line >= start:
                last = examples[-1]
                examples[-1] = Example(last.line, last.command, (*last.quoted, (start + offset, line)))
    return examples


def python_examples() -> list[Example]:
    examples = []
    for start, lines in _blocks("python"):
        marker = next((i for i, line in enumerate(lines) if line.strip() == "# expected:"), len(lines))
        quoted = tuple((start + i, line.strip()[1:].strip()) for i, line in enumerate(lines) if i > marker)
        examples.append(Example(start, "\n".join(lines[:marker]), quoted))
    return examples


def run_cli(command: str) -> str:
    args = shlex.split(command)
    assert args[0] == "clustersim", f"a README command runs clustersim: {command}"
    result = CliRunner().invoke(app, args[1:], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""})
    assert result.exit_code == 0, f"`{command}` exits {result.exit_code}: {result.output[-2000:]}"
    return result.output


def drift(example: Example, printed: str, *, in_order: bool = True) -> list[str]:
    """Each quoted number not found (in order, unless ``in_order`` is false) in ``printed``: where it is
    quoted and what is printed near where it was looked for."""
    actual, at, problems = numbers(printed), 0, []
    for line, text in example.quoted:
        for quoted in numbers(text):
            start = at if in_order else 0
            hit = next(
                (i for i in range(start, len(actual)) if abs(actual[i].value - quoted.value) <= quoted.tolerance), None
            )
            if hit is None:
                near = " ".join(n.text for n in actual[start : start + 12])
                problems.append(f"README.md:{line}: quoted {quoted.text} in {text.strip()!r}; printed next: {near}")
            elif in_order:
                at = hit + 1
    return problems


def _id(example: Example) -> str:
    return f"line{example.line}"


@pytest.mark.parametrize("example", console_examples(), ids=_id)
def test_console_example_prints_the_numbers_quoted(example: Example) -> None:
    if example.command in NOT_RUN and not RUN_ALL:
        pytest.skip(f"not run: {NOT_RUN[example.command]}")
    assert example.quoted, f"README.md:{example.line}: `$ {example.command}` quotes no output"
    problems = drift(example, run_cli(example.command))
    assert not problems, f"`{example.command}` (README.md:{example.line}) drifted:\n" + "\n".join(problems)


@pytest.mark.parametrize("example", python_examples(), ids=_id)
def test_python_example_runs_and_prints_the_numbers_quoted(example: Example, monkeypatch) -> None:
    monkeypatch.setenv("CLUSTERSIM_CATALOG", "")
    monkeypatch.setenv("CLUSTERSIM_MODELS", "")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example.command, str(README), "exec"), {})
    problems = drift(example, out.getvalue())
    assert not problems, f"the Python example at README.md:{example.line} drifted:\n" + "\n".join(problems)


@pytest.mark.parametrize("command,quotes", PROSE, ids=[c for c, _ in PROSE])
def test_prose_numbers_come_from_the_command_beside_them(command: str, quotes: list[str]) -> None:
    if command.startswith(_STEP_128) and not RUN_ALL:
        pytest.skip("not run: one step of llama3-70b's groups on 1,024 GPUs flow by flow takes 20-60 s")
    flat = " ".join(TEXT.split())
    assert command in flat, f"README.md shows `{command}`"
    if command.startswith("--"):  # options in place of the last ones of the command before (PROSE_BASE)
        command = PROSE_BASE[command]
    for quote in quotes:
        assert quote in flat, f"README.md quotes {quote!r} beside `{command}`"
    where = re.search(r"\s+".join(map(re.escape, quotes[0].split())), TEXT)
    line = TEXT[: where.start()].count("\n") + 1 if where else 0
    example = Example(line, command, tuple((line, q) for q in quotes))
    problems = drift(example, run_cli(command), in_order=False)
    assert not problems, f"`{command}` drifted:\n" + "\n".join(problems)


def test_every_quoted_output_is_checked() -> None:
    """Output quoted as a plain ``` block beginning with `$ ` would escape the test: it must be ```console."""
    plain = [start for start, lines in _blocks("") if lines and lines[0].startswith("$ ")]
    assert not plain, f"README.md lines {plain}: quoted output in a plain block; mark it ```console"
    assert console_examples() and any(e.quoted for e in python_examples())


def test_numbers_parse_with_their_precision() -> None:
    parsed = numbers("step 56.91 s (80%: 40.3-80.4 s), 1,157.8 days, -0.00%, 1.26e-05, p5.48xlarge")
    assert [n.value for n in parsed] == [56.91, 80, 40.3, 80.4, 1157.8, -0.0, 1.26e-05]
    assert math.isclose(parsed[0].tolerance, 0.005, rel_tol=1e-6)
    assert math.isclose(parsed[-1].tolerance, 0.005e-05, rel_tol=1e-6)
