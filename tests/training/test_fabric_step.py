"""One training step's communication on the flow simulator: the groups are the estimator's (rank order
and messages), on a non-blocking sprayed fabric each kind runs at the analytic link bound, and
sharing the fabric never speeds a kind up."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.network.collectives import Op
from clustersim.network.flowsim.cluster import Placement, fat_tree_for_instance, place
from clustersim.network.flowsim.routing import Routing
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.fabric_step import rank_gpus, step_collectives, step_on_fabric, strided_groups
from clustersim.training.job import TrainingJob
from clustersim.workload import zoo

CATALOG = load_catalog(use_env=False)
MODEL = zoo.load_model("llama3-8b", use_env=False)
SYSTEM = system_for_instance(CATALOG, "p5.48xlarge", 4)
JOB = TrainingJob(global_batch=64, seq_len=MODEL.seq_len)
LAYOUT = Layout(tp=8, pp=2, dp=2, zero=1, sequence_parallel=True)


def _fabric(oversubscription: float | None = None):
    return fat_tree_for_instance(CATALOG, "p5.48xlarge", 4, fabric_hosts=64, oversubscription=oversubscription)


def test_groups_follow_megatron_rank_order():
    # 32 ranks, tp 4 innermost, then cp 2, dp 2, pp 2 outermost: a stage holds 16 ranks.
    assert strided_groups(32, 4, 1, 16)[:2].tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert strided_groups(32, 2, 4, 16)[:5].tolist() == [[0, 4], [1, 5], [2, 6], [3, 7], [8, 12]]
    assert strided_groups(32, 4, 4, 16)[4].tolist() == [16, 20, 24, 28]  # dp x cp of the second stage
    with pytest.raises(ClusterSimError, match="do not tile"):
        strided_groups(32, 3, 4, 16)


@settings(max_examples=40, deadline=None)
@given(size=st.sampled_from([1, 2, 4, 8]), stride=st.sampled_from([1, 2, 4]), blocks=st.integers(1, 4))
def test_strided_groups_partition_the_ranks(size: int, stride: int, blocks: int):
    block = size * stride * 2
    groups = strided_groups(block * blocks, size, stride, block)
    assert np.array_equal(np.sort(groups.reshape(-1)), np.arange(block * blocks))
    assert np.all(np.diff(groups, axis=1) == stride)
    assert np.all(groups[:, :1] // block == groups // block)  # a group stays inside its block


def test_the_step_collectives_are_the_ones_the_estimator_prices():
    estimate = estimate_training(MODEL, SYSTEM, LAYOUT, JOB)
    terms = {t.name: t.link_s for t in estimate.terms}
    kinds = {c.kind: c for c in step_collectives(MODEL, SYSTEM, LAYOUT, JOB)}
    assert set(kinds) == {"tp", "pp", "dp reduce-scatter", "dp all-gather"}
    assert kinds["tp"].per_step * kinds["tp"].analytic_time_s == pytest.approx(terms["tp comm"], rel=1e-12)
    assert kinds["pp"].per_step * kinds["pp"].analytic_time_s == pytest.approx(terms["pp comm"], rel=1e-12)
    dp = sum(kinds[k].per_step * kinds[k].analytic_time_s for k in ("dp reduce-scatter", "dp all-gather"))
    assert dp == pytest.approx(terms["dp comm"], rel=1e-12)
    # 2 pipeline stages of 16 ranks: every rank of stage 0 hands on to the same rank of stage 1.
    assert kinds["pp"].groups.tolist() == [[r, r + 16] for r in range(16)]
    assert kinds["dp reduce-scatter"].groups.shape == (16, 2) and kinds["tp"].groups.shape == (4, 8)
    # Interleaved: the last stage hands the next model chunk back to the first.
    interleaved = Layout(tp=8, pp=2, vp=2, dp=2, zero=1, sequence_parallel=True)
    pairs = next(c for c in step_collectives(MODEL, SYSTEM, interleaved, JOB) if c.kind == "pp").groups
    assert pairs.tolist() == [[r, (r + 16) % 32] for r in range(32)]


def test_context_parallel_exchange_matches_the_cp_term():
    layout = Layout(tp=4, cp=2, dp=4, zero=0, sequence_parallel=True)
    estimate = estimate_training(MODEL, SYSTEM, layout, JOB)
    kinds = {c.kind: c for c in step_collectives(MODEL, SYSTEM, layout, JOB)}
    cp_term = next(t.link_s for t in estimate.terms if t.name == "cp comm")
    assert kinds["cp"].per_step * kinds["cp"].analytic_time_s == pytest.approx(cp_term, rel=1e-12)
    assert kinds["dp"].op is Op.ALL_REDUCE and kinds["dp"].groups.shape == (4, 8)  # dp x cp ranks, tp apart


def test_on_a_non_blocking_sprayed_fabric_each_kind_runs_at_the_analytic_link_bound():
    tree = _fabric()
    step = step_on_fabric(step_collectives(MODEL, SYSTEM, LAYOUT, JOB), tree, place(tree, 4), layout=LAYOUT, title="t")
    for kind in step.kinds:
        assert kind.time_s == pytest.approx(kind.collective.ideal_time_s, rel=1e-9), kind.collective.kind
        assert kind.together_time_s >= kind.time_s * (1 - 1e-9)  # sharing the fabric never helps
    by_kind = {k.collective.kind: k for k in step.kinds}
    assert by_kind["tp"].links.binding_tier == "nvlink"  # tp 8 stays in the host
    assert by_kind["dp reduce-scatter"].busbw_bytes_per_s == pytest.approx(50e9)  # one GPU's 4 x 100 Gb/s rails
    # At once, a stage-0 GPU's rails (50 GB/s) carry its reduce-scatter and all-gather chunks (half the
    # size each: 2 ranks, one step) and its pipeline send: three ways until the send is done, then two.
    rs, pp = by_kind["dp reduce-scatter"], by_kind["pp"]
    chunk, sent = rs.collective.size_bytes / 2, pp.collective.size_bytes
    assert pp.together_time_s == pytest.approx(3 * sent / 50e9, rel=1e-9)
    assert rs.together_time_s == pytest.approx((sent + 2 * chunk) / 50e9, rel=1e-9)
    out = step.to_dict()
    assert out["max_link_utilization"] == pytest.approx(1.0)
    assert {"time_s", "busbw_bytes_per_s", "max_link_utilization"} <= set(out["collectives"][0])


def test_a_scattered_ecmp_job_on_a_2_to_1_fabric_is_no_faster():
    collectives = step_collectives(MODEL, SYSTEM, LAYOUT, JOB)
    tree = _fabric()
    ideal = step_on_fabric(collectives, tree, place(tree, 4), layout=LAYOUT, title="t")
    thin = _fabric(oversubscription=2)
    hosts = place(thin, 4, Placement.RANDOM, seed=5)
    worse = step_on_fabric(collectives, thin, hosts, layout=LAYOUT, title="t", routing=Routing.ECMP, seed=5)
    for a, b in zip(ideal.kinds, worse.kinds, strict=True):
        assert b.time_s >= a.time_s * (1 - 1e-9)
    assert rank_gpus(thin, hosts, 32)[8:16].tolist() == (hosts[1] * 8 + np.arange(8)).tolist()


def test_the_placement_must_hold_the_layouts_ranks():
    tree = _fabric()
    with pytest.raises(ClusterSimError, match="not the layout's 32") as err:
        step_on_fabric(step_collectives(MODEL, SYSTEM, LAYOUT, JOB), tree, place(tree, 3), layout=LAYOUT, title="t")
    assert err.value.field == "nodes"
