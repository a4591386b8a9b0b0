"""Start-up stays light: the command modules load typer, the standard library and the light enums
only; numpy, pydantic and rich load when a command runs (timings: benchmarks/bench_startup.py)."""

import subprocess
import sys

HEAVY = ("numpy", "pydantic", "rich", "tomli_w", "matplotlib")
CHECK = """
import sys
from clustersim.cli.app import main
sys.argv = ["clustersim", *{args!r}]
try:
    main()
except SystemExit:
    pass
print(sorted({{name.split(".")[0] for name in sys.modules}} & set({heavy!r})), file=sys.stderr)
"""


def loaded(*args: str) -> str:
    code = CHECK.format(args=list(args), heavy=HEAVY)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    return result.stderr.strip().splitlines()[-1]


def test_help_loads_no_heavy_module():
    assert loaded("--help") == "[]"
    assert loaded("train", "--help") == "[]"
    assert loaded("hw", "list", "--help") == "[]"
