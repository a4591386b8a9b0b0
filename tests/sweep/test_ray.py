"""``--executor ray`` on a real local Ray instance (2 CPUs) gives the rows the local executor gives, and
streams its partitions into the same kind of store. Skipped where the ``ray`` extra is not installed."""

import json
import sqlite3
import time

import pytest

from tests.sweep.helpers import COLLECTIVE, invoke, same_rows, sweep_json, write

pytest.importorskip("ray")

# 8 points over two commands' worth of options: collective sizes x nodes x ops
SPEC = COLLECTIVE.replace("nodes = [2, 4]", "nodes = [2, 4, 8, 16]")


def test_ray_gives_the_rows_of_the_local_executor(tmp_path):
    spec, store = str(write(tmp_path, SPEC)), tmp_path / "ray.db"
    start = time.perf_counter()
    local = sweep_json(spec, "--workers", "1")
    local_s = time.perf_counter() - start
    start = time.perf_counter()
    result = invoke(
        "sweep", spec, "--executor", "ray", "--workers", "2", "--partition-size", "2", "--store", str(store)
    )
    ray_s = time.perf_counter() - start
    assert result.exit_code == 0, result.output
    assert "8 points, 0 from the store, 8 computed in 4 partitions" in result.stderr
    shown = invoke("sweep", "show", str(store), "--json")
    assert same_rows(json.loads(shown.stdout)["rows"]) == same_rows(local)
    with sqlite3.connect(store) as db:
        assert db.execute("SELECT count(DISTINCT partition), count(*) FROM points").fetchone() == (4, 8)
        assert db.execute("SELECT executor, workers FROM runs").fetchall() == [("ray", 2)]
    print(f"8 points: local 1 worker {local_s:.1f} s, ray 2 CPUs {ray_s:.1f} s (including starting Ray)")
