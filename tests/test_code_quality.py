"""ruff and mypy are part of the test suite: the code stays lint-clean, formatted and type-checked."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, check=False)


@pytest.mark.skipif(shutil.which("ruff") is None and _run("ruff", "--version").returncode != 0, reason="ruff missing")
def test_ruff_is_clean():
    result = _run("ruff", "check", "src", "tests", "benchmarks")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.skipif(shutil.which("ruff") is None and _run("ruff", "--version").returncode != 0, reason="ruff missing")
def test_ruff_format_leaves_the_code_and_the_readme_examples_as_they_are():
    result = _run("ruff", "format", "--check", "src", "tests", "benchmarks", "README.md")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean():
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
