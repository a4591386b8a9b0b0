"""The interval lookup's paths where mutation testing of ``intervals.lookup`` found them unpinned: what
``interval_for`` passes on, the framework a job names by default, the edges of the group sizes, the widenings that
must look past a group too small, and the notes they join."""

from __future__ import annotations

import dataclasses

import pytest

from clustersim.intervals import Residual, ResidualTable, interval_for, spread_for
from clustersim.intervals.conformal import cases_needed
from clustersim.intervals.lookup import MIN_CASES
from tests.intervals.test_lookup import rows

HOPPER = {"accelerator": "h100-sxm", "family": "hopper", "devices": 8}
NARROW = rows(30, source="a", r=0.0, step=0.01)  # hopper, megatron, 8 devices: within about 15%
WIDE_FSDP = rows(30, framework="fsdp", source="f", r=0.5, step=0.02)
TRN1 = {"accelerator": "trainium1", "family": "trainium", "framework": "nccom-test", "devices": 64}


def _table(*groups: list[Residual]) -> ResidualTable:
    return ResidualTable(tuple(r for group in groups for r in group))


def _size(members: list[Residual], size_bytes: int, tag: str) -> list[Residual]:
    return [dataclasses.replace(r, id=f"{r.id}-{tag}", size_bytes=size_bytes) for r in members]


def test_interval_for_prices_the_spread_its_arguments_select() -> None:
    latency = rows(30, kind="inference", framework="tensorrt-llm", source="l", r=0.8, step=0.01, field="ttft_s")
    serving = rows(30, kind="inference", framework="tensorrt-llm", source="s", r=0.0, step=0.001,
                   field="output_tokens_per_s")  # fmt: skip
    trn = {"kind": "collective", "chip": "trainium1", "framework": "nccom-test", "source": "n", "sources": 1}
    gpus = rows(60, kind="collective", framework="nccl-tests", r=0.0, step=0.004, source="c")
    mid = _size(rows(12, **trn, r=1.5, step=0.1), 2**22, "mid")
    small = _size(rows(9, **trn, r=0.1, step=0.0), 2**10, "small")
    table = _table(NARROW, WIDE_FSDP, latency, serving, gpus, mid, small)
    cases = [
        ("training", {**HOPPER, "framework": "megatron"}),
        ("training", {**HOPPER, "framework": "fsdp"}),
        ("training", {**HOPPER, "framework": "fsdp", "exclude_source": "f/0"}),
        ("training", {"accelerator": "trainium2", "family": "trainium", "framework": "neuronx", "devices": 64}),
        ("inference", {**HOPPER, "framework": "tensorrt-llm"}),
        ("inference", {**HOPPER, "framework": "tensorrt-llm", "field": "ttft_s"}),
        ("collective", TRN1),
        ("collective", {**TRN1, "size_bytes": 8 * 2**20}),
    ]
    intervals = []
    for kind, where in cases:
        found = spread_for(kind, table=table, **where)
        assert found is not None
        got = interval_for(kind, predicted=10.0, table=table, **where)
        assert got == found.duration(10.0) and got == found.rate(10.0)  # a symmetric spread: either way round
        intervals.append(got)
    assert len({(i.low, i.basis, i.note) for i in intervals}) == len(cases)  # each argument selects another spread
    packaged = interval_for("training", predicted=10.0, **HOPPER, framework="megatron")
    assert packaged is not None and packaged != intervals[0]


def test_a_job_that_names_no_framework_is_judged_by_its_kinds_default_stack() -> None:
    table = _table(NARROW, WIDE_FSDP)
    unnamed = spread_for("training", **HOPPER, framework=None, table=table)
    megatron = spread_for("training", **HOPPER, framework="megatron", table=table)
    assert unnamed == megatron and unnamed is not None
    assert unnamed.basis == "training, hopper, megatron, 1-64 devices: 30 cases" and unnamed.q_hi < 0.2


def test_a_kind_the_lookup_has_no_plural_for_is_named_by_itself() -> None:
    table = _table(rows(30, kind="storage", chip="ampere", framework="fsx", source="x"))
    found = spread_for("storage", **HOPPER, framework="fsx", table=table)
    assert found is not None
    assert found.note.startswith("no validated storage cases on h100-sxm: interval from all 30 storage cases, pooled")


def test_a_scale_group_with_enough_cases_is_not_widened_by_its_stacks_other_scales() -> None:
    wide_at_scale = rows(30, devices=1024, source="b", r=2.0, step=0.01)
    found = spread_for("training", **HOPPER, framework="megatron", table=_table(NARROW, wide_at_scale))
    assert found is not None and found.basis == "training, hopper, megatron, 1-64 devices: 30 cases"
    assert found.q_hi < 0.2 and found.note == ""


def test_a_chips_few_cases_from_one_source_are_said_so_in_the_singular() -> None:
    table = _table(NARROW, rows(3, chip="ampere", source="one", sources=1))
    found = spread_for("training", accelerator="a100-sxm4-80gb", family="ampere", framework="megatron", devices=8,
                       table=table)  # fmt: skip
    assert found is not None and found.note.startswith("only 3 training cases from 1 source on ampere:")


def test_the_edges_of_a_thin_kind_and_of_the_pool_of_every_kind() -> None:
    """Exactly ``MIN_CASES`` of the kind, too few sources to judge by: the kind's own cases, not every kind's; a kind
    too thin beside exactly ``MIN_CASES`` cases of every kind: all of those."""
    two_sources = rows(MIN_CASES, kind="inference", framework="tensorrt-llm", source="t", sources=2)
    own = spread_for("inference", **HOPPER, framework="tensorrt-llm", table=_table(two_sources, NARROW))
    assert own is not None
    assert own.basis == f"inference, every chip and stack: {MIN_CASES} cases"
    thin = rows(5, kind="inference", framework="tensorrt-llm", source="t")
    pooled = spread_for("inference", **HOPPER, framework="tensorrt-llm",
                        table=_table(thin, rows(MIN_CASES - 5, source="a")))  # fmt: skip
    assert pooled is not None and pooled.basis == f"every kind, chip and stack: {MIN_CASES} cases"


def test_a_layouts_second_feature_widens_where_its_first_has_too_few_cases() -> None:
    experts = [dataclasses.replace(r, layout=("experts",)) for r in rows(5, source="e", r=3.0)]
    sharded = [dataclasses.replace(r, id=r.id + "-z", layout=("sharded",)) for r in rows(30, source="z", r=1.0)]
    found = spread_for("training", **HOPPER, framework="fsdp", layout=("experts", "sharded"),
                       table=_table(NARROW, experts, sharded))  # fmt: skip
    assert found is not None and found.basis == "training, every chip, layouts with sharded: 30 cases"
    assert found.note == (
        "no validated training cases with fsdp on hopper: interval from hopper's cases of other stacks; widened to the "
        "30 left-out cases whose layouts also have sharded (wider than training, hopper, every stack: 65 cases)"
    )


def test_a_chips_own_cases_widen_at_the_levels_rank_and_only_where_wider() -> None:
    need = cases_needed(0.8)
    gpus = rows(60, kind="collective", framework="nccl-tests", source="c", r=0.0, step=0.004)
    trn = {"kind": "collective", "chip": "trainium1", "framework": "nccom-test", "source": "n", "sources": 1}
    where = {"accelerator": "trainium1", "family": "trainium", "framework": "nccom-test", "devices": 64}
    exactly = spread_for("collective", **where, table=_table(gpus, rows(need, **trn, r=2.0, step=0.01)))
    assert exactly is not None and exactly.basis == f"collective, trainium1: {need} cases"
    assert exactly.note.endswith(f"widened to trainium1's own {need} left-out cases from 1 source (wider than "
                                 "collective, every chip and stack: 64 cases)")  # fmt: skip
    two = {**trn, "sources": 2}
    plural = spread_for("collective", **where, table=_table(gpus, rows(need, **two, r=2.0, step=0.01)))
    assert plural is not None and f"own {need} left-out cases from 2 sources (wider" in plural.note
    flat = rows(60, kind="collective", framework="nccl-tests", source="c", r=0.1, step=0.0)
    same = rows(need, **trn, r=0.1, step=0.0)  # as far off as the borrowed cases: nothing to widen
    equal = spread_for("collective", **where, table=_table(flat, same))
    assert equal is not None and "widened" not in equal.note
    # a band with exactly the rank's cases picks them; no stated size: every case of the chip, whatever its band
    banded = _size(rows(need, **trn, r=0.05, step=0.001), 2**10, "small") + _size(
        rows(need, **trn, r=3.0, step=0.01), 2**28, "big"
    )
    small = spread_for("collective", **where, size_bytes=2**10, table=_table(gpus, banded))
    unsized = spread_for("collective", **where, table=_table(gpus, banded))
    assert small is not None and unsized is not None
    assert "widened" not in small.note and small.q_hi < 0.2
    assert unsized.basis == f"collective, trainium1: {2 * need} cases" and unsized.q_hi > 2.5


def test_a_stacks_own_cases_widen_from_any_chip_at_the_rank() -> None:
    """vLLM on Hopper: 3 runs, too few on the chip; with Ampere's vLLM runs, exactly the rank's count... from two
    sources: they widen what Hopper's TensorRT-LLM runs give."""
    need = cases_needed(0.8)
    trt = rows(30, kind="inference", framework="tensorrt-llm", source="t", r=0.0, step=0.005)
    on_hopper = rows(1, kind="inference", framework="vllm", source="v", sources=1, r=2.0)
    on_ampere = rows(need - 1, kind="inference", chip="ampere", framework="vllm", source="w", sources=1, r=2.0,
                     step=0.01)  # fmt: skip
    found = spread_for("inference", **HOPPER, framework="vllm", table=_table(trt, on_hopper, on_ampere))
    assert found is not None and found.basis == f"inference, every chip, vllm: {need} cases"
    widened = f"widened to vllm's own {need} left-out cases (wider than inference, hopper, every stack: 31 cases)"
    assert found.note == widened
    fewer = spread_for("inference", **HOPPER, framework="vllm", table=_table(trt, on_ampere))
    assert fewer is not None and "widened" not in fewer.note  # one source, and one short of the rank
    flat = rows(30, kind="inference", framework="tensorrt-llm", source="t", r=0.05, step=0.0)
    same = rows(need, kind="inference", framework="vllm", source="v", sources=2, r=0.05, step=0.0)
    equal = spread_for("inference", **HOPPER, framework="vllm", table=_table(flat, same))
    assert equal is not None and "widened to vllm" not in equal.note


def test_a_stacks_own_cases_widen_what_a_chip_borrows() -> None:
    """Blackwell's runs, from two publications, are too few to judge it by: it borrows, and its few vLLM runs, wider
    than its SGLang ones and than the borrowed evidence, widen a vLLM job's interval."""
    need = cases_needed(0.8)
    ampere = rows(40, kind="inference", chip="ampere", framework="tensorrt-llm", source="t", r=0.0, step=0.002)
    blackwell = rows(need, kind="inference", chip="blackwell", framework="vllm", source="v", sources=2, r=1.0,
                     step=0.01)  # fmt: skip
    sglang = rows(20, kind="inference", chip="blackwell", framework="sglang", source="v", sources=2, r=0.0,
                  step=0.0005)  # fmt: skip
    found = spread_for("inference", accelerator="b200", family="blackwell", framework="vllm", devices=8,
                       table=_table(ampere, blackwell, sglang))  # fmt: skip
    assert found is not None and found.basis == f"inference, blackwell, vllm: {need} cases"
    assert found.note.startswith("only 24 serving cases from 2 sources on blackwell: interval from ")
    assert f"; widened to vllm's own {need} left-out cases (wider than inference, " in found.note


def test_a_percentile_from_too_few_sources_borrows_its_means_interval_for_the_same_job() -> None:
    def latency(field: str, **kw: object) -> list[Residual]:
        return rows(30, kind="inference", framework="tensorrt-llm", field=field, **kw)  # type: ignore[arg-type]

    p50 = latency("ttft_p50_s", source="p", sources=2, r=0.0, step=0.001)
    mean_hopper = latency("ttft_s", source="m", r=1.0, step=0.01)
    mean_other = latency("ttft_s", source="o", chip="ampere", r=0.1, step=0.001)
    mean_vllm = rows(30, kind="inference", framework="vllm", field="ttft_s", source="q", r=2.0, step=0.01)
    table = _table(p50, mean_hopper, mean_other, mean_vllm)
    found = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s", table=table)
    mean = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_s", table=table)
    assert found is not None and mean is not None and (found.q_lo, found.q_hi, found.basis) == (
        mean.q_lo, mean.q_hi, mean.basis
    )  # fmt: skip
    assert found.note == ("median TTFT: 30 cases from 2 sources, too few to judge by alone: the wider interval of TTFT")
    at_90 = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s", table=table, level=0.9)
    mean_90 = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_s", table=table, level=0.9)
    assert at_90 is not None and mean_90 is not None and at_90.q_hi == mean_90.q_hi != found.q_hi
    left_out = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s", table=table,
                          exclude_source="m/0")  # fmt: skip
    assert left_out is not None and left_out.cases == 50  # m's other two publications are too few: every stack
    ampere = spread_for("inference", accelerator="a100-sxm4-80gb", family="ampere", framework="tensorrt-llm",
                        devices=8, field="ttft_p50_s", table=table)  # fmt: skip
    assert ampere is not None and ampere.basis.startswith("inference TTFT, ampere")
    vllm = spread_for("inference", **HOPPER, framework="vllm", field="ttft_p50_s", table=table)
    assert vllm is not None and vllm.q_hi > 1.5
    one = [dataclasses.replace(r, source="p") for r in p50]
    single = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s",
                        table=_table(one, mean_hopper, mean_other))  # fmt: skip
    assert single is not None and single.note.startswith("median TTFT: 30 cases from 1 source, too few")
    pinned = [dataclasses.replace(r, layout=("attention_dp",)) for r in mean_hopper]
    for layout, basis in ((("attention_dp",), "inference TTFT, hopper, tensorrt-llm"), ((), "inference TTFT, every")):
        by_layout = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s", layout=layout,
                               table=_table(p50, pinned, mean_other))  # fmt: skip
        assert by_layout is not None and by_layout.basis.startswith(basis)  # attention-DP runs size attention-DP jobs


def test_a_percentile_no_wider_than_its_own_keeps_its_own() -> None:
    p50 = rows(30, kind="inference", framework="tensorrt-llm", field="ttft_p50_s", source="p", sources=2, r=0.0,
               step=0.01)  # fmt: skip
    mean = [dataclasses.replace(r, id=r.id + "-m", field="ttft_s", source="m") for r in p50]
    found = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s",
                       table=_table(p50, rows(30, kind="inference", framework="tensorrt-llm", field="ttft_s",
                                              source="n", r=0.0, step=0.01), mean))  # fmt: skip
    assert found is not None and found.basis.startswith("inference median TTFT") and "wider interval" not in found.note


@pytest.mark.parametrize("devices", [513, 10_000])
def test_the_largest_scale_bucket(devices: int) -> None:
    big = rows(30, devices=devices, source="b")
    found = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=devices,
                       table=_table(big))  # fmt: skip
    assert found is not None and found.basis == "training, hopper, megatron, over 512 devices: 30 cases"


def test_a_percentile_borrowing_its_means_borrowed_interval_keeps_both_reasons() -> None:
    """No TTFT mean was measured on Hopper: the mean's interval is Ampere's, which says so, and the median's note keeps
    that reason after its own."""
    p50 = rows(30, kind="inference", framework="tensorrt-llm", field="ttft_p50_s", source="p", sources=2, r=0.0,
               step=0.001)  # fmt: skip
    mean = rows(30, kind="inference", chip="ampere", framework="tensorrt-llm", field="ttft_s", source="m", r=1.0,
                step=0.01)  # fmt: skip
    found = spread_for("inference", **HOPPER, framework="tensorrt-llm", field="ttft_p50_s", table=_table(p50, mean))
    assert found is not None and found.basis == "inference TTFT, every chip and stack: 30 cases"
    assert found.note == (
        "median TTFT: 30 cases from 2 sources, too few to judge by alone: the wider interval of TTFT; no validated "
        "serving TTFT cases on h100-sxm: interval from all 30 serving TTFT cases, pooled (no other chip's own is wider)"
    )
