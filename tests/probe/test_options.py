"""The probe's options: defaults per device, and bad input refused in one line naming the option;
the statistics every measurement reports; the catalog peak and the fraction achieved."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions
from clustersim.probe.device import Device
from clustersim.probe.gemm import GemmResult, catalog_peak
from clustersim.probe.memory import BandwidthResult
from clustersim.probe.options import ProbeOptions, parse_what, positive_bytes, resolve
from clustersim.probe.storage import check_directory
from clustersim.probe.timing import percentile, summarize

CATALOG = load_catalog(use_env=False)
CPU = Device("cpu", "CPU test", 1, "host", None, False, "2.13.0")
H100 = Device("cuda", "NVIDIA H100 80GB HBM3", 8, "host", CATALOG.accelerator("h100-sxm"), True, "2.13.0")
ONE_GPU = Device("cuda", "NVIDIA H100 80GB HBM3", 1, "host", CATALOG.accelerator("h100-sxm"), True, "2.13.0")


@pytest.fixture(autouse=True)
def _not_under_torchrun(monkeypatch):
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


@given(st.lists(st.floats(1e-9, 1e3), min_size=1, max_size=50))
def test_stats_are_ordered(samples):
    stats = summarize(samples, warmup=2)
    assert stats.min_s <= stats.p10_s <= stats.median_s <= stats.p90_s <= stats.max_s
    rate = stats.rate(1.0)
    assert rate["min"] <= rate["p10"] <= rate["median"] <= rate["p90"] <= rate["max"]
    assert (stats.repeats, stats.warmup) == (len(samples), 2)


def test_percentile_interpolates():
    assert percentile([1, 2, 3, 4, 5], 0.5) == 3
    assert percentile([0, 10], 0.1) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        summarize([0.0], 0)


def test_defaults_per_device(tmp_path: Path):
    cpu = resolve(ProbeOptions(), CPU)
    assert cpu.what == ("gemm", "memory", "collectives")
    assert cpu.skipped["copy"].startswith("not applicable on the CPU")
    assert "no --path" in cpu.skipped["storage"]
    assert cpu.ranks == 2 and cpu.dtypes == ("bf16", "fp16", "fp32")
    gpu = resolve(ProbeOptions(path=tmp_path), H100)
    assert gpu.what == ("gemm", "memory", "copy", "collectives", "storage")
    assert gpu.ranks == 8 and gpu.dtypes == ("bf16", "fp16", "fp32", "fp8")
    single = resolve(ProbeOptions(), ONE_GPU)
    assert "collectives" not in single.what and "2 or more ranks" in single.skipped["collectives"]
    assert resolve(ProbeOptions(what=("copy",), buffer_bytes="1M"), CPU).skipped["copy"].startswith("not applicable")


def test_sizes_as_nccl_tests_and_units_read_them():
    assert positive_bytes(["64K,1M", "2MiB", "1MB", "4096"], "--sizes") == (65536, 1 << 20, 2 << 20, 10**6, 4096)


@pytest.mark.parametrize(
    ("options", "device", "field", "text"),
    [
        (ProbeOptions(what=("gemm,flops",)), CPU, "--what", "--what 'flops': valid: gemm, memory, copy"),
        (ProbeOptions(sizes=("1M", "0")), CPU, "--sizes", "--sizes '0': valid: a whole number of bytes >= 1"),
        (ProbeOptions(sizes=("-4K",)), CPU, "--sizes", "--sizes '-4K'"),
        (ProbeOptions(sizes=("1.5",)), CPU, "--sizes", "whole number of bytes"),
        (ProbeOptions(gemm_sizes=(0,)), CPU, "--gemm-sizes", "--gemm-sizes 0: valid: M = N = K >= 1"),
        (ProbeOptions(what=("collectives",), ranks=1), CPU, "--ranks", "--ranks 1: collectives need 2 or more"),
        (ProbeOptions(what=("collectives",)), ONE_GPU, "--ranks", "collectives need 2 or more ranks"),
        (ProbeOptions(ranks=9), H100, "--ranks", "this host has 8 GPUs"),
        (ProbeOptions(what=("storage",)), CPU, "--path", "--what storage needs --path DIR"),
        (ProbeOptions(what=("gemm",), path=Path(".")), CPU, "--path", "--path is for storage"),
        (ProbeOptions(what=("gemm",), output=Path("x")), CPU, "-o", "-o is for collectives"),
        (ProbeOptions(system=SystemOptions(instance="p5.48xlarge")), CPU, "--instance", "give -o too"),
        (ProbeOptions(dtypes=("fp8",)), CPU, "--dtypes", "--dtypes fp8: CPU test has no FP8"),
        (ProbeOptions(dtypes=("int4",)), H100, "--dtypes", "--dtypes 'int4': valid: bf16, fp16, fp32, fp8"),
        (ProbeOptions(gemm_sizes=(1000,)), H100, "--gemm-sizes", "need M = N = K a multiple of 16"),
        (ProbeOptions(repeats=0), CPU, "--repeats", "--repeats 0: valid: 1 to"),
        (ProbeOptions(warmup=-1), CPU, "--warmup", "--warmup -1"),
    ],
)
def test_bad_input_is_one_line_naming_the_option(options, device, field, text):
    with pytest.raises(ClusterSimError) as caught:
        resolve(options, device)
    assert caught.value.field == field
    assert text in str(caught.value) and "\n" not in str(caught.value)


def test_torchrun_world_size_is_the_rank_count(monkeypatch):
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "4")
    assert resolve(ProbeOptions(what=("collectives",)), CPU).ranks == 4
    with pytest.raises(ClusterSimError, match="WORLD_SIZE 4"):
        resolve(ProbeOptions(what=("collectives",), ranks=2), CPU)


def test_what_keeps_the_documented_order():
    assert parse_what(["storage,gemm", "collectives"]) == ("gemm", "collectives", "storage")
    with pytest.raises(ClusterSimError, match="empty"):
        parse_what([","])


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_an_unwritable_path_is_refused(tmp_path: Path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ClusterSimError, match="cannot write there"):
        check_directory(locked)


def test_a_path_that_is_not_a_directory_is_refused(tmp_path: Path):
    with pytest.raises(ClusterSimError, match=r"--path .*: not a directory"):
        check_directory(tmp_path / "missing")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ClusterSimError, match="not a directory"):
        check_directory(tmp_path / "file")


def test_fraction_of_the_catalog_peak():
    """H100 SXM: 989.4 dense BF16 TFLOP/s and 3.35 TB/s HBM3 (NVIDIA H100 datasheet, in the catalog)."""
    assert catalog_peak(H100, "bf16") == pytest.approx(989.4e12)
    assert catalog_peak(H100, "fp32") == pytest.approx(67e12)
    assert catalog_peak(CPU, "bf16") is None
    size = 8192
    stats = summarize([2 * size**3 / 700e12] * 3, 1)  # 700 TFLOP/s
    row = GemmResult("bf16", size, stats, catalog_peak(H100, "bf16")).as_dict()
    assert row["tflops"] == pytest.approx(700)
    assert row["fraction_of_peak"] == pytest.approx(700 / 989.4)
    memory = BandwidthResult("copy", 1 << 30, 2 << 30, summarize([(2 << 30) / 3.0e12] * 3, 1), 3.35e12).as_dict()
    assert memory["GBps"] == pytest.approx(3000)
    assert memory["fraction_of_peak"] == pytest.approx(3.0 / 3.35)
    assert BandwidthResult("copy", 1, 2, stats).as_dict()["fraction_of_peak"] is None
