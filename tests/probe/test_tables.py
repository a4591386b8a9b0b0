"""The probe's collectives as nccl-tests tables and as cases: the printed table reads back through
clustersim ingest's nccl-tests reader, the busbw factors are nccl-tests' (doc/PERFORMANCE.md:
https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md), and the cases are the format's."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest import SystemOptions, ingest_files
from clustersim.ingest.nccl_tests import read_nccl_tests
from clustersim.network.collectives import Op
from clustersim.probe.collectives import COLLECTIVES, CollectiveResult, CollectiveRow, shape
from clustersim.probe.tables import probe_cases, redop, root, table_text
from clustersim.probe.timing import summarize
from clustersim.validation.cases import as_case

CATALOG = load_catalog(use_env=False)
PLACEMENT = (("node-a", 101, "NVIDIA H100 80GB HBM3"), ("node-a", 102, "NVIDIA H100 80GB HBM3"))


def _result(op: Op, ranks: int = 2, times_s: tuple[float, ...] = (1e-3, 2e-3, 4e-3)) -> CollectiveResult:
    rows = []
    for index, time_s in enumerate(times_s):
        size, count = shape(op, (1 << 20) << index, ranks)
        rows.append(CollectiveRow(size, count, summarize([time_s, time_s * 1.1, time_s * 0.9], 1)))
    placement = tuple((f"node-{r // 8}", 100 + r, PLACEMENT[0][2]) for r in range(ranks))
    return CollectiveResult(op, ranks, "nccl", tuple(rows), placement)


def test_busbw_factors_are_nccl_tests():
    """PERFORMANCE.md: allreduce 2(n-1)/n, allgather/reducescatter/alltoall (n-1)/n, broadcast 1."""
    n = 8
    expected = {
        Op.ALL_REDUCE: 2 * (n - 1) / n,
        Op.ALL_GATHER: (n - 1) / n,
        Op.REDUCE_SCATTER: (n - 1) / n,
        Op.ALLTOALL: (n - 1) / n,
        Op.BROADCAST: 1.0,
    }
    for op, factor in expected.items():
        result = _result(op, ranks=n)
        time_us, algbw, busbw = result.bandwidths(result.rows[0])
        assert algbw == pytest.approx(result.rows[0].size_bytes / (time_us * 1e-6) / 1e9)
        assert busbw == pytest.approx(algbw * factor)


@given(op=st.sampled_from(COLLECTIVES), requested=st.integers(1, 1 << 34), ranks=st.integers(2, 1024))
def test_shape_rounds_down_to_whole_elements_per_rank(op, requested, ranks):
    size, count = shape(op, requested, ranks)
    assert size % (4 * ranks) == 0
    assert size <= max(requested, 4 * ranks)
    assert size > requested - 4 * ranks
    per_rank = op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL)
    assert count * 4 * (ranks if per_rank else 1) == size


def test_columns_as_nccl_tests_prints_them():
    assert [redop(op) for op in COLLECTIVES] == ["sum", "none", "sum", "none", "none"]
    assert [root(op) for op in COLLECTIVES] == [-1, -1, -1, -1, 0]


@pytest.mark.parametrize("op", COLLECTIVES)
def test_printed_table_reads_back_through_ingest(tmp_path: Path, op: Op):
    result = _result(op)
    log = tmp_path / "probe.log"
    log.write_text("\n".join(table_text(result, torch_version="2.13.0", warmup=1, repeats=3)) + "\n")
    (table,) = read_nccl_tests(log)
    assert table.op == op.value
    assert table.hosts == ["node-0"]
    assert table.gpu_names == [PLACEMENT[0][2]]
    assert len(table.rows) == len(result.rows)
    for read, row in zip(table.rows, result.rows, strict=True):
        time_us, algbw, busbw = result.bandwidths(row)
        assert read.size_bytes == row.size_bytes
        assert read.out_of_place == pytest.approx((time_us, algbw, busbw), abs=5e-3)
        assert read.wrong is None  # N/A: not checked


def test_cases_match_what_ingest_makes_of_the_printed_table(tmp_path: Path):
    results = [_result(op) for op in COLLECTIVES]
    log = tmp_path / "probe.log"
    log.write_text("\n".join(line for r in results for line in table_text(r, torch_version="t", warmup=1, repeats=3)))
    options = SystemOptions()  # the GPU's name on the rank lines names the accelerator: h100-sxm
    ingested = ingest_files([log], options, CATALOG)
    cases = probe_cases(
        results, options, CATALOG, torch_version="t", software_version="torch t nccl", warmup=1, repeats=3
    )
    assert len(cases) == len(ingested) == 15
    for case, read in zip(cases, ingested, strict=True):
        assert (
            case["system"]
            == read["system"]
            == {
                "accelerator": "h100-sxm",
                "devices": 2,
                "devices_per_node": 2,
                "nodes": 1,
            }
        )
        assert (case["op"], case["size_bytes"]) == (read["op"], read["size_bytes"])
        assert case["measured"]["busbw_GBps"] == pytest.approx(read["measured"]["busbw_GBps"], abs=5e-3)
        assert case["software"] == {"framework": "torch-distributed", "version": "torch t nccl"}
        assert case["probe"]["time_us_min"] <= case["measured"]["time_us"] <= case["probe"]["time_us_max"]
        assert as_case(case, "collective").software.framework == "torch-distributed"
    assert len({c["id"] for c in cases}) == len(cases)


def test_the_system_the_options_name_must_agree_with_the_machine():
    with pytest.raises(ClusterSimError, match="--nodes says 2"):
        probe_cases([_result(Op.ALL_REDUCE)], SystemOptions(nodes=2), CATALOG, torch_version="t",
                    software_version="t", warmup=1, repeats=3)  # fmt: skip
    with pytest.raises(ClusterSimError, match="8 devices per node"):
        probe_cases([_result(Op.ALL_REDUCE)], SystemOptions(instance="p5.48xlarge"), CATALOG, torch_version="t",
                    software_version="t", warmup=1, repeats=3)  # fmt: skip
