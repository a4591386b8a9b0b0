"""``clustersim sweep``: each row is what the command prints with --json, bad specs are refused before anything
runs, the store keeps the rows (and refuses another sweep), ``sweep show`` prints and exports them."""

import importlib.util
import json
import sqlite3
from pathlib import Path

import pytest

from tests.sweep.helpers import COLLECTIVE, invoke, same_rows, sweep_json, write

# (spec, the command line of its first point): fast commands, the train layout fixed
CASES = {
    "collective": (COLLECTIVE, ["collective", "all_reduce", "--instance", "p5.48xlarge", "--min", "1M", "--max", "4M"]),
    "storage checkpoint": (
        'command = "storage checkpoint"\n[options]\nmodel = "llama3-8b"\n[grid]\nnodes = [2, 8]\n',
        ["storage", "checkpoint", "llama3-8b"],
    ),
    "reliability": (
        'command = "reliability"\n[options]\nruns = 100\n[grid]\nwork = ["1d", "3d"]\nnodes = [64]\n',
        ["reliability", "--runs", "100", "--nodes", "64"],
    ),
    "train": (
        'command = "train"\n[options]\nmodel = "llama3-8b"\ninstance = "p5.48xlarge"\n[grid]\nnodes = [1, 2]\n'
        "[[points]]\ntp = 8\npp = 1\n[[points]]\ntp = 4\npp = 2\n",
        ["train", "llama3-8b", "--instance", "p5.48xlarge", "--tp", "8", "--pp", "1"],
    ),
}
FIRST_POINT_EXTRA = {
    "collective": ["--nodes", "2"],
    "storage checkpoint": ["--nodes", "2"],
    "reliability": ["--work", "1d"],
    "train": ["--nodes", "1"],
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_row_is_what_the_command_prints_with_json(tmp_path, case):
    spec, first = CASES[case]
    rows = sweep_json(str(write(tmp_path, spec)), "--workers", "1")
    own = invoke(*first, *FIRST_POINT_EXTRA[case], "--json")
    assert own.exit_code == 0, own.output
    assert rows[0]["result"] == json.loads(own.stdout)
    assert all(row["error"] is None and row["result"] for row in rows)
    assert len({row["id"] for row in rows}) == len(rows) >= 2


def test_every_collective_row_matches_its_own_command(tmp_path):
    rows = sweep_json(str(write(tmp_path, COLLECTIVE)), "--workers", "1")
    assert [(r["inputs"]["op"], r["inputs"]["nodes"]) for r in rows] == [
        ("all_reduce", 2),
        ("all_reduce", 4),
        ("all_gather", 2),
        ("all_gather", 4),
    ]
    for row in rows:
        args = ["collective", row["inputs"]["op"], "--nodes", str(row["inputs"]["nodes"]), "--min", "1M", "--max", "4M"]
        assert row["result"] == json.loads(invoke(*args, "--json").stdout)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        (
            'command = "collective"\n[grid]\nop = ["all_reduce"]\nnodez = [2]\n',
            "sweep spec: 'nodez' is not an option of collective (did you mean 'nodes'?); valid: op, instance, nodes,",
        ),
        (
            'command = "collective"\n[grid]\nop = ["all_reduce"]\nnodes = [2, 0]\n',
            "sweep spec: nodes = 0: Invalid value for '--nodes'",
        ),
        (
            'command = "collective"\n[grid]\nop = ["all_reduce"]\nalgo = ["ring", "fast"]\n',
            "sweep spec: algo = 'fast': Invalid value for '--algo': 'fast' is not one of 'ring', 'tree'",
        ),
        ('command = "collective"\n[grid]\nnodes = [2]\n', "sweep spec: 'op' is required by the command"),
        (
            'command = "train"\n[options]\nmodel = "llama3-8b"\n[[points]]\ntp = 8\n[[points]]\ntp = 0\n',
            "sweep spec: tp = 0 (points[1]): Invalid value for '--tp'",
        ),
        ('command = "fabric"\n[grid]\nnodes = [2]\n', "command: 'fabric' needs a subcommand (valid: fabric compare,"),
        ('command = "hw"\n[grid]\nkind = ["x"]\n', "command: sweep has no command 'hw' (valid: train, serve,"),
        ('command = "collective"\n[grid]\nop = ["all_reduce"]\njson = [true]\n', "a sweep gives --json itself"),
        ('command = "train"\n[grid]\nmodel = ["llama3-8b"]\nsp = ["yes"]\n', "--sp is a flag; give true or false"),
        ('command = "collective"\n[grid]\nop = ["all_reduce"]\nnodes = [[2, 4]]\n', "--nodes takes one value"),
    ],
)
def test_a_bad_key_or_value_is_refused_before_anything_runs(tmp_path, spec, named):
    store = tmp_path / "sweep.db"
    result = invoke("sweep", str(write(tmp_path, spec)), "--store", str(store))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error: ")
    assert named in result.stderr
    assert not store.exists()


def test_a_refusal_with_json_names_the_key_and_value(tmp_path):
    spec = write(tmp_path, 'command = "collective"\n[grid]\nop = ["all_reduce"]\nalgo = ["ring", "fast"]\n')
    result = invoke("sweep", str(spec), "--json")
    assert result.exit_code == 2
    error = json.loads(result.stderr)
    assert (error["field"], error["value"]) == ("algo", "fast")


def test_a_point_the_command_refuses_is_an_error_row(tmp_path):
    spec = 'command = "collective"\n[options]\nmin = "1M"\nmax = "1M"\n[grid]\nop = ["all_reduce", "bogus"]\n'
    rows = sweep_json(str(write(tmp_path, spec)), "--workers", "1")
    assert rows[0]["error"] is None and rows[0]["result"]["op"] == "all_reduce"
    own = invoke("collective", "bogus", "--min", "1M", "--max", "1M", "--json")
    assert rows[1]["result"] is None
    assert rows[1]["error"] == {**json.loads(own.stderr), "exit_code": 2}


def test_the_store_keeps_the_rows_and_refuses_another_sweep(tmp_path):
    spec, store = write(tmp_path, COLLECTIVE), tmp_path / "sweep.db"
    rows = sweep_json(str(spec), "--store", str(store), "--workers", "1")
    with sqlite3.connect(store) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        assert db.execute("SELECT count(*), count(DISTINCT id), min(run), max(run) FROM points").fetchone() == (
            4,
            4,
            1,
            1,
        )
        meta = dict(db.execute("SELECT key, value FROM meta"))
    assert meta["command"] == "collective" and meta["points"] == "4" and meta["spec"] == spec.read_text()
    shown = invoke("sweep", "show", str(store), "--json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["rows"] == rows

    again = invoke("sweep", str(spec), "--store", str(store))
    assert again.exit_code == 2 and "already holds a sweep (4 of 4 points); give --resume" in again.stderr

    resumed = invoke("sweep", str(spec), "--store", str(store), "--resume", "--json")
    assert resumed.exit_code == 0 and "0 computed" in resumed.stderr
    assert json.loads(resumed.stdout)["rows"] == rows  # nothing recomputed: the same wall times too

    changed = write(tmp_path, COLLECTIVE.replace("nodes = [2, 4]", "nodes = [2, 8]"), "changed.toml")
    refused = invoke("sweep", str(changed), "--store", str(store), "--resume")
    assert refused.exit_code == 2
    assert "the spec differs from the one" in refused.stderr
    assert "grid.nodes: store has [2, 4], spec has [2, 8]" in refused.stderr

    missing = invoke("sweep", str(spec), "--store", str(tmp_path / "none.db"), "--resume")
    assert missing.exit_code == 2 and "holds no sweep to resume" in missing.stderr


def test_show_prints_a_table_and_exports_csv_and_json(tmp_path):
    store = tmp_path / "sweep.db"
    rows = sweep_json(str(write(tmp_path, COLLECTIVE)), "--store", str(store), "--workers", "1")
    table = invoke("sweep", "show", str(store))
    assert table.exit_code == 0
    assert "sweep: clustersim collective, 4 of 4 points" in table.stdout and "all_gather" in table.stdout

    csv_path = tmp_path / "rows.csv"
    assert invoke("sweep", "show", str(store), "--output", str(csv_path)).exit_code == 0
    lines = csv_path.read_text().splitlines()
    header = lines[0].split(",")
    assert len(lines) == 5 and header[:4] == ["seq", "id", "status", "wall_s"]
    assert {"inputs.op", "inputs.nodes", "result.rows.0.busbw_GBps", "result.rows.2.busbw_GBps"} <= set(header)
    busbw = header.index("result.rows.0.busbw_GBps")
    assert [float(line.split(",")[busbw]) for line in lines[1:]] == [r["result"]["rows"][0]["busbw_GBps"] for r in rows]

    json_path = tmp_path / "rows.json"
    assert invoke("sweep", "show", str(store), "--format", "json", "--output", str(json_path)).exit_code == 0
    assert json.loads(json_path.read_text())["rows"] == rows

    odd = invoke("sweep", "show", str(store), "--output", str(tmp_path / "rows.txt"))
    assert odd.exit_code == 2 and "cannot tell the format from" in odd.stderr

    picked = invoke("sweep", "show", str(store), "--columns", "rows.1.busbw_GBps")
    assert picked.exit_code == 0 and "rows.1.busbw_GBps" in picked.stdout and "rows.0.time_us" not in picked.stdout
    bogus = invoke("sweep", "show", str(store), "--columns", "bogus")
    assert bogus.exit_code == 2 and "--columns: 'bogus' is not a result column (e.g. ranks," in bogus.stderr
    not_a_store = invoke("sweep", "show", str(csv_path))
    assert (
        not_a_store.exit_code == 2 and "STORE: " in not_a_store.stderr and "is not a sweep store" in not_a_store.stderr
    )


@pytest.mark.skipif(importlib.util.find_spec("pyarrow") is None, reason="pyarrow is not installed")
def test_show_exports_parquet(tmp_path):
    import pyarrow.parquet as pq

    store = tmp_path / "sweep.db"
    rows = sweep_json(str(write(tmp_path, COLLECTIVE)), "--store", str(store), "--workers", "1")
    path = tmp_path / "rows.parquet"
    assert invoke("sweep", "show", str(store), "--output", str(path)).exit_code == 0
    table = pq.read_table(path).to_pydict()
    assert table["id"] == [r["id"] for r in rows] and table["inputs.nodes"] == [2, 4, 2, 4]


def test_parquet_without_pyarrow_names_it(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pyarrow", None)
    store = tmp_path / "sweep.db"
    sweep_json(str(write(tmp_path, COLLECTIVE)), "--store", str(store), "--workers", "1")
    result = invoke("sweep", "show", str(store), "--output", str(tmp_path / "rows.parquet"))
    assert result.exit_code == 2 and "needs pyarrow, which is not installed: pip install pyarrow" in result.stderr


def test_ray_missing_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    result = invoke("sweep", str(write(tmp_path, COLLECTIVE)), "--executor", "ray")
    assert result.exit_code == 2
    assert result.stderr == "error: --executor ray needs Ray, which is not installed: pip install 'clustersim[ray]'\n"


def test_a_process_pool_gives_the_rows_one_process_gives(tmp_path):
    spec = str(write(tmp_path, COLLECTIVE))
    alone = sweep_json(spec, "--workers", "1")
    pooled = sweep_json(spec, "--workers", "2", "--partition-size", "1")
    assert same_rows(pooled) == same_rows(alone)


def test_sweep_show_needs_a_store(tmp_path: Path):
    result = invoke("sweep", "show", str(tmp_path / "none.db"))
    assert result.exit_code == 2 and "no sweep store at" in result.stderr
