"""Closed forms of the MoE and per-step costs: the per-node token dispatch (DeepEP / HybridEP), the fixed
cost of each expert's slice of a grouped GEMM, the fixed cost of an optimizer step, and the keys and
values context parallelism exchanges under latent attention.

The tiny MoE model, the round-number device and the helpers are those of ``test_step_closed_form``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.schema import Dtype
from clustersim.compute.dispatch import network_copy_ratio, node_miss_probability, nodes_reached
from clustersim.compute.software import software_for
from clustersim.execution import Layout
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from clustersim.workload.transformer import MLA, Transformer

from .test_step_closed_form import EFF, MOE, NVLINK, REL, SW, S, estimate, node_fabric, t_coll, terms

# ---- how many copies of a token cross the network -----------------------------------------------------


def test_two_of_four_experts_on_two_nodes_cross_five_sixths_as_often():
    # Experts {a, b} on one node, {c, d} on the other; a token picks 2 of 4 (6 pairs). Only the pair on
    # its own node ({a, b}: 1 in 6) leaves it home: 5/6 of tokens cross once. An all-to-all sends one
    # message per remote expert: 2 x 1/2 = 1 copy on average.
    assert node_miss_probability(4, 2, 2) == pytest.approx(1 / 6, rel=REL)
    assert network_copy_ratio(4, 2, 2) == pytest.approx(5 / 6, rel=REL)


def test_node_limited_routing_keeps_a_deepseek_token_on_its_four_groups_nodes():
    # DeepSeek-V3: 256 experts in 8 groups, top 8 within the best 4 groups. On 8 nodes (a group per node)
    # the token's experts are among its groups' 128 on 4 nodes, each missed with C(96, 8) / C(128, 8);
    # unlimited, any of the 8 nodes, each missed with C(224, 8) / C(256, 8).
    limited = 4 * (1 - math.comb(96, 8) / math.comb(128, 8))
    free = 8 * (1 - math.comb(224, 8) / math.comb(256, 8))
    assert nodes_reached(256, 8, 8, 8, 4) == pytest.approx(limited, rel=REL)
    assert nodes_reached(256, 8, 8) == pytest.approx(free, rel=REL)
    assert network_copy_ratio(256, 8, 8, 8, 4) == pytest.approx(limited * 7 / 8 / (8 * 7 / 8), rel=REL)
    # On 16 nodes a group spans two: the 4 groups' 8 nodes; on 2 nodes (4 groups each) the 4 groups land
    # on both unless all 4 are one node's: 2 (1 - C(4, 4) / C(8, 4)).
    assert nodes_reached(256, 8, 16, 8, 4) == pytest.approx(8 * (1 - math.comb(112, 8) / math.comb(128, 8)), rel=REL)
    assert nodes_reached(256, 8, 2, 8, 4) == pytest.approx(2 * (1 - 1 / math.comb(8, 4)), rel=REL)


@given(
    nodes=st.sampled_from([2, 4, 8, 16, 32, 64]),
    group_top_k=st.integers(1, 8),
)
def test_limiting_the_groups_never_reaches_more_nodes(nodes: int, group_top_k: int) -> None:
    limited = float(nodes_reached(256, 8, nodes, 8, group_top_k))
    assert 0 < limited <= float(nodes_reached(256, 8, nodes)) * (1 + 1e-12)
    assert limited <= group_top_k * max(nodes / 8, 1) + 1e-9 or nodes < 8


def test_qwen3_style_routing_on_two_nodes_sends_a_quarter_of_the_all_to_all():
    # 128 experts, top 8, 64 per node: a token misses the other node with probability C(64,8)/C(128,8)
    # (0.3%), so it crosses almost exactly once, where an all-to-all sends its 4 remote copies.
    miss = math.comb(64, 8) / math.comb(128, 8)
    assert network_copy_ratio(128, 8, 2) == pytest.approx(2 * (1 - miss) / 8, rel=REL)
    assert 0.24 < float(network_copy_ratio(128, 8, 2)) < 0.25


def test_one_node_or_one_expert_per_token_changes_nothing():
    assert network_copy_ratio(64, 8, 1) == 1.0  # nothing crosses the network anyway
    assert network_copy_ratio(64, 1, [2, 4, 8]) == pytest.approx([1.0, 1.0, 1.0], rel=REL)  # no copy to merge


@given(
    st.integers(1, 8).flatmap(lambda k: st.tuples(st.just(k), st.sampled_from([8, 16, 64, 256]))),
    st.sampled_from([2, 4, 8]),
)
def test_a_per_node_dispatch_sends_between_one_kth_and_all_of_the_copies(k_and_experts, nodes):
    # A remote node is hit at most as often as it holds chosen experts (k / N) and at least 1 / k of that.
    top_k, experts = k_and_experts
    ratio = float(network_copy_ratio(experts, top_k, nodes))
    assert 1.0 / top_k - 1e-12 <= ratio <= 1.0 + 1e-12


# ---- the dispatch in a training step ------------------------------------------------------------------


def _two_nodes_of_two() -> Fabric:
    return Fabric("hand", 2, 2, NVLINK, 50e9, False)


def test_an_expert_group_across_nodes_sends_each_token_once_per_remote_node():
    # ep 4 over 2 nodes of 2 devices, 4 experts (one per device), top 2: a token crosses 5/6 times where
    # the all-to-all sends 1 copy (ratio 5/6), and fans out to its node's experts over NVLink: each
    # dispatch and combine takes the slower of the two.
    per_node = SW.model_copy(update={"ep_dispatch_per_node": True})
    per_expert = SW.model_copy(update={"ep_dispatch_per_node": False})
    size = 1024 * 2 * 1024 * 2  # T x top_k x h 16-bit values
    layout = Layout(dp=4, ep=4)
    spread = estimate(layout, devices=4, per_node=2, global_batch=8, model=MOE, sw=per_node)
    plain = estimate(layout, devices=4, per_node=2, global_batch=8, model=MOE, sw=per_expert)
    one = max(t_coll(Op.ALLTOALL, size * 5 / 6, _two_nodes_of_two()), t_coll(Op.ALLTOALL, size, node_fabric(2)))
    # 2 micro-batches x 4 layers x (dispatch + combine) forward and backward
    assert terms(spread)["ep comm"][0] == pytest.approx(2 * 4 * 4 * one, rel=REL)
    assert terms(plain)["ep comm"][0] == pytest.approx(2 * 4 * 4 * t_coll(Op.ALLTOALL, size, _two_nodes_of_two()))
    assert terms(spread)["ep comm"][0] < terms(plain)["ep comm"][0]


def test_a_layouts_dispatcher_overrides_the_frameworks():
    layout = Layout(dp=4, ep=4)
    framework = estimate(layout, devices=4, per_node=2, global_batch=8, model=MOE, sw=SW)  # megatron: per node
    nccl = estimate(
        layout.model_copy(update={"ep_dispatcher": "alltoall"}), devices=4, per_node=2, global_batch=8, model=MOE, sw=SW
    )
    plain = estimate(layout, devices=4, per_node=2, global_batch=8, model=MOE, sw=SW.model_copy(
        update={"ep_dispatch_per_node": False}))  # fmt: skip
    assert terms(nccl)["ep comm"] == pytest.approx(terms(plain)["ep comm"], rel=REL)
    assert terms(framework)["ep comm"][0] < terms(nccl)["ep comm"][0]


def test_an_expert_group_inside_one_node_dispatches_the_same_either_way():
    per_node = SW.model_copy(update={"ep_dispatch_per_node": True})
    a = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, sw=per_node)
    b = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, sw=SW)
    assert terms(a)["ep comm"] == pytest.approx(terms(b)["ep comm"], rel=REL)


def test_megatron_dispatches_per_node_and_a_framework_that_does_not_say_per_expert():
    assert software_for("megatron", "hopper").ep_dispatch_per_node
    assert not software_for("deepspeed", "hopper").ep_dispatch_per_node


# ---- fixed costs: per expert GEMM, per step -----------------------------------------------------------


def test_each_local_experts_fp8_gemm_slice_adds_its_fixed_cost():
    # ep 2 of 4 experts: 2 local experts x 3 SwiGLU matrices = 6 slices per layer; 2 micro-batches x 4
    # layers; the backward pass runs each slice twice (data and weight gradients).
    slow = EFF.model_copy(update={"expert_gemm_s": 1e-5})
    base = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, precision=Dtype.FP8)
    more = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, eff=slow, precision=Dtype.FP8)
    forward = terms(more)["forward"][1] - terms(base)["forward"][1]
    backward = terms(more)["backward"][1] - terms(base)["backward"][1]
    assert forward == pytest.approx(2 * 4 * 6 * 1e-5, rel=1e-6)
    assert backward == pytest.approx(2 * forward, rel=1e-6)


def test_a_bf16_expert_slice_pays_only_a_gemms_own_fixed_cost():
    slow = EFF.model_copy(update={"expert_gemm_s": 1e-3})
    base = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE)
    assert estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=MOE, eff=slow).step_s == base.step_s


def test_a_dense_model_has_no_expert_slices():
    slow = EFF.model_copy(update={"expert_gemm_s": 1e-3})
    fp8 = {"precision": Dtype.FP8}
    assert estimate(Layout(), devices=1, eff=slow, **fp8).step_s == pytest.approx(
        estimate(Layout(), devices=1, **fp8).step_s
    )


def test_the_fixed_cost_per_step_is_paid_once_per_step():
    base = estimate(Layout(), devices=1, global_batch=4)
    more = estimate(Layout(), devices=1, global_batch=4, eff=EFF.model_copy(update={"step_s": 0.25}))
    assert terms(more)["optimizer"][1] - terms(base)["optimizer"][1] == pytest.approx(0.25, rel=1e-9)
    assert more.step_s - base.step_s == pytest.approx(0.25, rel=1e-9)


# ---- context parallelism with latent attention --------------------------------------------------------


def test_cp_exchanges_latent_attentions_up_projected_keys_and_values():
    # 8 heads: keys of head_dim 192 (rotary 64 included), values of 128: each token's K and V are
    # 8 x (192 + 128) = 2560 16-bit values, not the 2 x 8 x 192 = 3072 of keys as wide as values.
    mla = Transformer(
        name="tiny-mla",
        layers=4,
        hidden=1024,
        ffn_hidden=4096,
        heads=8,
        kv_heads=8,
        head_dim=192,
        vocab=32768,
        ffn_type="swiglu",
        mla=MLA(kv_lora_rank=256, rope_head_dim=64, v_head_dim=128),
    )
    est = estimate(Layout(cp=2), devices=2, model=mla)
    tokens = S / 2
    gather = t_coll(Op.ALL_GATHER, 2 * tokens * 8 * (192 + 128) * 2, node_fabric(2))
    assert terms(est)["cp comm"][0] == pytest.approx(2 * 4 * 3 * gather, rel=REL)


def test_the_flex_dispatcher_moves_each_routed_row_twice_where_it_dispatches_and_four_times_elsewhere():
    # DeepEP and HybridEP permute inside their kernels (FLEX_PERMUTE_ROW_COPIES); Megatron's alltoall dispatcher, and
    # any layout whose experts are all local (ep 1), copies each routed row four times
    def permutation_s(ep: int, dispatcher: str | None) -> float:
        layout = Layout(dp=4, ep=ep, ep_dispatcher=dispatcher)
        found = estimate(layout, devices=4, per_node=2, global_batch=8, model=MOE, sw=SW)
        return next(op.forward_s for op in found.operations if op.name == "token permutation")

    assert SW.ep_dispatch_per_node  # the framework's dispatcher is the flex one
    for ep in (2, 4):
        assert permutation_s(ep, None) == pytest.approx(0.5 * permutation_s(ep, "alltoall"), rel=REL)
    assert permutation_s(1, None) == pytest.approx(permutation_s(1, "alltoall"), rel=REL)
    assert permutation_s(1, None) == pytest.approx(2 * permutation_s(4, None), rel=REL)  # its own rows: 4 copies, not 2
