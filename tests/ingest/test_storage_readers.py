"""The fio JSON and IOR readers on real published outputs (tests/data/ingest/SOURCES.md), and their comparison
with the FSx for Lustre model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.ingest import StorageOptions, SystemOptions, read_files, reader_of
from clustersim.ingest.fio import read_fio
from clustersim.ingest.ior import read_ior
from clustersim.ingest.storage_runs import compare_storage

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
FIO_1M = DATA / "fio_rbd_1m_randread_qd1_ceph_perfresults.json"
FIO_4M = DATA / "fio_rbd_4m_seqread_qd2_ceph_perfresults2.json"
FSX_2 = DATA / "ior_fsx_scratch1_14400gib_2x_c5n_zhuang.txt"
FSX_8 = DATA / "ior_fsx_scratch1_14400gib_8x_c5n_zhuang.txt"
AKRR = DATA / "ior_nfs_16tasks_akrr_ub_hpc.txt"
JUBENCH = DATA / "ior_summary_48tasks_jubench.txt"
SCRATCH_1 = StorageOptions(storage="fsx:SCRATCH_1:14400GiB")  # the blog's 14,400 GiB file system of 2019
CATALOG = load_catalog(use_env=False)
MIB = 2**20
runner = CliRunner()


def test_fio_json_is_read_per_direction():
    (run,) = read_fio(FIO_1M)
    assert (run.op, run.measured_bytes_per_s, run.total_bytes) == ("read", 364985746.0, 21899509760.0)
    assert run.total_bytes / (run.details["runtime_ms"] / 1e3) == pytest.approx(run.measured_bytes_per_s, rel=1e-3)
    assert (run.files, run.clients, run.line) == (1, 1, 26)
    details = run.details
    assert (details["bs_bytes"], details["iodepth"], details["direct"], details["ioengine"]) == (MIB, 1, True, "rbd")
    assert (details["clat_p50_us"], details["clat_p99_us"]) == (pytest.approx(2801.664), pytest.approx(4751.36))
    assert details["version"] == "fio-3.39-30-g58818" and run.notes == ()
    (deeper,) = read_fio(FIO_4M)  # 4 MiB sequential reads, two in flight: more than twice the rate
    assert deeper.measured_bytes_per_s == 817069786.0 and deeper.details["bs_bytes"] == 4 * MIB
    assert deeper.details["iodepth"] == 2 and deeper.measured_bytes_per_s > 2 * run.measured_bytes_per_s
    assert reader_of(FIO_4M) == "fio"


def test_fio_with_normal_output_around_and_before_3_0(tmp_path: Path):
    text = FIO_1M.read_text()
    mixed = tmp_path / "mixed.log"
    mixed.write_text("job: (g=0): rw=randread, bs=(R) 1024KiB-1024KiB\nfio-3.39\nStarting 1 process\n" + text)
    mixed.write_text(mixed.read_text() + "\njob: (groupid=0, jobs=1): err= 0: pid=1\n  read: IOPS=348\n")
    (run,) = read_fio(mixed)
    assert run.measured_bytes_per_s == 364985746.0 and run.line == 29
    old = tmp_path / "old.json"  # fio 2.x printed no bw_bytes, only bw in KiB/s
    old.write_text("\n".join(line for line in text.splitlines() if '"bw_bytes"' not in line))
    assert read_fio(old)[0].measured_bytes_per_s == pytest.approx(356431 * 1024)


def test_fio_refusals(tmp_path: Path):
    text = FIO_1M.read_text()
    cut = tmp_path / "cut.json"
    cut.write_text("\n".join(text.splitlines()[:60]))
    with pytest.raises(ClusterSimError, match=r"cut.json, line 60: the fio JSON is cut or broken"):
        read_fio(cut)
    failed = tmp_path / "failed.json"
    failed.write_text(text.replace('"error" : 0', '"error" : 5'))
    with pytest.raises(ClusterSimError, match=r"failed.json, line 26: job 'cbt-fio-1Mrandomread-o01-file-0' ended"):
        read_fio(failed)
    idle = tmp_path / "idle.json"
    idle.write_text(text.replace('"io_bytes" : 21899509760', '"io_bytes" : 0'))
    with pytest.raises(ClusterSimError, match=r"idle.json, line 1: no job read or wrote a byte"):
        read_fio(idle)
    served = tmp_path / "served.json"
    served.write_text(text.replace('"jobs" : [', '"client_stats" : [], "jobs" : ['))
    with pytest.raises(ClusterSimError, match=r"client/server output \(client_stats\) is not read"):
        read_fio(served)
    missing = tmp_path / "missing.json"
    missing.write_text(text.replace('"bw_bytes" : 364985746,', "").replace('"bw" : 356431,', ""))
    with pytest.raises(ClusterSimError, match=r"line 26: the read side moved bytes but prints no bandwidth"):
        read_fio(missing)


def test_ior_summary_tables_of_two_layouts():
    (run,) = read_ior(AKRR)  # IOR 3.2: 16 tasks, 8 per node, one shared file
    assert (run.op, run.files, run.clients, run.line) == ("write", 1, 2, 40)
    assert run.measured_bytes_per_s / 1e6 == pytest.approx(109.33, abs=0.01)  # the "(109.33 MB/sec)" IOR prints
    assert run.total_bytes == 16 * 200 * MIB and run.details["transfer_bytes"] == 20 * MIB
    assert run.details["version"] == "3.2.0" and run.details["api"] == "POSIX"
    write, read = read_ior(JUBENCH)  # IOR 4 with Stonewall columns: file per process, 3 repetitions
    assert (write.measured_bytes_per_s, read.measured_bytes_per_s) == (4181.27 * MIB, 8464.99 * MIB)
    assert write.details["max_mib_s"] == 6987.46 and write.details["min_mib_s"] == 2213.94
    assert (write.files, write.clients, write.details["repetitions"], write.total_bytes) == (48, 1, 3, 48 * 2**31)
    with pytest.raises(ClusterSimError, match=r"line 40: the output says 2 node\(s\), --nodes says 4"):
        read_ior(AKRR, nodes=4)


def test_ior_excerpt_takes_its_layout_from_the_command_line():
    write, read = read_ior(FSX_2)
    assert (write.op, read.op, write.files, write.clients) == ("write", "read", 72, 2)
    assert write.measured_bytes_per_s == 1632.01 * MIB and write.total_bytes == 72 * 16 * MIB * 4
    assert (write.details["block_bytes"], write.details["transfer_bytes"], write.details["segments"]) == (
        16 * MIB,
        MIB,
        4,
    )
    assert "maximum" in write.notes[0] and reader_of(FSX_2) == "ior"


def test_ior_excerpt_takes_its_layout_from_the_options_block(tmp_path: Path):
    head = tmp_path / "head.txt"  # the akrr output up to its Max Write line, the summary cut away
    head.write_text("\n".join(AKRR.read_text().splitlines()[:36]))
    (run,) = read_ior(head)
    assert (run.files, run.clients, run.total_bytes) == (1, 2, 16 * 200 * MIB)  # 16 tasks, 8 per node, shared
    assert run.measured_bytes_per_s == 104.26 * MIB and len(run.notes) == 1


def test_ior_refusals(tmp_path: Path):
    lines = AKRR.read_text().splitlines()
    garbled = tmp_path / "garbled.txt"
    garbled.write_text("\n".join([*lines[:39], " ".join(lines[39].split()[:20])]))
    with pytest.raises(ClusterSimError, match=r"garbled.txt, line 40: a summary row of 20 fields under a header of 25"):
        read_ior(garbled)
    empty = tmp_path / "empty.txt"
    empty.write_text("\n".join(lines[:39]))
    with pytest.raises(ClusterSimError, match=r"empty.txt, line 39: the summary table has no row"):
        read_ior(empty)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(line for line in lines[:34] if not line.startswith("Max")))
    with pytest.raises(ClusterSimError, match=r"cut.txt, line \d+: no 'Summary of all tests:' table"):
        read_ior(cut)
    bare = tmp_path / "bare.txt"
    bare.write_text("Max Write: 1632.01 MiB/sec (1711.28 MB/sec)\n")
    with pytest.raises(ClusterSimError, match=r"bare.txt, line 1: the output does not say how many tasks ran"):
        read_ior(bare)
    word = tmp_path / "word.txt"
    word.write_text("\n".join([*lines[:39], lines[39].replace("104.26 ", "fast ", 3)]))
    with pytest.raises(ClusterSimError, match=r"word.txt, line 40: column Max\(MiB\) is 'fast', not a number"):
        read_ior(word)


def test_fsx_scratch_1_against_the_model():
    eight = [compare_storage(run, SCRATCH_1, CATALOG, None) for run in read_ior(FSX_8)]
    two = [compare_storage(run, SCRATCH_1, CATALOG, None) for run in read_ior(FSX_2)]
    for row in eight + two:  # 200 MB/s/TiB x 14.4: the 2,880 MB/s AWS quotes for this size, which the blog met
        assert row["model_bytes_per_s"] == pytest.approx(2880e6) and row["bound"] == "file system"
    assert [row["measured_bytes_per_s"] / 1e6 for row in eight] == [
        pytest.approx(3046.73, abs=0.01),
        pytest.approx(3019.85, abs=0.02),
    ]
    assert all(abs(row["error"]) < 0.06 for row in eight)
    # two c5n clients fall short of the aggregate; the model has no per-client TCP limit below 100 Gbit/s
    assert all(row["error"] > 0.6 for row in two)


def test_comparison_options_and_the_cli(tmp_path: Path):
    out = tmp_path / "cases.jsonl"
    args = ["ingest", str(FSX_8), "-o", str(out), "--storage", "fsx:SCRATCH_1:14400GiB"]
    printed = runner.invoke(app, args)
    assert printed.exit_code == 0, printed.output
    assert "IOR write: measured 3,046.7 MB/s, model 2,880.0 MB/s (-5.5%), bound by file system" in printed.output
    assert not out.exists()
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert data["read"] == [{"file": str(FSX_8), "reader": "ior", "cases": 0}]
    assert data["measurements"][0]["comparisons"][0]["path"] == "ena"
    striped = runner.invoke(app, [*args, "--stripes", "13"])
    assert striped.exit_code != 0 and "13 is not between 1 and the 12 storage targets" in striped.output
    lone = runner.invoke(app, ["ingest", str(FIO_1M), "-o", str(out), "--stripes", "2"])
    assert lone.exit_code != 0 and "--stripes shapes the comparison with a file system" in lone.output
    with pytest.raises(ClusterSimError, match="--storage applies to fio and IOR outputs"):
        read_files([DATA / "osu_bibw_p5_openmpi_pcluster.txt"], SystemOptions(), CATALOG, storage=SCRATCH_1)
    with pytest.raises(ClusterSimError, match="--nodes: fio's JSON is one machine's jobs"):
        read_files([FIO_4M], SystemOptions(nodes=2), CATALOG)
    (found,) = read_files([FIO_4M], SystemOptions(), CATALOG, storage=StorageOptions("fsx:SCRATCH_2:1200GiB"))
    comparison = found.measurement["comparisons"][0] if found.measurement else {}
    # one 4 GiB-ish file striped over the one target of 1,200 GiB: the file system's 240 MB/s read baseline
    assert comparison["clients"] == 1 and comparison["model_bytes_per_s"] == pytest.approx(240e6)


@settings(max_examples=25, deadline=None)
@given(clients=st.integers(min_value=1, max_value=64), stripes=st.integers(min_value=1, max_value=12))
def test_the_model_never_falls_with_more_clients_and_never_passes_the_file_system(clients: int, stripes: int):
    run = replace(read_fio(FIO_4M)[0], clients=clients)
    fewer = replace(run, clients=max(1, clients // 2))
    options = StorageOptions("fsx:SCRATCH_1:14400GiB", stripes=stripes)
    more_rate = compare_storage(run, options, CATALOG, None)["model_bytes_per_s"]
    assert compare_storage(fewer, options, CATALOG, None)["model_bytes_per_s"] <= more_rate <= 2880e6 * (1 + 1e-9)
