"""CI opens the reports in a real browser: ``.ci/run`` installs Debian's chromium where it can and runs the
README's test command with ``CLUSTERSIM_REQUIRE_BROWSER=1``, under which a missing browser fails the browser
tests (checked here by running them with no chromium on PATH)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_installs_the_browser_and_requires_it():
    script = (ROOT / ".ci" / "run").read_text()
    assert "apt-get install -y -qq chromium" in script and "/usr/bin/chromium" in script
    last = [line for line in script.splitlines() if line.strip()][-1]
    assert "CLUSTERSIM_REQUIRE_BROWSER=1 .venv/bin/python -m pytest" in last


def test_a_missing_browser_fails_when_required(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path), "CLUSTERSIM_REQUIRE_BROWSER": "1"}
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "tests/report/test_report_browser.py",
    ]
    ran = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 1, (ran.returncode, ran.stdout[-3000:], ran.stderr[-2000:])
    assert "CLUSTERSIM_REQUIRE_BROWSER is set but there is no chromium on PATH" in ran.stdout
    assert ran.stdout.count("ERROR tests/report/test_report_browser.py::") == 5 and "skipped" not in ran.stdout
    env.pop("CLUSTERSIM_REQUIRE_BROWSER")
    ran = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 0 and ran.stdout.startswith("sssss"), ran.stdout[-2000:]
