"""A sweep killed mid-run (SIGKILL, in a subprocess, on a pool of 2 workers) leaves whole partitions only and
no worker behind, and ``--resume`` computes exactly the points that were not committed: no row lost, none
duplicated, none recomputed."""

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.sweep.helpers import ENV, write

# 12 points of packet-level simulation, a few tenths of a second each; 2 points a partition
SPEC = """
command = "transport compare"
[options]
message = "1M"
[grid]
messages = [20, 30, 40]
paths = [2, 4, 8, 16]
"""
POINTS, PARTITION = 12, 2
CLUSTERSIM = str(Path(sys.executable).with_name("clustersim"))


def committed(store: Path) -> list[tuple[str, int, float]]:
    """(id, run, finished time) of each row in the store, or none while it is not made yet."""
    if not store.exists():
        return []
    try:
        with sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=5) as db:
            return db.execute("SELECT id, run, finished_unix_s FROM points ORDER BY seq").fetchall()
    except sqlite3.OperationalError:  # the tables are not made yet
        return []


def children(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux's /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not count)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from Linux's /proc")
def test_a_killed_sweep_resumes_without_losing_duplicating_or_recomputing_a_row(tmp_path):
    spec, store = write(tmp_path, SPEC), tmp_path / "sweep.db"
    args = [CLUSTERSIM, "sweep", str(spec), "--store", str(store), "--partition-size", str(PARTITION)]
    env = {**os.environ, **ENV}
    process = subprocess.Popen([*args, "--workers", "2"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while len(committed(store)) < 2 * PARTITION and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    workers = children(process.pid)
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=10)
    before = committed(store)
    assert 2 * PARTITION <= len(before) < POINTS, "the sweep was to be killed part way"
    assert len(before) % PARTITION == 0, "a partition is committed whole or not at all"
    assert workers, "the pool's workers were running"
    deadline = time.monotonic() + 10
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(alive(pid) for pid in workers), "a pool worker outlived the killed sweep"

    resumed = subprocess.run(
        [*args, "--resume", "--workers", "1"], env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    assert f"{POINTS} points, {len(before)} from the store, {POINTS - len(before)} computed" in resumed.stderr
    after = committed(store)
    assert len(after) == len({row[0] for row in after}) == POINTS
    assert [row for row in after if row[1] == 1] == before  # the rows of the first run, untouched
    assert sum(row[1] == 2 for row in after) == POINTS - len(before)
    print(f"killed after {len(before)} of {POINTS} points ({len(before) // PARTITION} partitions); resumed the rest")
