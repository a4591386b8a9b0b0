"""MoE blocks between dense ones (``moe_layer_step``, Llama 4 Maverick): the counts, what training
memory, serving weights and the layer operations make of them, and the combinations refused."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.compute.memory import params_per_device
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.serving.memory import matmul_params
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import MoE, Transformer, transformer_from_mapping
from clustersim.workload.zoo import load_model

# 4 blocks, h = 64, 8 query heads and 2 KV heads of 8, untied vocab 1000: blocks 1 and 3 hold a router,
# a shared and 4 routed experts of 3 x 64 x 32 (top 2); blocks 0 and 2 a dense SwiGLU MLP of 3 x 64 x 160.
FIELDS = {"name": "step-tiny", "layers": 4, "hidden": 64, "ffn_hidden": 160, "heads": 8, "kv_heads": 2, "vocab": 1000}
MOE = MoE(experts=4, top_k=2, shared_experts=1, expert_ffn_hidden=32)
STEP = Transformer(**FIELDS, ffn_type="swiglu", moe=MOE, moe_layer_step=2)
ATTENTION = 64 * (64 + 2 * 16) + 64 * 64  # 10,240
DENSE_MLP = 3 * 64 * 160  # 30,720
EXPERT = 3 * 64 * 32  # 6,144
ROUTER = 64 * 4
NORMS = 2 * 64
EMBEDDINGS = 2 * 1000 * 64


def _arrays(**layout: int) -> LayoutArrays:
    return LayoutArrays.of([Layout(**layout)])


def test_every_second_block_holds_the_experts() -> None:
    assert (STEP.moe_layers, STEP.dense_mlp_layers, STEP.dense_layers) == (2, 2, 0)
    moe_block = ATTENTION + ROUTER + 5 * EXPERT + NORMS
    dense_block = ATTENTION + DENSE_MLP + NORMS
    assert STEP.num_params() == 2 * moe_block + 2 * dense_block + EMBEDDINGS + 64
    assert STEP.num_params() - STEP.active_params() == 2 * 2 * EXPERT  # 2 routed experts idle per MoE block
    per_token = 4 * ATTENTION + 2 * (3 * EXPERT + ROUTER) + 2 * DENSE_MLP + 1000 * 64
    assert STEP.matmul_params_per_token() == per_token


def test_counts_do_not_depend_on_where_the_dense_blocks_sit() -> None:
    leading = Transformer(**FIELDS, ffn_type="swiglu", moe=MOE, dense_layers=2)
    for count in ("num_params", "active_params", "matmul_params_per_token", "model_flops_per_token"):
        assert getattr(STEP, count)() == getattr(leading, count)(), count


def test_a_dense_model_and_a_moe_model_on_every_block_are_unchanged() -> None:
    every = Transformer(**FIELDS, ffn_type="swiglu", moe=MOE)
    assert (every.moe_layers, every.dense_mlp_layers) == (4, 0)
    dense = Transformer(**FIELDS, ffn_type="swiglu")
    assert (dense.moe_layers, dense.dense_mlp_layers) == (4, 0)
    assert "moe_layer_step" not in every.model_dump() and STEP.model_dump()["moe_layer_step"] == 2


def test_training_memory_spreads_the_dense_blocks_over_the_stages() -> None:
    moe_block = ATTENTION + ROUTER + 5 * EXPERT + NORMS
    dense_block = ATTENTION + DENSE_MLP + NORMS
    assert params_per_device(STEP, _arrays())[0] == STEP.num_params()
    # pp 2: each stage holds one dense and one MoE block (layers 0-1 and 2-3), not the MoE pair of
    # leading dense layers' last stage.
    assert params_per_device(STEP, _arrays(pp=2))[0] == pytest.approx(moe_block + dense_block + 64_000 + 64)
    # pp 4: a stage of one block is priced as a MoE block, the heavier.
    assert params_per_device(STEP, _arrays(pp=4))[0] == pytest.approx(moe_block + 64_000 + 64)


def test_serving_holds_dense_mlps_on_the_dense_blocks() -> None:
    always, expert = matmul_params(STEP)
    assert always == 4 * ATTENTION + 2 * (EXPERT + ROUTER) + 2 * DENSE_MLP
    assert expert == 2 * EXPERT


def test_layer_operations_add_up_to_the_forward_flops() -> None:
    for name in ("llama4-maverick", "llama4-scout", "deepseek-v3"):
        model = load_model(name, use_env=False)
        one = np.array([1.0])
        ops = layer_operations(
            model, tokens=np.array([4096.0]), seq_len=4096, tp=one, sp_split=one, ep=one, fused_attention=False
        )
        layers = model.layers * sum(op.flop[0] for op in ops)
        logits = 2 * 4096 * model.vocab * model.hidden
        assert layers + logits == pytest.approx(4096 * model.forward_flops_per_token(4096), rel=1e-12), name


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"moe_layer_step": 2}, "moe_layer_step 2 needs a MoE model"),
        ({"moe_layer_step": 2, "moe": {"experts": 4, "top_k": 2}, "dense_layers": 1}, "without dense_layers"),
        ({"moe_layer_step": 5, "moe": {"experts": 4, "top_k": 2}}, "at least that many layers"),
        ({"moe_layer_step": 0, "moe": {"experts": 4, "top_k": 2}}, "moe_layer_step"),
        ({"moe_layer_step": 2.0, "moe": {"experts": 4, "top_k": 2}}, "moe_layer_step"),
    ],
)
def test_refusals_name_the_field_and_the_rule(extra: dict[str, object], words: str) -> None:
    with pytest.raises(ClusterSimError, match=words):
        transformer_from_mapping({**FIELDS, "ffn_type": "swiglu", **extra})
