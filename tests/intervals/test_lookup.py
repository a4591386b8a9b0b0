"""The grouping of residuals: the most specific group with enough cases, notes where evidence is borrowed."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.intervals import Residual, ResidualTable, chip_of, interval_for, load_residuals, spread_for
from clustersim.intervals.layout import ATTENTION_DP, LAYOUT_FEATURES, layout_features, serving_features
from clustersim.intervals.lookup import MIN_CASES, MIN_SOURCES, scale_of, size_band


def rows(n: int, *, kind: str = "training", chip: str = "hopper", framework: str = "megatron", devices: int = 8,
         source: str = "s", r: float = 0.0, step: float = 0.01,
         sources: int = MIN_SOURCES, field: str = "step_time_s") -> list[Residual]:  # fmt: skip
    """``n`` residuals spread over ``sources`` publications (``source/0``, ``source/1``, ...; one: ``source``)."""
    accelerator = {"hopper": "h100-sxm", "ampere": "a100-sxm4-80gb"}.get(chip, chip)
    return [
        Residual(
            f"{source}-{chip}-{framework}-{devices}-{k}",
            source if sources == 1 else f"{source}/{k % sources}",
            kind,
            chip,
            accelerator,
            framework,
            devices,
            field,
            r + step * (k - n / 2),
        )
        for k in range(n)
    ]


def test_chips_and_scales() -> None:
    assert chip_of("h200-sxm", "hopper") == "hopper"
    assert chip_of("trainium2", "trainium") == "trainium2"  # Trainium2 runs on Trainium1's fractions: another chip
    assert chip_of("my-trainium4", "trainium") == "trainium"  # no residual is keyed by a family with separate chips
    assert [scale_of(d) for d in (1, 64, 65, 512, 513)] == [
        "1-64 devices", "1-64 devices", "65-512 devices", "65-512 devices", "over 512 devices"
    ]  # fmt: skip


def test_the_most_specific_group_with_enough_cases_is_used() -> None:
    table = ResidualTable(tuple(
        rows(MIN_CASES, devices=8, r=0.5, source="a")
        + rows(MIN_CASES, devices=1024, r=-0.5, source="b")
        + rows(MIN_CASES, chip="ampere", framework="megatron-deepspeed", r=1.0, source="c")
    ))  # fmt: skip
    small = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=16,
                       table=table)  # fmt: skip
    assert small is not None and small.basis == f"training, hopper, megatron, 1-64 devices: {MIN_CASES} cases"
    assert 0.5 < small.q_hi < 0.7 and small.q_lo == -small.q_hi and small.note == ""
    # a scale with too few cases: the chip and framework's cases at every scale
    middle = spread_for("training", accelerator="h200-sxm", family="hopper", framework="megatron", devices=256,
                        table=table)  # fmt: skip
    assert middle is not None and middle.basis == f"training, hopper, megatron: {2 * MIN_CASES} cases"
    # a framework never validated on the chip: the chip's other stacks, said so
    fsdp = spread_for("training", accelerator="a100-sxm4-80gb", family="ampere", framework="fsdp", devices=8,
                      table=table)  # fmt: skip
    assert fsdp is not None and fsdp.basis == f"training, ampere, every stack: {MIN_CASES} cases"
    assert "no validated training cases with fsdp on ampere" in fsdp.note


def test_a_chip_without_validated_cases_borrows_the_widest_and_says_so() -> None:
    narrow = rows(30, r=0.0, step=0.001, source="a")
    table = ResidualTable(tuple(narrow + rows(30, chip="ampere", r=0.5, source="b")))
    hopper = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                        table=table)  # fmt: skip
    trn2 = spread_for("training", accelerator="trainium2", family="trainium", framework="neuronx", devices=64,
                      table=table)  # fmt: skip
    assert hopper is not None and trn2 is not None
    assert trn2.basis == "training, ampere: 30 cases"  # wider than the pooled 60: ampere's residuals are all large
    assert trn2.note == (
        "no validated training cases on trainium2: interval from ampere's 30 cases, the widest of any chip's and the "
        "pooled"
    )
    assert trn2.q_hi > hopper.q_hi
    # the pooled cases when no chip's own is wider (a chip with too few cases of its own counts in the pool)
    mixed = ResidualTable(tuple(rows(30, r=0.1, step=0.0, source="a") + rows(10, chip="ampere", r=1.0, step=0.0)))
    pooled = spread_for("training", accelerator="trainium2", family="trainium", framework="neuronx", devices=64,
                        table=mixed)  # fmt: skip
    assert pooled is not None and pooled.basis == "training, every chip and stack: 40 cases"
    assert pooled.note.endswith("interval from all 40 training cases, pooled (no other chip's own is wider)")
    assert pooled.q_hi == pytest.approx(1.0)
    # too few on the chip: borrowed as well, and said so
    thin = ResidualTable(tuple(rows(30, source="a") + rows(5, chip="trainium1", framework="neuronx", source="t")))
    trn1 = spread_for("training", accelerator="trainium1", family="trainium", framework="neuronx", devices=64,
                      table=thin)  # fmt: skip
    assert trn1 is not None and trn1.note.startswith(
        "only 5 training cases from 3 sources on trainium1: interval from "
    )


def test_a_chips_own_few_cases_widen_what_it_borrows_and_never_narrow_it() -> None:
    """One source's runs on a chip are too few to judge it by alone, but where the model missed them by more than
    the borrowed evidence allows, the chip's interval is theirs: borrowed closeness never narrows a chip's own
    misses."""
    gpus = rows(60, kind="collective", framework="nccl-tests", r=0.0, step=0.004, source="a")
    misses = rows(18, kind="collective", chip="trainium1", framework="nccom-test", r=1.5, step=0.1, source="n",
                  sources=1)  # fmt: skip
    where = {"accelerator": "trainium1", "family": "trainium", "framework": "nccom-test", "devices": 64}
    wide = spread_for("collective", **where, table=ResidualTable(tuple(gpus + misses)))
    assert wide is not None and wide.basis == "collective, trainium1: 18 cases" and wide.q_hi > 1.5
    assert wide.note.endswith(
        "widened to trainium1's own 18 left-out cases from 1 source (wider than collective, every chip and stack: "
        "78 cases)"
    )
    close = rows(18, kind="collective", chip="trainium1", framework="nccom-test", r=0.0, step=0.0001, source="n",
                 sources=1)  # fmt: skip
    kept = spread_for("collective", **where, table=ResidualTable(tuple(gpus + close)))
    assert kept is not None and kept.basis == "collective, hopper: 60 cases" and "widened" not in kept.note
    # fewer than the level's rank needs: not enough to widen by
    few = spread_for("collective", **where, level=0.99, table=ResidualTable(tuple(gpus + misses)))
    assert few is not None and "widened" not in few.note


def test_a_collectives_size_band_picks_the_chips_own_cases_that_widen_it() -> None:
    """Trainium1's runs miss by far more at 1-64 MiB than at 64 MiB and up: a large message's interval is widened by
    the large runs only (here not at all: they are as close as the borrowed evidence), a mid-sized one's by the
    mid-sized runs; a size with too few runs of its band is judged by all of the chip's."""
    gpus = rows(60, kind="collective", framework="nccl-tests", r=0.0, step=0.004, source="a")
    trn = {"kind": "collective", "chip": "trainium1", "framework": "nccom-test", "source": "n", "sources": 1}
    mid = [dataclasses.replace(r, size_bytes=2**22) for r in rows(12, **trn, r=1.5, step=0.1)]
    big = [dataclasses.replace(r, id=r.id + "-big", size_bytes=2**28) for r in rows(9, **trn, r=0.1, step=0.0)]
    table = ResidualTable(tuple(gpus + mid + big))
    where = {"accelerator": "trainium1", "family": "trainium", "framework": "nccom-test", "devices": 64, "table": table}
    at_mid = spread_for("collective", **where, size_bytes=8 * 2**20)
    at_big = spread_for("collective", **where, size_bytes=2**30)
    at_small = spread_for("collective", **where, size_bytes=2**10)
    anywhere = spread_for("collective", **where)
    assert at_mid is not None and at_big is not None and at_small is not None and anywhere is not None
    assert at_mid.basis == "collective, trainium1, 1-64 MiB: 12 cases" and at_mid.q_hi > 1.5
    assert "widened to trainium1's own 12 left-out cases of 1-64 MiB from 1 source" in at_mid.note
    assert "widened" not in at_big.note and at_big.q_hi < 0.5  # the large runs are as close as the GPUs'
    assert at_small.basis == anywhere.basis == "collective, trainium1: 21 cases"  # no run under 1 MiB: all of them
    assert [size_band(s) for s in (2**20 - 1, 2**20, 2**26 - 1, 2**26)] == [
        "under 1 MiB", "1-64 MiB", "1-64 MiB", "64 MiB and up"
    ]  # fmt: skip


def test_a_thin_kind_borrows_every_kind_and_a_missing_kind_has_none() -> None:
    table = ResidualTable(tuple(rows(5, kind="inference", framework="tensorrt-llm", source="x") + rows(30, source="a")))
    thin = spread_for("inference", accelerator="h100-sxm", family="hopper", framework="tensorrt-llm", devices=8,
                      table=table)  # fmt: skip
    assert thin is not None and thin.basis == "every kind, chip and stack: 35 cases"
    assert thin.note == (
        "only 5 serving cases from 3 sources on hopper and 5 of any chip: interval from all 35 cases of every kind, "
        "pooled, wider"
    )
    assert spread_for("memory", accelerator="h100-sxm", family="hopper", framework=None, devices=8, table=table) is None


def test_a_latency_field_is_judged_by_its_own_residuals_and_throughput_never_by_them() -> None:
    serving = {"kind": "inference", "framework": "tensorrt-llm"}
    table = ResidualTable(tuple(
        rows(30, **serving, field="output_tokens_per_s", r=0.0, step=0.001, source="a")
        + rows(30, **serving, field="ttft_s", r=1.0, step=0.0, source="b")
        + rows(30, **serving, field="tpot_s", r=-0.3, step=0.0, source="c")
    ))  # fmt: skip
    where = {"accelerator": "h100-sxm", "family": "hopper", "framework": "tensorrt-llm", "devices": 8, "table": table}
    throughput = spread_for("inference", **where, field="output_tokens_per_s")
    ttft = spread_for("inference", **where, field="ttft_s")
    tpot = spread_for("inference", **where, field="tpot_s")
    assert throughput is not None and ttft is not None and tpot is not None
    assert throughput == spread_for("inference", **where) and throughput.cases == 30 and throughput.q_hi < 0.05
    assert ttft.basis == "inference TTFT, hopper, tensorrt-llm, 1-64 devices: 30 cases"
    assert ttft.q_hi == pytest.approx(1.0) and tpot.q_lo == pytest.approx(-0.3)
    # too few of a latency field: its own pooled, never the other figures' (a chip with none borrows the widest)
    thin = ResidualTable(tuple(rows(30, **serving, field="output_tokens_per_s", source="a")
                               + rows(3, **serving, field="ttft_s", r=1.0, step=0.0, source="b")))  # fmt: skip
    pooled = spread_for("inference", **(where | {"table": thin}), field="ttft_s")
    assert pooled is not None and pooled.cases == 3 and pooled.q_hi == pytest.approx(1.0)
    assert "only 3 serving TTFT cases" in pooled.note
    assert spread_for("inference", **(where | {"table": thin}), field="tpot_s") is None


def test_a_percentile_of_too_few_sources_is_never_narrower_than_its_means_interval() -> None:
    """Two load generators' medians judge each other, not a third stack's: while a percentile's residuals come from
    fewer than MIN_SOURCES sources its interval is the wider of its own and its mean's; from enough, its own."""
    serving = {"kind": "inference", "framework": "sglang"}
    mean = rows(30, **serving, field="ttft_s", r=0.0, step=0.04, source="m")  # three sources, a wide spread
    two = rows(30, **serving, field="ttft_p50_s", r=0.0, step=0.002, source="p", sources=2)  # two, a narrow one
    where = {"accelerator": "h100-sxm", "family": "hopper", "framework": "sglang", "devices": 8}
    borrowed = spread_for("inference", **where, table=ResidualTable(tuple(mean + two)), field="ttft_p50_s")
    own_mean = spread_for("inference", **where, table=ResidualTable(tuple(mean + two)), field="ttft_s")
    assert borrowed is not None and own_mean is not None
    assert (borrowed.q_lo, borrowed.q_hi) == (own_mean.q_lo, own_mean.q_hi)
    assert (
        "median TTFT: 30 cases from 2 sources, too few to judge by alone: the wider interval of TTFT" in borrowed.note
    )
    # the median's own, from three sources: its own narrow spread stands
    three = rows(30, **serving, field="ttft_p50_s", r=0.0, step=0.002, source="p", sources=3)
    own = spread_for("inference", **where, table=ResidualTable(tuple(mean + three)), field="ttft_p50_s")
    assert own is not None and own.q_hi < 0.05 and "median TTFT" in own.basis and "too few" not in own.note
    # its own wider than the mean's: its own, whatever its sources
    wide = rows(30, **serving, field="ttft_p99_s", r=0.0, step=0.2, source="p", sources=2)
    p99 = spread_for("inference", **where, table=ResidualTable(tuple(mean + wide)), field="ttft_p99_s")
    assert p99 is not None and p99.q_hi > own_mean.q_hi and "p99 TTFT" in p99.basis


def test_excluding_a_source_removes_its_residuals() -> None:
    table = ResidualTable(tuple(rows(30, r=2.0, source="own", sources=1) + rows(30, r=0.0, source="other")))
    with_own = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                          table=table)  # fmt: skip
    without = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                         table=table, exclude_source="own")  # fmt: skip
    assert with_own is not None and without is not None
    assert without.cases == 30 and without.q_hi < 0.5 < with_own.q_hi


def test_a_group_of_too_few_publications_does_not_judge_a_new_one() -> None:
    """Cases enough but from fewer than MIN_SOURCES sources: one publication's agreement with the model (here
    a tight one) is not the model's error on another; the chip's cases of every scale judge instead."""
    one = rows(MIN_CASES, devices=8, r=0.0, step=0.001, source="tight", sources=MIN_SOURCES - 1)
    table = ResidualTable(tuple(one + rows(MIN_CASES, devices=1024, r=0.0, step=0.05, source="wide")))
    found = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                       table=table)  # fmt: skip
    assert found is not None and found.basis == f"training, hopper, megatron: {2 * MIN_CASES} cases"
    assert found.q_hi > 0.3


def test_a_stack_too_thin_to_judge_alone_still_widens_the_chips_interval() -> None:
    """vLLM's few left-out runs (under MIN_CASES, from two sources) do not size its interval alone, but the chip's
    cases of another stack, met closely, do not narrow it below theirs; fewer than the level's rank leave it be."""
    reference = rows(MIN_CASES, kind="inference", framework="tensorrt-llm", r=0.0, step=0.001, source="trt",
                     field="output_tokens_per_s")  # fmt: skip
    vllm = rows(8, kind="inference", framework="vllm", r=0.6, step=0.05, source="v", sources=2,
                field="output_tokens_per_s")  # fmt: skip
    kwargs = {"accelerator": "h100-sxm", "family": "hopper", "framework": "vllm", "devices": 1}
    widened = spread_for("inference", table=ResidualTable(tuple(reference + vllm)), **kwargs)
    assert widened is not None and widened.basis == "inference, hopper, vllm: 8 cases"
    assert widened.q_hi > 0.6 and "widened to vllm's own 8 left-out cases" in widened.note
    table = ResidualTable(tuple(reference + vllm))
    trt = spread_for("inference", table=table, **(kwargs | {"framework": "tensorrt-llm"}))
    assert trt is not None and trt.q_hi < 0.05  # the reference stack's own group, untouched
    one_source = rows(8, kind="inference", framework="vllm", r=0.6, source="v", sources=1, field="output_tokens_per_s")
    alone = spread_for("inference", table=ResidualTable(tuple(reference + one_source)), **kwargs)
    assert alone is not None and "widened" not in alone.note  # one publication's runs do not widen on their own
    close = rows(8, kind="inference", framework="vllm", r=0.0, step=0.0001, source="v", sources=2,
                 field="output_tokens_per_s")  # fmt: skip
    kept = spread_for("inference", table=ResidualTable(tuple(reference + close)), **kwargs)
    assert kept is not None and kept.basis.startswith("inference, hopper, every stack")  # never narrowed


def test_a_higher_level_needs_more_cases_and_goes_up_the_hierarchy() -> None:
    table = ResidualTable(tuple(rows(60, source="a") + rows(60, chip="ampere", source="b")))
    at_80 = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                       table=table)  # fmt: skip
    at_99 = spread_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=8,
                       level=0.99, table=table)  # fmt: skip
    assert at_80 is not None and at_80.cases == 60
    assert at_99 is not None and at_99.cases == 120  # 99 are needed at 99%


def test_the_packaged_residuals_give_an_interval_for_every_kind() -> None:
    table = load_residuals()
    assert {r.kind for r in table.residuals} == {"training", "inference", "collective", "memory"}
    step = interval_for("training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=128,
                        predicted=10.0)  # fmt: skip
    assert step is not None and step.low < 10.0 < step.high and step.level == 0.8
    busbw = interval_for("collective", accelerator="h100-sxm", family="hopper", framework=None, devices=16,
                         predicted=100.0, rate=True)  # fmt: skip
    assert busbw is not None and busbw.low < busbw.high
    peak = interval_for("memory", accelerator="h100-sxm", family="hopper", framework="megatron", devices=64,
                        predicted=60.0)  # fmt: skip
    assert peak is not None and peak.low < 60.0 < peak.high  # bytes go as durations: more memory, a higher end
    with pytest.raises(Exception, match="--level"):
        interval_for("training", accelerator="h100-sxm", family="hopper", framework=None, devices=8, predicted=1.0,
                     level=1.0)  # fmt: skip


def featured(rows_: list[Residual], *layout: str) -> list[Residual]:
    return [dataclasses.replace(r, layout=layout) for r in rows_]


def test_a_layout_is_judged_by_the_runs_sharing_its_features_where_they_are_wider() -> None:
    # the chip's cases are tight; the pipelined expert-parallel runs (on another chip) are spread wide
    tight = rows(MIN_CASES, devices=8, r=0.0, step=0.001, source="a")
    wide = featured(rows(MIN_CASES, chip="ampere", r=0.0, step=0.05, source="b"), "pipeline", "experts")
    table = ResidualTable(tuple(tight + wide))
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "megatron", "devices": 8, "table": table}
    plain = spread_for("training", **ask)
    piped = spread_for("training", **ask, layout=("pipeline", "experts"))
    assert plain is not None and piped is not None
    assert piped.q_hi - piped.q_lo > 10 * (plain.q_hi - plain.q_lo)
    assert piped.basis == f"training, every chip, layouts with pipeline, experts: {MIN_CASES} cases"
    assert "widened to the 20 left-out cases whose layouts also have pipeline, experts" in piped.note
    # a feature the wide runs lack: not judged by them; one more than they have: judged by them all the same (a
    # feature added to a layout never narrows its interval, though too few runs have all three)
    assert spread_for("training", **ask, layout=("context",)) == plain
    more = spread_for("training", **ask, layout=("pipeline", "experts", "fp8"))
    assert more is not None and more.q_hi == piped.q_hi and "also have pipeline, experts" in more.note
    # a subset of their features is judged by them (they have it too)
    piped_only = spread_for("training", **ask, layout=("pipeline",))
    assert piped_only is not None and piped_only.q_hi == piped.q_hi


def test_a_layout_group_narrower_than_the_chips_never_narrows_the_interval() -> None:
    wide = rows(MIN_CASES, devices=8, r=0.0, step=0.05, source="a")
    tight = featured(rows(MIN_CASES, chip="ampere", r=0.0, step=0.001, source="b"), "sharded")
    table = ResidualTable(tuple(wide + tight))
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "megatron", "devices": 8, "table": table}
    assert spread_for("training", **ask, layout=("sharded",)) == spread_for("training", **ask)


def test_too_few_runs_with_the_features_leave_the_interval_as_it_is() -> None:
    tight = rows(MIN_CASES, devices=8, r=0.0, step=0.001, source="a")
    wide = featured(rows(MIN_CASES - 1, chip="ampere", r=0.0, step=0.05, source="b"), "context")
    table = ResidualTable(tuple(tight + wide))
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "megatron", "devices": 8, "table": table}
    assert spread_for("training", **ask, layout=("context",)) == spread_for("training", **ask)


def test_layout_features_name_what_the_layout_runs() -> None:
    assert layout_features(pp=1, cp=1, ep=1, zero=1, precision="bf16", seq_len=4096) == ()
    assert layout_features(pp=8, cp=2, ep=64, zero=3, precision="fp8", seq_len=131072) == (
        "pipeline", "context", "experts", "sharded", "fp8", "long_sequence"
    )  # fmt: skip
    assert layout_features(pp=1, cp=1, ep=1, zero=2, precision="fp4", seq_len=8192) == ("fp8",)
    # each feature from the smallest degree that makes it (2 stages, 2 context or expert ranks, ZeRO 3)
    one = {"pp": 1, "cp": 1, "ep": 1, "zero": 2, "precision": "bf16", "seq_len": 4096}
    for degree, feature in (("pp", "pipeline"), ("cp", "context"), ("ep", "experts")):
        assert layout_features(**{**one, degree: 2}) == (feature,)
    assert layout_features(**{**one, "zero": 3}) == ("sharded",)
    # a long sequence from 16K tokens, with or without context parallelism
    assert layout_features(pp=1, cp=1, ep=1, zero=1, precision="bf16", seq_len=16384) == ("long_sequence",)
    assert layout_features(pp=1, cp=1, ep=1, zero=1, precision="bf16", seq_len=16383) == ()


def test_serving_features_name_a_moe_model_and_attention_data_parallel_from_two_groups() -> None:
    assert serving_features(1, experts=False) == ()
    assert serving_features(2, experts=True) == ("experts", ATTENTION_DP) == ("experts", "attention_dp")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(LAYOUT_FEATURES), unique=True),
    st.lists(st.sampled_from(LAYOUT_FEATURES), unique=True),
)
def test_a_feature_added_to_a_layout_never_narrows_its_interval(base: list[str], extra: list[str]) -> None:
    """On the packaged residuals: a layout's interval is at least as wide as that of any layout with a subset of
    its features."""
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "megatron", "devices": 256}
    fewer = spread_for("training", **ask, layout=tuple(f for f in LAYOUT_FEATURES if f in base))
    more = spread_for("training", **ask, layout=tuple(f for f in LAYOUT_FEATURES if f in set(base) | set(extra)))
    assert fewer is not None and more is not None
    assert more.q_hi - more.q_lo >= fewer.q_hi - fewer.q_lo - 1e-12


def test_a_moe_deployment_is_widened_by_the_moe_runs_and_a_dense_one_keeps_every_run() -> None:
    """Serving: ``experts`` widens (a MoE deployment's interval is never narrower than the MoE runs' spread) and does
    not select (a dense deployment is judged by the MoE runs on its chip beside the dense ones); attention DP
    selects (a tensor-parallel deployment never sees the attention-DP runs)."""
    serving = {"kind": "inference", "framework": "tensorrt-llm", "field": "output_tokens_per_s"}
    dense = rows(MIN_CASES, **serving, r=0.0, step=0.001, source="a")
    moe = featured(rows(MIN_CASES // 4, **serving, r=0.0, step=0.04, source="b"), "experts")
    elsewhere = featured(rows(MIN_CASES, **serving, chip="ampere", r=0.0, step=0.05, source="c"), "experts")
    grouped = featured(
        rows(MIN_CASES, **serving, chip="ampere", r=0.0, step=0.2, source="d"), "experts", "attention_dp"
    )
    ask = {"accelerator": "h100-sxm", "family": "hopper", "framework": "tensorrt-llm", "devices": 8}
    table = ResidualTable(tuple(dense + moe + elsewhere + grouped))
    alone = spread_for("inference", **ask, table=ResidualTable(tuple(dense)))
    plain = spread_for("inference", **ask, table=table)
    wide = spread_for("inference", **ask, table=table, layout=("experts",))
    widest = spread_for("inference", **ask, table=table, layout=("experts", "attention_dp"))
    assert alone is not None and plain is not None and wide is not None and widest is not None
    assert plain.basis == f"inference, hopper, tensorrt-llm, 1-64 devices: {MIN_CASES + MIN_CASES // 4} cases"
    assert plain.q_hi - plain.q_lo > 2 * (alone.q_hi - alone.q_lo)  # the MoE runs on the chip count for dense ones
    assert wide.basis == f"inference, every chip, layouts with experts: {MIN_CASES + MIN_CASES // 4} cases"
    assert wide.q_hi - wide.q_lo > plain.q_hi - plain.q_lo and "also have experts" in wide.note
    assert widest.basis == f"inference, every chip, layouts with experts, attention_dp: {MIN_CASES} cases"
    assert widest.q_hi - widest.q_lo > 3 * (wide.q_hi - wide.q_lo)
