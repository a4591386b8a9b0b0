"""The MoE exchange and the dispatch ratios by hand, where mutation testing of ``serving.moe_exchange``,
``serving.attention_dp`` and ``compute.dispatch`` found them unpinned: the bytes an attention-DP rank sends, over
which collective and how many MoE layers of its stage; group-limited routing carried into both copy ratios; the
refusals' fields."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.dispatch import (
    dispatch_copy_ratios,
    gpu_copy_ratio,
    network_copy_ratio,
    node_miss_probability,
)
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.serving.attention_dp import check_attention_dp
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.memory import stage_share
from clustersim.serving.moe_exchange import exchange_s, ranks_reached
from clustersim.workload.moe import MoE
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
DSV3 = load_model("deepseek-v3")  # 58 MoE layers of 61, hidden 7,168, 256 experts top-8 in 8 groups, 4 per token
TOKENS = np.array([[512.0, 4096.0], [64.0, 1.0]])


def _system(exchange: str, *, tp: int = 1, groups: int = 8, pp: int = 1):
    return serving_system_for_instance(
        CATALOG, "p6-b200.48xlarge", tp=tp, pp=pp, attention_dp=groups, dp=1, moe_exchange=exchange
    )


@pytest.mark.parametrize(("tp", "groups", "pp"), [(1, 8, 1), (2, 4, 1), (1, 2, 1), (1, 4, 2)])
def test_an_all_to_all_sends_each_tokens_copies_to_the_ranks_of_its_experts_and_back(tp, groups, pp) -> None:
    system = _system("alltoall", tp=tp, groups=groups, pp=pp)
    ranks = tp * groups
    sent = TOKENS / ranks * ranks_reached(ranks, 8) * 7168 * 2  # 16-bit rows of the hidden size
    one_way = system.cost.time_s(Op.ALLTOALL, sent.ravel(), system.ep_fabric).reshape(TOKENS.shape)
    expected = 58 * stage_share(DSV3, pp) * 2 * one_way  # dispatch and combine in every MoE layer of the stage
    assert exchange_s(DSV3, system, TOKENS) == pytest.approx(expected, rel=1e-12)


def test_a_gather_moves_every_token_of_the_stage_and_reduces_it_back() -> None:
    system = _system("gather", groups=4, pp=2)
    rows = (TOKENS * 7168 * 2).ravel()
    moved = system.cost.time_s(Op.ALL_GATHER, rows, system.ep_fabric) + system.cost.time_s(
        Op.REDUCE_SCATTER, rows, system.ep_fabric
    )
    expected = 58 * 31 / 61 * moved.reshape(TOKENS.shape)  # the larger stage's 31 of 61 layers
    assert exchange_s(DSV3, system, TOKENS) == pytest.approx(expected, rel=1e-12)


def test_a_latent_moe_exchanges_its_latent_rows() -> None:
    super_ = load_model("nemotron-3-super-120b-a12b")  # 40 MoE layers, routed experts at a latent width of 1,024
    system = _system("alltoall", groups=8)
    sent = TOKENS / 8 * ranks_reached(8, 22) * 1024 * 2
    one_way = system.cost.time_s(Op.ALLTOALL, sent.ravel(), system.ep_fabric).reshape(TOKENS.shape)
    assert exchange_s(super_, system, TOKENS) == pytest.approx(40 * 2 * one_way, rel=1e-12)


def test_nothing_is_exchanged_without_experts_or_without_attention_data_parallel() -> None:
    dense = load_model("llama3-8b")
    for model, system in ((dense, _system("alltoall")), (DSV3, _system("gather", groups=1))):
        none = exchange_s(model, system, TOKENS)
        assert none.shape == TOKENS.shape and none.dtype == np.float64 and not none.any()


def test_attention_data_parallel_is_refused_naming_its_groups() -> None:
    trt, neuron = engine_profile("tensorrt-llm"), engine_profile("vllm-neuron")
    check_attention_dp(load_model("llama3-8b"), _system("gather", groups=1), trt)  # no groups: nothing to check
    cases = [
        (load_model("llama3-8b"), _system("gather", groups=8), trt, "llama3-8b is dense"),
        (
            load_model("mixtral-8x7b"),
            _system("gather", groups=3),
            trt,
            "do not split evenly over tp 1 x attention dp 3",
        ),
        (DSV3, _system("gather", groups=8), neuron, "engines with it: tensorrt-llm, vllm, sglang)"),
    ]
    for model, system, profile, said in cases:
        with pytest.raises(ClusterSimError, match=r"^attention_dp: ") as caught:
            check_attention_dp(model, system, profile)
        assert said in str(caught.value)
        assert (caught.value.field, caught.value.value) == ("attention_dp", system.attention_dp)


def test_group_limited_routing_reaches_both_copy_ratios() -> None:
    """DeepSeek-V3's tokens keep to 4 of 8 expert groups: on 16 nodes a token reaches at most the 8 nodes of its
    groups, and over 64 GPUs at most the 32 of them, fewer copies than unlimited top-8 routing sends."""
    moe = DSV3.moe
    assert moe is not None and (moe.groups, moe.group_top_k) == (8, 4)
    network, gpu = dispatch_copy_ratios(moe, 16, 64)
    assert network == pytest.approx(network_copy_ratio(256, 8, 16, 8, 4)) and network < network_copy_ratio(256, 8, 16)
    assert gpu == pytest.approx(gpu_copy_ratio(256, 8, 64, 8, 4)) and gpu < gpu_copy_ratio(256, 8, 64)
    assert gpu_copy_ratio(256, 8, 64, 8, 4) == pytest.approx(network_copy_ratio(256, 8, 64, 8, 4))
    plain = MoE(experts=256, top_k=8)
    assert dispatch_copy_ratios(plain, 16, 64) == (
        pytest.approx(network_copy_ratio(256, 8, 16)),
        pytest.approx(gpu_copy_ratio(256, 8, 64)),
    )


def test_a_node_holding_more_than_the_others_leave_is_never_missed() -> None:
    """Eight distinct experts of eight, four on each of two nodes: every token reaches both; of ten experts over
    three nodes (6.7 elsewhere) eight cannot all miss a node either."""
    assert node_miss_probability(8, 8, 2) == 0.0
    assert node_miss_probability(10, 8, 3) == 0.0
    assert node_miss_probability(8, 2, 2) == pytest.approx(4 / 8 * 3 / 7)
