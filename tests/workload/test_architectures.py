"""The optional architecture fields of ``Transformer``, counted by hand on small models: latent attention,
leading dense layers, Q/K/V-only biases, one or four norms per block, query/key norms, GeGLU and sliding
windows; their operations and memory; their errors; and their absence from a plain model's record."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.compute.memory import layer_activation_bytes, params_per_device
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import MLA, FfnType, Transformer, transformer_from_mapping

BASE = {"layers": 4, "hidden": 64, "ffn_hidden": 160, "heads": 8, "kv_heads": 2, "vocab": 1000, "ffn_type": "swiglu"}
LLAMA = Transformer(**BASE)
ATTENTION = 64 * (64 + 2 * 16) + 64 * 64  # 10,240: q 64, k and v 16 each, output 64
MLP = 3 * 64 * 160  # 30,720
# Latent attention: 8 heads of 24 (16 + a rotary 8), values of 16; query rank 32, key/value rank 24.
MLA_MODEL = Transformer(
    **{**BASE, "kv_heads": 8, "head_dim": 24},
    mla=MLA(q_lora_rank=32, kv_lora_rank=24, rope_head_dim=8, v_head_dim=16),
)
# DeepSeek-like: latent attention, the first layer dense (160 wide), then 4 experts of 32, top-2, 1 shared.
DEEPSEEK = Transformer.model_validate(
    {
        **MLA_MODEL.model_dump(),
        "dense_layers": 1,
        "moe": {"experts": 4, "top_k": 2, "shared_experts": 1, "expert_ffn_hidden": 32},
    }
)


def test_latent_attention_by_hand():
    m = MLA_MODEL
    assert (m.q_width, m.kv_width, m.value_head_dim, m.value_width, m.context_width) == (192, 192, 16, 128, 128)
    query = 64 * 32 + 32 * 192  # down to the query rank, up to 8 heads of 24
    keys_values = 64 * (24 + 8) + 24 * 8 * (16 + 16)  # down to the latent and the shared rotary key; up
    assert m.qkv_matmul_params() == query + keys_values
    assert m.output_matmul_params() == 128 * 64
    assert m.attention_params() == query + keys_values + 128 * 64 + 32 + 24  # the two latent RMSNorms
    # Scores over q_width = 192, context over 128, per key and layer.
    assert m.attention_flops_per_token(100) == 4 * 100 * (2 * 192 + 2 * 128)
    full = m.model_copy(update={"mla": MLA(kv_lora_rank=24, rope_head_dim=8, v_head_dim=16)})
    assert full.qkv_matmul_params() == 64 * 192 + keys_values  # no query rank: one full projection


def test_leading_dense_layers_by_hand():
    m = DEEPSEEK
    expert = 3 * 64 * 32
    attention = m.attention_params()
    moe_layer = attention + 5 * expert + 64 * 4 + 2 * 64
    dense_layer = attention + MLP + 2 * 64
    assert (m.moe_layers, m.layer_params(), m.dense_layer_params()) == (3, moe_layer, dense_layer)
    assert m.num_params() == 3 * moe_layer + dense_layer + 2 * 64_000 + 64
    assert m.active_params() == m.num_params() - 3 * 2 * expert  # two routed experts idle in each MoE layer
    matmul = m.attention_matmul_params()
    assert m.matmul_params_per_token() == 3 * (matmul + 3 * expert + 256) + (matmul + MLP) + 64_000


def test_biases_norms_and_geglu():
    qwen2 = Transformer(**BASE, qkv_bias=True)
    assert qwen2.attention_params() == ATTENTION + 64 + 2 * 16 and qwen2.mlp_params() == MLP  # no output/MLP bias
    gpt = Transformer(layers=1, hidden=64, ffn_hidden=256, heads=4, vocab=10, qkv_bias=False)
    assert gpt.attention_params() == 64 * 192 + 64 * 64 + 64  # the output bias only
    assert Transformer(layers=1, hidden=64, ffn_hidden=256, heads=4, vocab=10).qkv_bias is True  # follows linear_bias
    falcon = Transformer(**BASE, layer_norms=1)
    gemma2 = Transformer(**BASE, layer_norms=4, qk_norm=True)
    assert LLAMA.num_params() - falcon.num_params() == 4 * 64
    assert gemma2.num_params() - LLAMA.num_params() == 4 * (2 * 64 + 2 * 8)  # two more norms, q and k norms of 8
    gemma = Transformer(**{**BASE, "ffn_type": "geglu"}, tied_embeddings=True)
    assert FfnType.GEGLU.num_matrices == 3 and gemma.mlp_params() == MLP and gemma.linear_bias is False
    assert gemma.num_params() == LLAMA.num_params() - 64_000


def test_sliding_window_flops():
    mistral = Transformer(**BASE, sliding_window=50)
    assert mistral.window_layers == 4  # every layer by default
    assert mistral.attended_keys(200) == 4 * 50 and mistral.attended_keys(30) == 4 * 30
    gemma2 = Transformer(**BASE, sliding_window=50, window_layers=2)
    assert gemma2.attended_keys(200) == 2 * 200 + 2 * 50
    assert gemma2.attention_flops_per_token(200) == 4 * 64 * (2 * 200 + 2 * 50)
    assert LLAMA.attention_flops_per_token(200) == 4 * 64 * 4 * 200


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"window_layers": 2}, "window_layers 2 needs a sliding_window"),
        ({"sliding_window": 8, "window_layers": 5}, "window_layers 5 exceeds layers 4"),
        ({"dense_layers": 1}, "dense_layers 1 needs a MoE model"),
        ({"dense_layers": 4, "moe": {"experts": 2, "top_k": 1}}, "dense_layers 4 needs a MoE model"),
        ({"mla": {"kv_lora_rank": 8, "rope_head_dim": 4, "v_head_dim": 8}}, "a key/value head per query head"),
        ({"kv_heads": 8, "mla": {"kv_lora_rank": 8, "rope_head_dim": 8, "v_head_dim": 8}}, "rope_head_dim 8"),
        ({"kv_heads": 8, "qkv_bias": True, "mla": {"kv_lora_rank": 8, "rope_head_dim": 4, "v_head_dim": 8}}, "biases"),
        ({"layer_norms": 5}, "field 'layer_norms'"),
    ],
)
def test_extension_rules_are_clear_errors(fields, message):
    with pytest.raises(ClusterSimError, match=message):
        transformer_from_mapping({**BASE, **fields})


def test_a_plain_model_record_is_unchanged_and_extensions_round_trip():
    plain = LLAMA.model_dump()
    assert "qkv_bias" not in plain and "mla" not in plain and "window_layers" not in plain
    assert list(plain) == [
        "name", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "seq_len", "ffn_type",
        "norm", "position", "linear_bias", "tied_embeddings", "moe",
    ]  # fmt: skip
    record = DEEPSEEK.model_dump(mode="json")
    assert record["dense_layers"] == 1 and record["mla"]["q_lora_rank"] == 32
    assert Transformer.model_validate(record) == DEEPSEEK
    qwen2 = Transformer(**BASE, qkv_bias=True)
    assert qwen2.model_dump()["qkv_bias"] is True and Transformer.model_validate(qwen2.model_dump()) == qwen2


# ---- operations and memory -------------------------------------------------------------------------------------
def _ops(model, *, fused=False, tokens=256.0, seq_len=128, tp=1.0, ep=1.0):
    arrays = [np.array([x]) for x in (tokens, tp, 1.0, ep)]
    ops = layer_operations(
        model, tokens=arrays[0], seq_len=seq_len, tp=arrays[1], sp_split=arrays[2], ep=arrays[3], fused_attention=fused
    )
    return {op.name: op for op in ops}


def test_operations_of_latent_attention_and_dense_layers_add_up_to_the_model_flops():
    ops = _ops(DEEPSEEK)
    assert list(ops) == [
        "qkv", "attention core", "attention scores", "output projection", "experts", "router",
        "token permutation", "mlp", "norms and residuals", "bias and activation",
    ]  # fmt: skip
    m = DEEPSEEK
    assert ops["qkv"].flop[0] == 2 * 256 * m.qkv_matmul_params()
    assert ops["attention core"].flop[0] == 2 * 256 * (192 + 128) * 128
    assert ops["output projection"].flop[0] == 2 * 256 * 128 * 64
    # The dense MLP on 1 of 4 layers, the experts and the router on 3 of 4; each GEMM keeps its own size.
    assert ops["mlp"].flop[0] == pytest.approx(2 * 256 * 64 * 160 * 3 / 4)
    assert ops["mlp"].gemm_flop[0] == 2 * 256 * 64 * 160
    assert ops["experts"].flop[0] == pytest.approx(2 * 256 * 3 * 64 * 32 * 3 * 3 / 4)
    assert ops["router"].flop[0] == pytest.approx(2 * 256 * 64 * 4 * 3 / 4)
    per_token = sum(op.flop[0] for op in ops.values()) * m.layers / 256 + 2 * m.vocab * m.hidden
    assert per_token == pytest.approx(m.forward_flops_per_token(128), rel=1e-12)


def test_windowed_attention_core():
    gemma2 = Transformer(**BASE, sliding_window=32, window_layers=2)
    unfused = _ops(gemma2)["attention core"].flop[0]
    assert unfused == 4 * 256 * 128 * 64  # an unfused kernel computes every masked score
    # Fused: a global layer meets s/2 keys per query, a windowed one w (1 - w / 2s) = 32 x 7/8 = 28.
    fused = _ops(gemma2, fused=True)["attention core"].flop[0]
    assert fused == pytest.approx(4 * 256 * 64 * (2 * 64 + 2 * 28) / 4)
    assert _ops(Transformer(**BASE, sliding_window=500), fused=True)["attention core"].flop[0] == pytest.approx(
        _ops(LLAMA, fused=True)["attention core"].flop[0]
    )  # a window longer than the sequence changes nothing


def _layout(**fields) -> LayoutArrays:
    return LayoutArrays.of([Layout(**fields)])


def test_memory_of_leading_dense_layers():
    m = DEEPSEEK
    assert params_per_device(m, _layout())[0] == m.num_params()  # one device holds the model
    # pp 2 (2 layers each): the first stage has the dense layer and one MoE layer, the last two MoE
    # layers; the heavier one is counted (with its share of the embedding).
    first = m.dense_layer_params() + m.layer_params()
    last = 2 * m.layer_params()
    assert params_per_device(m, _layout(pp=2))[0] == max(first, last) + 64_000 + 64
    wide = m.model_copy(update={"ffn_hidden": 4096})  # a dense MLP heavier than the experts
    heavy = wide.dense_layer_params() + wide.layer_params()
    assert params_per_device(wide, _layout(pp=2))[0] == heavy + 64_000 + 64


def test_activations_of_latent_attention_and_dense_layers():
    lay = _layout()
    tokens, b = 128.0, 2.0
    # Q and K 192 wide, V and the projection input 128, then the layers' average MLP: 3 of 4 layers
    # hold 3 experts of 32 (3 matrices), 1 the dense 160.
    expected = 5 * b * tokens * 64 + b * tokens * (192 + 192 + 128 + 128)
    expected += b * tokens * 3 * (0.75 * 32 * 3 + 0.25 * 160) + 5 * 8 * 128 * tokens
    assert layer_activation_bytes(DEEPSEEK, lay, seq_len=128, fused=False)[0] == pytest.approx(expected)
