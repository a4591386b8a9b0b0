"""The candidate space: generated as arrays, filtered by the same rules Layout.check enforces."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, Recompute, RuleInputs, expert_tp, layout_mask
from clustersim.plan.space import SearchSpace, candidate_layouts, why_no_layout
from clustersim.system import system_for_instance
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)


def _keeps_rules(layout: Layout, model, devices: int, job: TrainingJob) -> bool:
    try:
        layout.check(model, num_devices=devices, global_batch=job.global_batch, seq_len=job.seq_len)
    except ClusterSimError:
        return False
    return True


@pytest.mark.parametrize(
    ("model_id", "instance", "nodes", "seq"),
    [
        ("llama3-70b", "p5.48xlarge", 4, 8192),
        ("mixtral-8x7b", "p5.48xlarge", 2, 32768),
        ("gpt3-175b", "p4d.24xlarge", 8, 2048),
    ],
)
def test_the_array_space_is_exactly_the_layouts_that_keep_the_rules(model_id, instance, nodes, seq):
    model = load_model(model_id, use_env=False)
    system = system_for_instance(CATALOG, instance, nodes)
    job = TrainingJob(global_batch=512, seq_len=seq)
    dims = SearchSpace().resolved(model, system, job)
    expected = []
    for tp, pp, vp, cp, ep, mb, recompute, zero, etp in itertools.product(
        dims.tp, dims.pp, dims.vp, dims.cp, dims.ep, dims.micro_batch, dims.recompute, dims.zero, dims.etp
    ):
        if system.num_devices % (tp * pp * cp):
            continue
        dp = system.num_devices // (tp * pp * cp)
        if etp and etp == expert_tp(tp, cp, dp, ep):  # the derived degree stated: the same layout twice
            continue
        layout = Layout(
            tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, micro_batch=mb, recompute=Recompute(recompute), zero=zero,
            sequence_parallel=tp > 1, etp=etp or None,
        )  # fmt: skip
        if _keeps_rules(layout, model, system.num_devices, job):
            expected.append(layout)
    arrays = candidate_layouts(model, system, job)
    assert [arrays.layout(i) for i in range(len(arrays))] == expected
    assert len(expected) > 10


@settings(max_examples=150, deadline=None)
@given(
    tp=st.sampled_from([1, 2, 3, 4, 8, 16]),
    pp=st.sampled_from([1, 2, 3, 4, 5, 8]),
    vp=st.sampled_from([1, 2, 3]),
    cp=st.sampled_from([1, 2, 4]),
    ep=st.sampled_from([1, 2, 4, 8]),
    mb=st.sampled_from([1, 2, 3, 4]),
    sp=st.booleans(),
    uneven=st.booleans(),
    moe=st.booleans(),
    devices=st.sampled_from([8, 16, 64, 96]),
    batch=st.sampled_from([64, 96, 100, 512]),
    seq=st.sampled_from([2048, 3000, 8192]),
)
def test_the_mask_and_the_check_agree_on_any_layout(tp, pp, vp, cp, ep, mb, sp, uneven, moe, devices, batch, seq):
    model = load_model("mixtral-8x7b" if moe else "llama3-8b", use_env=False)
    dp = max(devices // (tp * pp * cp), 1)
    layout = Layout(
        tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, micro_batch=mb, sequence_parallel=sp, uneven_stages=uneven
    )
    job = TrainingJob(global_batch=batch, seq_len=seq)
    mask = layout_mask(LayoutArrays.of([layout]), RuleInputs(model, devices, batch, seq))
    assert bool(mask[0]) == _keeps_rules(layout, model, devices, job)


def test_a_restricted_space_holds_only_the_given_values():
    model = load_model("llama3-70b", use_env=False)
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(global_batch=512, seq_len=8192)
    arrays = candidate_layouts(model, system, job, SearchSpace(tp=(8,), pp=(2, 4), zero=(1,), recompute=("full",)))
    assert set(arrays.tp) == {8} and set(arrays.pp) <= {2, 4} and set(arrays.zero) == {1}
    assert arrays.recompute_full.all() and not arrays.recompute_selective.any()
    assert np.all(arrays.tp * arrays.pp * arrays.dp * arrays.cp == system.num_devices)


def test_select_and_layout_round_trip():
    layouts = [Layout(tp=8, dp=2, recompute=Recompute.FULL, tp_overlap=False), Layout(pp=4, vp=2, dp=4, zero=3)]
    arrays = LayoutArrays.of(layouts)
    assert [arrays.layout(i) for i in range(2)] == layouts
    assert arrays.select(np.array([1, 0])).layout(0) == layouts[1]


def test_sequence_parallelism_is_a_dimension_of_the_space():
    model = load_model("llama3-70b", use_env=False)
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(global_batch=512, seq_len=8192)
    default = candidate_layouts(model, system, job)
    assert np.array_equal(default.sequence_parallel, default.tp > 1)
    off = candidate_layouts(model, system, job, SearchSpace(sp=(False,)))
    assert len(off) and not off.sequence_parallel.any()
    on = candidate_layouts(model, system, job, SearchSpace(sp=(True,)))
    assert len(on) and on.sequence_parallel.all() and (on.tp > 1).all()


def test_uneven_stages_widen_the_pipeline_choices():
    model = load_model("llama3-8b", use_env=False)  # 32 layers
    system = system_for_instance(CATALOG, "p5.48xlarge", 3)
    job = TrainingJob(global_batch=480, seq_len=8192)
    even = candidate_layouts(model, system, job, SearchSpace(pp=(3,)))
    uneven = candidate_layouts(model, system, job, SearchSpace(pp=(3,), uneven_stages=True))
    assert len(even) == 0 and len(uneven) > 0 and uneven.uneven_stages.all()


def test_an_empty_space_says_which_rule_every_candidate_breaks():
    model = load_model("llama3-70b", use_env=False)
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(global_batch=512, seq_len=8192)
    assert "does not divide the 32 devices" in why_no_layout(model, system, job, SearchSpace(tp=(3,)))
    assert "dp*micro_batch" in why_no_layout(model, system, job, SearchSpace(micro_batch=(3,)))
    short = TrainingJob(global_batch=512, seq_len=3)
    reason = why_no_layout(model, system, short, SearchSpace(tp=(8,), sp=(True,)))
    assert "sequence length 3" in reason


def test_an_empty_dimension_is_refused():
    with pytest.raises(ClusterSimError, match="zero needs at least one value"):
        SearchSpace(zero=())
    with pytest.raises(ClusterSimError, match="unknown recompute"):
        SearchSpace(recompute=("some",))
    with pytest.raises(ClusterSimError, match="etp -1 is not a degree"):
        SearchSpace(etp=(0, -1))
    with pytest.raises(ClusterSimError, match="etp needs at least one value"):
        SearchSpace(etp=())


def test_a_moe_space_tries_whole_experts_where_the_derived_degree_splits_them():
    """etp 1 beside the derived degree for a MoE model (never the derived degree twice), none for a dense one."""
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(global_batch=128, seq_len=4096)
    moe = load_model("mixtral-8x7b", use_env=False)
    both = candidate_layouts(moe, system, job)
    stated = both.etp_stated == 1
    assert stated.any() and (both.tp[stated] > 1).all()  # tp 1 derives 1 already
    assert (expert_tp(both.tp, both.cp, both.dp, both.ep)[stated] != 1).all()
    derived = candidate_layouts(moe, system, job, SearchSpace(etp=(0,)))
    assert len(derived) == int((~stated).sum()) and not derived.etp_stated.any()
    held = candidate_layouts(moe, system, job, SearchSpace(etp=(1,)))  # held: every layout states it, tp 1 too
    assert (held.etp_stated == 1).all() and (held.tp == 1).any()
    dense = candidate_layouts(load_model("llama3-8b", use_env=False), system, job)
    assert not dense.etp_stated.any()
    reason = why_no_layout(load_model("llama3-8b", use_env=False), system, job, SearchSpace(etp=(1,)))
    assert "needs a mixture-of-experts model" in reason
