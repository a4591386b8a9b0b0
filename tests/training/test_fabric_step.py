"""One training step's communication on the flow simulator: the groups are the estimator's (rank order
and messages), on a non-blocking sprayed fabric each kind runs at the analytic link bound, and
sharing the fabric never speeds a kind up."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.software import software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.network.collectives import Op
from clustersim.network.flowsim.cluster import Placement, fat_tree_for_instance, place
from clustersim.network.flowsim.engine import run
from clustersim.network.flowsim.groups import concatenate, dispatch_flows
from clustersim.network.flowsim.results import collective_time_s, job_times
from clustersim.network.flowsim.routing import Routing, route
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.fabric_step import rank_gpus, step_collectives, step_on_fabric, strided_groups
from clustersim.training.job import TrainingJob
from clustersim.workload import zoo

# These tests check the link-bound view: datasheet links, no latency (``ideal``, ``--ideal``).
step_on_fabric = functools.partial(step_on_fabric, ideal=True)

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


MIXTRAL = zoo.load_model("mixtral-8x7b", use_env=False)  # 8 experts, 2 per token


@pytest.mark.parametrize(
    ("layout", "precision"),
    [
        (Layout(tp=2, pp=2, dp=8, ep=8, zero=1, sequence_parallel=True), Dtype.BF16),  # 2 nodes x 4 ranks
        (Layout(tp=8, dp=4, ep=4, zero=1, sequence_parallel=True), Dtype.FP8),  # 4 nodes x 1 rank
    ],
)
def test_ep_dispatch_and_combine_are_priced_as_the_estimator_prices_them(layout: Layout, precision: Dtype):
    job = TrainingJob(global_batch=64, seq_len=MIXTRAL.seq_len, precision=precision)
    ep_term = next(t.link_s for t in estimate_training(MIXTRAL, SYSTEM, layout, job).terms if t.name == "ep comm")
    kinds = {c.kind: c for c in step_collectives(MIXTRAL, SYSTEM, layout, job)}
    dispatch, combine = kinds["ep dispatch"], kinds["ep combine"]
    assert dispatch.per_step * dispatch.analytic_time_s + combine.per_step * combine.analytic_time_s == pytest.approx(
        ep_term, rel=1e-12
    )
    fp8 = software_for(None, SYSTEM.accelerator.family).ep_dispatch_bytes_fp8
    assert dispatch.size_bytes / combine.size_bytes == pytest.approx(fp8 / 2 if precision is Dtype.FP8 else 1.0)
    # Per node (Megatron-Core with DeepEP): a token misses a node of E / N = 8 / N experts with probability
    # C(8 - 8/N, 2) / C(8, 2); it crosses (N - 1)(1 - miss) times where a plain all-to-all sends 2 (N - 1) / N.
    nodes = layout.ep // combine.fan_out_ranks
    miss = math.comb(8 - 8 // nodes, 2) / math.comb(8, 2)
    assert combine.copy_ratio == pytest.approx((nodes - 1) * (1 - miss) / (2 * (nodes - 1) / nodes))
    assert combine.fan_out_ranks == 8 // combine.stride


def test_the_simulated_per_node_dispatch_runs_at_the_analytic_link_bound():
    layout = Layout(tp=2, pp=2, dp=8, ep=8, zero=1, sequence_parallel=True)
    job = TrainingJob(global_batch=64, seq_len=MIXTRAL.seq_len)
    tree = _fabric()
    step = step_on_fabric(
        step_collectives(MIXTRAL, SYSTEM, layout, job), tree, place(tree, 4), layout=layout, title="t"
    )
    combine = next(k for k in step.kinds if k.collective.kind == "ep combine")
    # 2 nodes of 4 ranks: each rank's copies to the other node, ratio 1 - C(4,2)/C(8,2) = 22/28 of half its
    # bytes, leave on its own rails (4 x 100 Gb/s = 50 GB/s); the NVLink fan-out (3/4 of the bytes) is faster.
    size = combine.collective.size_bytes
    assert combine.time_s == pytest.approx(size * 22 / 28 / 2 / 50e9, rel=1e-9)
    assert combine.time_s == pytest.approx(combine.collective.ideal_time_s, rel=1e-9)
    # A plain all-to-all (DeepSpeed's profile) sends every routed copy: 28/22 times as long.
    plain = step_collectives(MIXTRAL, SYSTEM, layout, job, software=software_for("deepspeed", "hopper"))
    assert next(c for c in plain if c.kind == "ep combine").copy_ratio == 1.0
    slow = step_on_fabric(plain, tree, place(tree, 4), layout=layout, title="t")
    assert next(k for k in slow.kinds if k.collective.kind == "ep combine").time_s == pytest.approx(
        size / 2 / 50e9, rel=1e-9
    )


def test_a_dispatch_bound_by_its_fan_out_takes_the_fan_outs_time():
    # 2 hosts of 2 GPUs, 1 GB/s rails and 0.1 GB/s NVLink ports: the fan-out binds.
    spec = FatTreeSpec(num_hosts=2, gpus_per_host=2, nics_per_host=2, nic_bytes_per_s=1e9, scaleup_bytes_per_s=1e8)
    tree = build(spec)
    plans = dispatch_flows(np.array([[0, 1, 2, 3]]), 2, 1e9, 0.5, 2)
    flows = concatenate([p.flows for p in plans])
    inc = route(tree, flows.src_gpu, flows.dst_gpu, Routing.SPRAY)
    times = run(tree, flows, inc)
    net, fan = (job_times(times, inc, s, tree.capacity_bytes_per_s) for s in (slice(0, 8), slice(8, 12)))
    assert plans[0].flows.num_flows == 8 and plans[1].flows.num_flows == 4
    # A GPU's NVLink port: the network all-to-all's 0.125 GB to its host peer and the fan-out's 0.5 GB,
    # shared until the first is done (2.5 s), then the rest alone (3.75 s); the network round takes 0.25 s.
    assert collective_time_s(plans[1], fan, tree.capacity_bytes_per_s) == pytest.approx(6.25, rel=1e-9)
    assert collective_time_s(plans[0], net, tree.capacity_bytes_per_s) == pytest.approx(2.5, rel=1e-9)
    with pytest.raises(ClusterSimError, match="not on one host"):
        dispatch_flows(np.array([[0, 2, 1, 3]]), 2, 1e9, 0.5, 2)
    with pytest.raises(ClusterSimError, match="copy ratio"):
        dispatch_flows(np.array([[0, 1, 2, 3]]), 2, 1e9, 1.5, 2)
    with pytest.raises(ClusterSimError, match="fan out ratio must be in"):
        dispatch_flows(np.array([[0, 1, 2, 3]]), 2, 1e9, 0.5, 2, 0.0)


def test_a_per_gpu_fan_out_sends_its_share_of_the_bytes():
    """One copy a GPU holding a token's experts: the fan-out's flows carry ``fan_out_ratio`` of the bytes, the
    network's are untouched."""
    whole, half = (dispatch_flows(np.array([[0, 1, 2, 3]]), 2, 1e9, 0.5, 2, ratio) for ratio in (1.0, 0.5))
    assert np.array_equal(half[0].flows.size_bytes, whole[0].flows.size_bytes)
    assert np.allclose(half[1].flows.size_bytes, 0.5 * whole[1].flows.size_bytes)
