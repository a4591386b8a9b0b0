"""The probe's CPU path end to end: gloo collectives across 2 forked ranks, GEMM, memory and storage, the
nccl-tests table it prints, the cases it writes, and clustersim calibrate reading those cases."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.cli.calibrate import COLLECTIVE_ENV_VAR
from clustersim.errors import ClusterSimError
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.probe.device import require_torch
from clustersim.validation.cases import read_all
from clustersim.validation.user_calibration import calibrate_user

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", COLLECTIVE_ENV_VAR: "", "COLUMNS": "200", "CLUSTERSIM_PROGRESS": "0"}
CATALOG = load_catalog(use_env=False)


@pytest.fixture(autouse=True)
def _not_under_torchrun(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


def test_missing_torch_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # what `import torch` meets where it is not installed
    with pytest.raises(ClusterSimError, match=r"^clustersim probe needs torch: pip install 'clustersim\[probe\]'$"):
        require_torch()
    result = runner.invoke(app, ["probe", "--what", "gemm"], env=ENV)
    assert result.exit_code == 2
    assert "pip install 'clustersim[probe]'" in result.output and len(result.output.strip().splitlines()) == 1


def test_cpu_probe_writes_cases_that_calibrate_reads(tmp_path: Path):
    pytest.importorskip("torch")
    cases_path = tmp_path / "cases.jsonl"
    args = ["probe", "--device", "cpu", "--what", "collectives", "--ranks", "2", "--sizes", "1M,2M",
            "--repeats", "3", "--warmup", "1", "-o", str(cases_path), "--accelerator", "h100-sxm"]  # fmt: skip
    text = runner.invoke(app, args, env=ENV)
    assert text.exit_code == 0, text.output
    table = tmp_path / "table.log"
    table.write_text("\n".join(line for line in text.output.splitlines() if line.startswith(("#", " "))))
    tables = read_nccl_tests(table)  # what it prints is nccl-tests' table, as clustersim ingest reads it
    assert [t.op for t in tables] == ["all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast"]
    assert all(len(t.rows) == 2 and len(t.ranks) == 2 for t in tables)
    assert "wrote 10 collective cases" in text.output

    cases = read_all([cases_path])
    assert len(cases) == 10
    assert {c.system.devices for c in cases if c.system} == {2}
    assert all(c.software and c.software.framework == "torch-distributed" for c in cases)
    result = calibrate_user(cases, CATALOG, max_iterations=1, folds=2)  # a short fit: the reading is tested
    assert sorted(result.case_ids) == sorted(c.id for c in cases)
    assert result.before_mape > 0 and result.after_mape <= result.before_mape + 1e-9

    others = ["probe", "--device", "cpu", "--what", "gemm,memory,storage", "--gemm-sizes", "32", "--dtypes", "fp32",
              "--buffer-bytes", "1MiB", "--path", str(tmp_path), "--writers", "2", "--file-bytes", "64KiB",
              "--repeats", "2", "--warmup", "0", "--json"]  # fmt: skip
    payload = runner.invoke(app, others, env=ENV)
    assert payload.exit_code == 0, payload.output
    data = json.loads(payload.output)
    assert data["device"]["kind"] == "cpu" and data["collectives"] == [] and data["cases"] == 0
    (gemm,) = data["gemm"]
    assert gemm["m"] == 32 and gemm["tflops_min"] <= gemm["tflops"] <= gemm["tflops_max"]
    assert gemm["peak_tflops"] is None and gemm["fraction_of_peak"] is None  # a CPU is not catalogued
    assert [m["name"] for m in data["memory"]] == ["copy", "triad"]
    assert [m["moved_bytes"] for m in data["memory"]] == [2 << 20, 3 << 20]  # STREAM's byte counts
    assert [s["name"] for s in data["storage"]] == ["write+fsync", "read"]
    assert data["storage"][0]["total_bytes"] == 2 * 65536
    assert list(tmp_path.glob("clustersim-probe-*")) == []  # the scratch files are removed


def test_cpu_timing_measures_the_work():
    torch = pytest.importorskip("torch")
    from clustersim.probe.timing import time_work

    stats = time_work(torch, "cpu", lambda: time.sleep(0.02), warmup=1, repeats=3)
    assert stats.min_s >= 0.02 and stats.median_s < 0.5


@pytest.mark.parametrize(
    ("args", "text"),
    [
        (["--what", "gemm,flops"], "--what 'flops': valid: gemm, memory, copy, collectives, storage"),
        (["--what", "collectives", "--sizes", "1M,0"], "--sizes '0': valid: a whole number of bytes >= 1"),
        (["--what", "gemm", "--gemm-sizes", "64,x"], "--gemm-sizes 'x': valid: whole numbers >= 1"),
        (["--what", "collectives", "--ranks", "1"], "--ranks 1: collectives need 2 or more ranks"),
        (["--what", "storage", "--path", "/proc/nonexistent-dir"], "--path /proc/nonexistent-dir: not a directory"),
        (["--device", "tpu"], "--device 'tpu': valid: cpu, cuda"),
        (["--what", "gemm", "--sizes", "1M"], "--sizes is for collectives, which --what gemm does not run"),
        (
            ["--what", "collectives", "-o", "x.jsonl", "--device", "cpu", "--sizes", "4K", "--repeats", "1"],
            "-o: a CPU run has no catalogued accelerator",
        ),
        (
            ["--what", "collectives", "-o", "x.jsonl", "--device", "cpu", "--instance", "p5.48xlarge"],
            "--instance p5.48xlarge has 8 devices; the cases of 2 local ranks",
        ),
        (
            ["--what", "collectives", "-o", "x.jsonl", "--device", "cpu", "--accelerator", "h100-sxm", "--nodes", "2"],
            "--nodes 2: local ranks run on this one server",
        ),
    ],
)
def test_bad_input_is_one_line(args, text):
    pytest.importorskip("torch")
    result = runner.invoke(app, ["probe", *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert text in result.output and len(result.output.strip().splitlines()) == 1
