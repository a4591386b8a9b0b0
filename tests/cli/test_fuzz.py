"""A few hundred generated command lines and malformed files through the CLI (benchmarks/fuzz_cli.py runs
10,000): no traceback, no non-finite number in any output, exit code 0 only with a well-defined answer,
every refusal one line on stderr."""

import importlib.util
import sys
from pathlib import Path

FUZZ = Path(__file__).resolve().parents[2] / "benchmarks" / "fuzz_cli.py"
EXAMPLES = 300


def _fuzz_module():
    spec = importlib.util.spec_from_file_location("fuzz_cli", FUZZ)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_generated_command_lines_are_answered_well_or_refused_in_one_line():
    fuzz = _fuzz_module()
    tally = fuzz.run_examples(EXAMPLES)  # derandomized: the same examples on every run
    report = "\n".join(f"{kind}:\n  " + "\n  ".join(lines) for kind, lines in tally.problems.items())
    assert tally.failures == 0, report
    counts = tally.counts
    assert counts["examples"] == EXAMPLES
    # both paths exercised; the share answered depends on hypothesis's derandomized draws, which change with its
    # version (27 of 300 with 6.170, at least 30 with the versions before)
    assert counts["exit_0"] >= EXAMPLES // 20 and counts["refused"] >= EXAMPLES // 2
