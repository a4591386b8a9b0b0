"""The fi_pingpong (libfabric fabtests) reader on real published outputs, and its comparison with the data-path
model through the comparison OSU's latency uses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, read_files, reader_of
from clustersim.ingest.fi_pingpong import compare_fi_pingpong, no_comparison_note, read_fi_pingpong
from clustersim.ingest.osu import compare_one_way
from clustersim.network.transport.datapath import PathKind

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
EFA = DATA / "fi_pingpong_efa_server_magic_castle_pr331.txt"
TCP = DATA / "fi_pingpong_tcp_rxm_daos_troubleshooting.txt"
CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")
runner = CliRunner()


def test_tables_of_both_sources_are_read():
    run = read_fi_pingpong(EFA)
    assert (run.provider, run.line, len(run.rows)) == ("efa", 2, 6)
    assert run.rows[0] == (64, 2049.70, 3) and run.rows[-1] == (1048576, 479.75, 8)
    assert run.details[-1] == {"iterations": 10.0, "mb_per_s": 2185.67}
    # usec/xfer is one message's one-way time: size / (MB/sec) where the 2-decimal MB/sec is not rounded away
    for (size, usec, _), extra in zip(run.rows, run.details, strict=True):
        if size >= 1024:
            assert usec == pytest.approx(size / extra["mb_per_s"], rel=0.02)
    tcp = read_fi_pingpong(TCP)  # "-p 'tcp;ofi_rxm'": the core provider is tcp
    assert tcp.provider == "tcp" and [size for size, _, _ in tcp.rows] == [64, 256, 1024, 4096, 65536, 1048576]
    assert reader_of(EFA) == reader_of(TCP) == "fi-pingpong"


def test_compared_on_the_providers_path():
    efa = compare_fi_pingpong(read_fi_pingpong(EFA), P5)
    assert efa is not None and (efa["path"], efa["buffers"], efa["unit"]) == ("efa-host", "host", "us one-way")
    model = [row["model"] for row in efa["rows"]]
    assert model == sorted(model)  # one message's time grows with its size
    # the same rows through OSU's latency comparison give the same numbers: one comparison, not a copy
    same = compare_one_way("fi_pingpong", read_fi_pingpong(EFA).rows, P5, PathKind.EFA_HOST, False)
    assert same["rows"] == efa["rows"]
    # ten iterations: the 64-byte row carries the connection set-up (2 ms), far above one message's time
    assert efa["rows"][0]["error"] < -0.9
    tcp = compare_fi_pingpong(read_fi_pingpong(TCP), P5)
    assert tcp is not None and tcp["path"] == "tcp-ena"
    assert tcp["rows"][-1]["model"] > efa["rows"][-1]["model"]  # TCP's copies and stack cost more per MiB


def test_providers_without_a_path_and_without_an_instance(tmp_path: Path):
    verbs = tmp_path / "verbs.txt"
    verbs.write_text(TCP.read_text().replace("tcp;ofi_rxm", "verbs;ofi_rxm"))
    run = read_fi_pingpong(verbs)
    assert compare_fi_pingpong(run, P5) is None and "provider 'verbs' has no path" in no_comparison_note(run)
    bare = tmp_path / "bare.txt"
    bare.write_text("\n".join(EFA.read_text().splitlines()[1:]))
    assert read_fi_pingpong(bare).provider is None
    (found,) = read_files([EFA], SystemOptions(), CATALOG)
    assert found.measurement is not None and found.measurement["lines"] == [
        "give --instance to compare it with the model"
    ]


def test_malformed_cut_and_mixed_outputs(tmp_path: Path):
    text = EFA.read_text()
    lines = text.splitlines()
    garbled = tmp_path / "garbled.txt"
    garbled.write_text(text.replace("136.99      29.90", "136.99"))
    with pytest.raises(ClusterSimError, match=r"garbled.txt, line 6: '4k .*' has 7 fields under a header of 8"):
        read_fi_pingpong(garbled)
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(lines[:2]))
    with pytest.raises(ClusterSimError, match=r"cut.txt, line 2: no measured row under the header"):
        read_fi_pingpong(cut)
    twice = tmp_path / "twice.txt"
    twice.write_text(text + text)
    with pytest.raises(ClusterSimError, match=r"twice.txt, line 10: a second fi_pingpong table in one file"):
        read_fi_pingpong(twice)
    shuffled = tmp_path / "shuffled.txt"
    shuffled.write_text("\n".join([*lines[:3], lines[4], lines[3], *lines[5:]]))
    with pytest.raises(ClusterSimError, match=r"shuffled.txt, line 5: size 256 after 1024: rows out of order"):
        read_fi_pingpong(shuffled)
    mixed = tmp_path / "mixed.txt"
    mixed.write_text(TCP.read_text().replace('-p "tcp;ofi_rxm" -e rdm -d eth0 ip', "-p efa -e rdm ip"))
    with pytest.raises(ClusterSimError, match=r"command lines name different providers: tcp \(line 1\), efa"):
        read_fi_pingpong(mixed)
    ranked = tmp_path / "ranked.txt"
    ranked.write_text("".join(f"[rank 1] {line}\n" for line in lines))
    assert read_fi_pingpong(ranked).rows == read_fi_pingpong(EFA).rows


def test_the_cli_prints_the_comparison(tmp_path: Path):
    out = tmp_path / "cases.jsonl"
    args = ["ingest", str(EFA), "-o", str(out), "--instance", "p5.48xlarge"]
    printed = runner.invoke(app, args)
    assert printed.exit_code == 0, printed.output
    assert "fi_pingpong vs the efa-host data path" in printed.output and "1048576 B: measured 479.75" in printed.output
    data = json.loads(runner.invoke(app, [*args, "--json"]).output)
    assert data["measurements"][0]["record"]["provider"] == "efa" and not out.exists()


def test_another_fabtest_with_the_same_table_is_refused(tmp_path: Path):
    bandwidth = tmp_path / "bw.txt"
    bandwidth.write_text(EFA.read_text().replace("fi_pingpong -e rdm -p efa", "fi_rdm_tagged_bw -e rdm -p efa"))
    with pytest.raises(ClusterSimError, match=r"bw.txt, line 1: fi_rdm_tagged_bw's table, not fi_pingpong's"):
        read_fi_pingpong(bandwidth)
    rdm = tmp_path / "rdm.txt"  # the rdm pingpong prints the same one-way time
    rdm.write_text(EFA.read_text().replace("fi_pingpong -e rdm", "fi_rdm_pingpong"))
    assert read_fi_pingpong(rdm).provider == "efa"
