"""The OSU point-to-point reader on real published outputs, and its comparison with the data-path model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, read_files
from clustersim.ingest.osu import compare_osu, read_osu
from clustersim.network.transport.datapath import PathKind, build_path

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
OPENMPI = DATA / "osu_bibw_p5_openmpi_pcluster.txt"
INTELMPI = DATA / "osu_bibw_p5_intelmpi_pcluster.txt"
LATENCY = DATA / "osu_latency_c5n_openmpi_pcluster.txt"
CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")
runner = CliRunner()


def test_osu_outputs_are_read_row_by_row():
    run = read_osu(OPENMPI)
    assert (run.test, run.version, run.device_buffers, len(run.rows)) == ("osu_bibw", "v5.7.1", False, 23)
    assert run.rows[0] == (1, 1.52, 3) and run.rows[-1] == (4194304, 18666.02, 25)
    latency = read_osu(LATENCY)
    assert latency.test == "osu_latency" and latency.rows[0] == (0, 18.01, 3) and latency.rows[-1][1] == 1469.88


def test_bandwidth_against_one_nic_of_the_model():
    ceiling_mb_s = build_path(PathKind.EFA_HOST, line_bits_per_s=100e9, buffer="host", adapter="efa-v2")
    ceiling = ceiling_mb_s.ceiling_bytes_per_s / 1e6
    (row,) = compare_osu(read_osu(OPENMPI), P5)["rows"]  # Open MPI: one rail, 74% of the NIC per direction
    assert (row["measured"], row["model"]) == (pytest.approx(18666.02 / 2), pytest.approx(ceiling, rel=1e-4))
    assert row["error"] == pytest.approx(ceiling / (18666.02 / 2) - 1, abs=1e-4) and row["error"] > 0
    intel = compare_osu(read_osu(INTELMPI), P5)  # Intel MPI stripes over rails: past one NIC's ceiling
    assert intel["path"] == "efa-host" and intel["buffers"] == "host" and intel["rows"][0]["error"] < 0


def test_latency_is_compared_at_every_size_and_needs_an_instance(tmp_path: Path):
    comparison = compare_osu(read_osu(LATENCY), P5)
    assert [r["size_bytes"] for r in comparison["rows"]][:3] == [0, 1, 2] and comparison["unit"] == "us one-way"
    model = [r["model"] for r in comparison["rows"]]
    assert model == sorted(model)  # one message's time grows with its size
    (found,) = read_files([LATENCY], SystemOptions(), CATALOG)
    assert found.reader == "osu" and found.cases == [] and found.measurement is not None
    assert found.measurement["comparison"] is None and "give --instance" in found.measurement["note"]
    with pytest.raises(ClusterSimError, match="--model applies to serving and training outputs"):
        read_files([LATENCY], SystemOptions(model="llama3-8b"), CATALOG)


def test_malformed_cut_and_mixed_outputs(tmp_path: Path):
    text = OPENMPI.read_text()
    garbled = tmp_path / "garbled.txt"
    garbled.write_text(text.replace("16349.49", "16349.49x"))
    with pytest.raises(ClusterSimError, match=r"garbled.txt, line 19: '65536\s+16349.49x' is not a size and a value"):
        read_osu(garbled)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(text.splitlines()[:2]) + "\n")
    with pytest.raises(ClusterSimError, match=r"cut.txt, line 1: no measured row under the header"):
        read_osu(cut)
    twice = tmp_path / "twice.txt"
    twice.write_text(text + LATENCY.read_text())
    with pytest.raises(ClusterSimError, match=r"twice.txt, line 26: a second OSU test in one file"):
        read_osu(twice)
    shuffled = tmp_path / "shuffled.txt"
    lines = text.splitlines()
    shuffled.write_text("\n".join([*lines[:3], lines[4], lines[3], *lines[5:]]) + "\n")
    with pytest.raises(ClusterSimError, match=r"shuffled.txt, line 5: size 2 after 4: rows out of order"):
        read_osu(shuffled)
    labelled = tmp_path / "srun.txt"
    labelled.write_text("".join(f"0: {line}\n" for line in text.splitlines()))
    assert read_osu(labelled).rows == read_osu(OPENMPI).rows


def test_the_cli_prints_the_comparison_and_writes_no_case_file(tmp_path: Path):
    out = tmp_path / "cases.jsonl"
    args = ["ingest", str(OPENMPI), "-o", str(out), "--instance", "p5.48xlarge"]
    printed = runner.invoke(app, args)
    assert printed.exit_code == 0, printed.output
    assert "osu_bibw vs the efa-host data path" in printed.output and "4194304 B: measured 9333.01" in printed.output
    assert not out.exists()
    result = runner.invoke(app, [*args, "--json"])
    data = json.loads(result.output)
    assert data["output"] is None and data["read"] == [{"file": str(OPENMPI), "reader": "osu", "cases": 0}]
    assert data["measurements"][0]["comparison"]["rows"][0]["size_bytes"] == 4194304


def test_a_second_latency_run_with_another_mpi():
    """Intel MPI's osu_latency in the same results folder: 0.49 us at 1 byte, a shared-memory time (both ranks
    on one host; the file does not say), which the reader reads as printed."""
    run = read_osu(DATA / "osu_latency_c5n_intelmpi_pcluster.txt")
    assert (run.test, run.version, len(run.rows)) == ("osu_latency", "v5.7.1", 24)
    assert run.rows[1] == (1, 0.49, 4) and run.rows[-1] == (4194304, 688.99, 26)
    assert run.rows[1][1] < read_osu(LATENCY).rows[1][1] / 10  # far below the Open MPI run over EFA
