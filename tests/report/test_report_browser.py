"""The reports opened in headless Chromium: no console message, every figure drawn as SVG, and the numbers the
page embeds (read back from the DOM the browser built) equal to the CLI's ``--json``; a screenshot of each page
is kept (in the test's temporary folder, or in ``$CLUSTERSIM_REPORT_SCREENSHOTS`` when set).

Needs a ``chromium`` binary on PATH (Debian: ``apt-get install chromium``). Without one these tests are skipped,
unless ``CLUSTERSIM_REQUIRE_BROWSER`` is set (``.ci/run`` sets it after installing the browser): then they fail,
so CI never passes without having opened the pages.
"""

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.report.conftest import embedded

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
REQUIRE_ENV = "CLUSTERSIM_REQUIRE_BROWSER"
MISSING = "no chromium on PATH (apt-get install chromium) to open the reports"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(CHROMIUM is None and not os.environ.get(REQUIRE_ENV), reason=MISSING),
]


@pytest.fixture(scope="session", autouse=True)
def browser_present() -> None:
    """With ``CLUSTERSIM_REQUIRE_BROWSER`` set, a missing browser fails each test, saying what to install
    (session-scoped and automatic: checked before the reports are written)."""
    if CHROMIUM is None:
        pytest.fail(f"{REQUIRE_ENV} is set but there is {MISSING}", pytrace=False)


FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--virtual-time-budget=10000")
TIMEOUT_S = 120


def chromium(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with its console logged on stderr."""
    command = [str(CHROMIUM), *FLAGS, "--enable-logging=stderr", "--v=0", f"--user-data-dir={cwd / 'profile'}", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT_S, cwd=cwd, check=False)


@pytest.mark.parametrize("kind", ["training", "fabric", "plan", "sweep", "validation"])
def test_the_browser_draws_every_figure(reports, kind, tmp_path):
    path, cli = reports[kind]
    opened = chromium("--dump-dom", path.as_uri(), cwd=tmp_path)
    assert opened.returncode == 0, opened.stderr[-2000:]
    console = [line for line in opened.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], f"{kind}: console messages: {console}"
    dom = opened.stdout
    wanted = [s["id"] for s in embedded(path)["sections"] if s["figure"]]
    assert wanted, kind
    for section in wanted:
        block = re.search(rf'id="figure-{section}"(.*?)<div class="numbers">', dom, re.S)
        assert block and "js-plotly-plot" in dom and '<svg class="main-svg"' in block.group(1), f"{kind}: {section}"
        assert re.search(r'class="(point|bars|trace|scatterlayer)', block.group(1)), f"{kind}: {section} is empty"
    dumped = tmp_path / "dom.html"
    dumped.write_text(dom)
    data = embedded(dumped)
    for command, payload in cli.items():
        assert data["cli"][command] == payload
    shots = Path(os.environ.get("CLUSTERSIM_REPORT_SCREENSHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    shot = shots / f"report-{kind}.png"
    taken = chromium("--window-size=1280,2000", f"--screenshot={shot}", path.as_uri(), cwd=tmp_path)
    assert taken.returncode == 0 and shot.stat().st_size > 10_000, taken.stderr[-2000:]
