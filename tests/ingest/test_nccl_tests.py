"""The nccl-tests reader on real published outputs (tests/data/ingest/SOURCES.md), cut and broken ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files, write_cases
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.validation.cases import read_cases

DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
A3MEGA = DATA / "a3mega_2nodes_all_reduce.log"
CATALOG = load_catalog(use_env=False)


def test_a_full_run_names_its_ranks_hosts_gpu_and_footer():
    (table,) = read_nccl_tests(A3MEGA)
    assert len(table.ranks) == 16 and table.hosts == ["ztan-mig-235z", "ztan-mig-gq73"]
    assert table.gpu_names == ["NVIDIA H100 80GB HBM3"] and table.avg_busbw_GBps == 70.742
    assert (table.threads, table.gpus_per_thread, table.graph) == (1, 1, False)
    last = table.rows[-1]
    assert (last.size_bytes, last.out_of_place, last.in_place) == (
        8589934592,
        (47535.0, 180.71, 338.82),
        (47743.0, 179.92, 337.35),
    )


def test_its_cases_take_the_system_from_the_log():
    cases = ingest_files([A3MEGA], SystemOptions(inter_node_gbps=1600), CATALOG)
    assert len(cases) == 31
    system = cases[-1]["system"]
    assert system == {
        "accelerator": "h100-sxm",
        "devices": 16,
        "devices_per_node": 8,
        "nodes": 2,
        "inter_node_Gbps_per_node": 1600,
    }
    assert cases[-1]["measured"] == {"busbw_GBps": 338.82, "algbw_GBps": 180.71, "time_us": 47535.0}
    assert cases[-1]["source"].startswith("a3mega_2nodes_all_reduce.log line 62 ")
    assert cases[0]["measured"] == {"time_us": 135.8}  # busbw printed as 0.00: below the table's resolution
    in_place = ingest_files([A3MEGA], SystemOptions(inter_node_gbps=1600, in_place=True), CATALOG)
    assert in_place[-1]["measured"]["busbw_GBps"] == 337.35 and in_place[-1]["id"].endswith("_inplace")


def test_the_log_and_the_options_must_agree():
    with pytest.raises(ClusterSimError, match=r"2 hosts .*--nodes says 4"):
        ingest_files([A3MEGA], SystemOptions(nodes=4, inter_node_gbps=1600), CATALOG)
    with pytest.raises(ClusterSimError, match=r"H100 80GB HBM3.*p4de.24xlarge has a100-sxm4-80gb"):
        ingest_files([A3MEGA], SystemOptions(instance="p4de.24xlarge"), CATALOG)
    with pytest.raises(ClusterSimError, match="--inter-node-gbps"):
        ingest_files([A3MEGA], SystemOptions(), CATALOG)


def test_launcher_prefixes_and_a_table_without_its_footer():
    awsome = DATA / "p5_2nodes_all_reduce_awsome.log"
    with pytest.raises(ClusterSimError, match=r"p5_2nodes_all_reduce_awsome.log, line 34: .*footer.*--partial"):
        read_nccl_tests(awsome)
    options = SystemOptions(instance="p5.48xlarge", nodes=2)
    cases = ingest_files([awsome], options, CATALOG, partial=True)
    assert len(cases) == 32 and cases[-1]["measured"]["busbw_GBps"] == 487.09
    assert cases[-1]["system"]["instance"] == "p5.48xlarge" and cases[-1]["op"] == "all_reduce"  # from the file name
    tagged = ingest_files(
        [DATA / "p5_all_reduce_aws_batch.log"], SystemOptions(instance="p5.48xlarge", nodes=1), CATALOG
    )
    assert len(tagged) == 32 and tagged[-1]["measured"]["busbw_GBps"] == 483.05
    excerpt = ingest_files([DATA / "p5_2nodes_all_reduce_eks_excerpt.log"], options, CATALOG)
    assert next(c["size_bytes"] for c in excerpt) == 67108864  # the 0-byte row moves nothing: left out


def test_the_old_format_and_rows_with_wrong_results():
    (reduce,) = read_nccl_tests(DATA / "nccl_tests_issue78_all_reduce.log")
    assert [r.out_of_place[2] for r in reduce.rows] == [4.33, 4.32] and not reduce.wrong  # error 2e-06: rounding
    (alltoall,) = read_nccl_tests(DATA / "nccl_tests_issue78_alltoall.log")  # redop blank, in-place error 1e+00
    assert not alltoall.rows and next(r.out_of_place for r in alltoall.wrong) == (520935.0, 0.52, 0.51)
    with pytest.raises(ClusterSimError, match="no row to keep"):
        ingest_files(
            [DATA / "nccl_tests_issue78_alltoall.log"], SystemOptions(instance="p4d.24xlarge", nodes=8), CATALOG
        )


def test_cut_and_broken_files_are_refused_naming_the_line(tmp_path: Path):
    lines = A3MEGA.read_text().splitlines()
    cut = tmp_path / "cut.log"
    cut.write_text("\n".join([*lines[:45], lines[45][:40]]) + "\n")  # the run killed mid-line
    with pytest.raises(ClusterSimError, match=r"cut.log, line 46: .*a cut line"):
        read_nccl_tests(cut)
    broken = tmp_path / "broken.log"
    broken.write_text("\n".join([*lines[:44], lines[44].replace("0.77", "n/a", 1), *lines[45:]]) + "\n")
    with pytest.raises(ClusterSimError, match=r"broken.log, line 45: column .* is 'n/a', not a number"):
        read_nccl_tests(broken)
    empty = tmp_path / "empty_all_reduce.log"
    empty.write_text("# nThread 1 nGpus 8\n")
    with pytest.raises(ClusterSimError, match="no nccl-tests result table"):
        read_nccl_tests(empty)
    unnamed = tmp_path / "run.log"
    unnamed.write_text(A3MEGA.read_text())
    with pytest.raises(ClusterSimError, match="give --op"):
        ingest_files([unnamed], SystemOptions(inter_node_gbps=1600), CATALOG)
    assert (
        ingest_files([unnamed], SystemOptions(inter_node_gbps=1600, op="all_gather"), CATALOG)[0]["op"] == "all_gather"
    )


def test_cases_are_written_whole_and_read_back(tmp_path: Path):
    target = tmp_path / "cases.jsonl"
    cases = ingest_files([A3MEGA], SystemOptions(inter_node_gbps=1600), CATALOG)
    write_cases(cases, target)
    assert [c.id for c in read_cases(target)] == [c["id"] for c in cases]
    assert [p.name for p in tmp_path.iterdir()] == ["cases.jsonl"]  # no temporary file left
