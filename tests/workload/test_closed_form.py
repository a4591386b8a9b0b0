"""Parameters, FLOPs and per-operation work of small models, counted by hand.

Conventions: an m x k by k x n matrix multiply is 2 m k n FLOPs; model FLOPs are forward + backward
(3 x forward) of every weight matmul (the logits included) plus the attention scores and context over
the full sequence, 4 s q per layer and token (Megatron-LM / NeMo; no causal halving).
"""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.errors import ClusterSimError
from clustersim.workload.ops import OpKind, head_operations, layer_operations
from clustersim.workload.transformer import FfnType, MoE, Norm, Position, Transformer, transformer_from_mapping

# GPT-style: GELU MLP of 2 matrices with biases, LayerNorm (weight and bias), learned positions, tied logits.
GPT = Transformer(name="gpt-tiny", layers=2, hidden=64, ffn_hidden=256, heads=4, vocab=1000, seq_len=128)
# Llama-style: SwiGLU (3 matrices), no biases, RMSNorm (weight only), rotary, untied; GQA 8 query / 2 KV heads.
LLAMA = Transformer(
    name="llama-tiny", layers=2, hidden=64, ffn_hidden=160, heads=8, kv_heads=2, vocab=1000, ffn_type="swiglu"
)
# MoE: 4 routed experts of width 32, top-2, one shared expert, on the Llama block.
MIX = Transformer(
    name="moe-tiny",
    layers=2,
    hidden=64,
    ffn_hidden=160,
    heads=8,
    kv_heads=2,
    vocab=1000,
    ffn_type="swiglu",
    moe=MoE(experts=4, top_k=2, shared_experts=1, expert_ffn_hidden=32, capacity_factor=1.25),
)


def test_gpt_defaults_and_parameter_count():
    assert (GPT.norm, GPT.position, GPT.linear_bias, GPT.tied_embeddings) == (
        Norm.LAYERNORM,
        Position.LEARNED,
        True,
        True,
    )
    assert (GPT.kv_heads, GPT.head_dim, GPT.q_width, GPT.kv_width) == (4, 16, 64, 64)
    # Attention: QKV 64 x 192 and output 64 x 64 weights, biases 192 + 64.
    assert GPT.attention_params() == 64 * 192 + 64 * 64 + 192 + 64 == 16_640
    # MLP: 64 x 256 up and 256 x 64 down, biases 256 + 64.
    assert GPT.mlp_params() == 2 * 64 * 256 + 256 + 64 == 33_088
    assert GPT.norm_params() == 128  # weight and bias
    assert GPT.router_params() == 0
    assert GPT.layer_params() == 16_640 + 33_088 + 2 * 128 == 49_984
    # Token embedding 1000 x 64 and learned positions 128 x 64; the logits reuse the embedding.
    assert GPT.embedding_params() == 64_000 + 8_192
    assert GPT.num_params() == 2 * 49_984 + 72_192 + 128 == 172_288
    assert GPT.active_params() == GPT.num_params()


def test_gpt_flops_reproduce_the_published_formula():
    # Weights a token multiplies: per layer 3 h^2 + h^2 + 8 h^2 = 12 h^2 (no biases), then V h logits.
    assert GPT.matmul_params_per_token() == 2 * 12 * 64 * 64 + 1000 * 64 == 162_304
    assert GPT.attention_flops_per_token(128) == 2 * 4 * 128 * 64 == 65_536
    assert GPT.attention_flops_per_token() == GPT.attention_flops_per_token(128)  # the model's own seq_len
    assert GPT.forward_flops_per_token(128) == 2 * 162_304 + 65_536
    # 72 l h^2 (1 + s / 6h + V / 12 l h) per token (Narayanan et al. SC'21 without the recompute pass).
    layers, h, s, v = 2, 64, 128, 1000
    assert GPT.model_flops_per_token(128) == pytest.approx(
        72 * layers * h * h * (1 + s / (6 * h) + v / (12 * layers * h)), rel=1e-12
    )
    assert GPT.model_flops_per_token(256) == 3 * (2 * 162_304 + 2 * 4 * 256 * 64)


def test_llama_gqa_parameter_count():
    assert (LLAMA.norm, LLAMA.position, LLAMA.linear_bias, LLAMA.tied_embeddings) == (
        Norm.RMSNORM,
        Position.ROTARY,
        False,
        False,
    )
    assert (LLAMA.head_dim, LLAMA.q_width, LLAMA.kv_width) == (8, 64, 16)
    assert LLAMA.attention_params() == 64 * (64 + 2 * 16) + 64 * 64 == 10_240
    assert LLAMA.mlp_params() == 3 * 64 * 160 == 30_720
    assert LLAMA.norm_params() == 64
    assert LLAMA.layer_params() == 10_240 + 30_720 + 2 * 64
    assert LLAMA.embedding_params() == 2 * 1000 * 64  # embedding and untied output, no positions
    assert LLAMA.num_params() == 2 * 41_088 + 128_000 + 64 == 210_240
    assert LLAMA.matmul_params_per_token() == 2 * (10_240 + 30_720) + 64_000


def test_explicit_head_dim_and_overrides():
    wide = Transformer(layers=1, hidden=64, ffn_hidden=128, heads=8, head_dim=16, vocab=10, linear_bias=False)
    assert (wide.q_width, wide.kv_width) == (128, 128)
    assert wide.attention_params() == 64 * (128 + 256) + 128 * 64  # no biases despite GELU
    untied = Transformer(
        layers=1, hidden=64, ffn_hidden=128, heads=8, vocab=10, tied_embeddings=False, norm="rmsnorm", seq_len=32
    )
    assert untied.embedding_params() == 10 * 64 + 32 * 64 + 10 * 64
    assert untied.norm_params() == 64
    rotary = Transformer(layers=1, hidden=64, ffn_hidden=128, heads=8, vocab=10, position="rotary")
    assert rotary.embedding_params() == 10 * 64
    # Built here (not at import): the defaults a GELU model resolves to, biases included.
    gpt = Transformer(layers=1, hidden=64, ffn_hidden=128, heads=8, vocab=10)
    assert (gpt.linear_bias, gpt.tied_embeddings, gpt.kv_heads, gpt.head_dim) == (True, True, 8, 8)
    assert gpt.attention_params() == 64 * 192 + 64 * 64 + 192 + 64
    llama = Transformer(layers=1, hidden=64, ffn_hidden=128, heads=8, vocab=10, ffn_type="swiglu")
    assert (llama.linear_bias, llama.tied_embeddings, llama.norm, llama.position) == (
        False,
        False,
        Norm.RMSNORM,
        Position.ROTARY,
    )


def test_moe_parameters_active_parameters_and_flops():
    assert MIX.expert_ffn == 32 and MIX.active_mlps == 3 and MIX.total_mlps == 5
    assert MIX.mlp_params() == 3 * 64 * 32 == 6_144  # one expert
    assert MIX.router_params() == 64 * 4
    layer = 10_240 + 5 * 6_144 + 256 + 2 * 64
    assert MIX.layer_params() == layer
    assert MIX.num_params() == 2 * layer + 128_000 + 64
    assert MIX.active_params() == MIX.num_params() - 2 * 2 * 6_144  # two routed experts idle per token
    # Per token: attention, 2 routed + 1 shared expert, the router; then the logits.
    assert MIX.matmul_params_per_token() == 2 * (10_240 + 3 * 6_144 + 256) + 64_000
    default_width = MIX.model_copy(update={"moe": MoE(experts=4, top_k=1)})
    assert default_width.expert_ffn == 160 and default_width.active_mlps == 1 and default_width.total_mlps == 4


def test_shape_rules_are_clear_errors():
    with pytest.raises(ClusterSimError, match="hidden 65 is not divisible by heads 4"):
        transformer_from_mapping({"layers": 1, "hidden": 65, "ffn_hidden": 4, "heads": 4, "vocab": 8})
    with pytest.raises(ClusterSimError, match="heads 8 is not a multiple of kv_heads 3"):
        transformer_from_mapping({"layers": 1, "hidden": 64, "ffn_hidden": 4, "heads": 8, "kv_heads": 3, "vocab": 8})
    with pytest.raises(ClusterSimError, match="top_k 5 exceeds the 4 experts a token may reach"):
        transformer_from_mapping(
            {"layers": 1, "hidden": 64, "ffn_hidden": 4, "heads": 8, "vocab": 8, "moe": {"experts": 4, "top_k": 5}}
        )
    base = {"layers": 1, "hidden": 64, "ffn_hidden": 4, "heads": 8, "vocab": 8}
    for moe, words in (
        ({"experts": 8, "top_k": 2, "groups": 3}, "groups 3 must divide experts 8"),
        ({"experts": 8, "top_k": 2, "groups": 4, "group_top_k": 5}, "group_top_k at most groups"),
        ({"experts": 8, "top_k": 3, "groups": 4, "group_top_k": 1}, "top_k 3 exceeds the 2 experts a token may reach"),
    ):
        with pytest.raises(ClusterSimError, match=words):
            transformer_from_mapping(base | {"moe": moe})
    with pytest.raises(ClusterSimError, match=r"^my model: "):
        transformer_from_mapping({"layers": 0, "hidden": 64, "ffn_hidden": 4, "heads": 8, "vocab": 8}, "my model")
    with pytest.raises(ClusterSimError, match=r"^model: field 'layers'"):
        transformer_from_mapping({"layers": 0, "hidden": 64, "ffn_hidden": 4, "heads": 8, "vocab": 8})
    assert MoE(experts=4, top_k=4).top_k == 4  # every expert per token is allowed
    ok = transformer_from_mapping({"layers": 1, "hidden": 64, "ffn_hidden": 4, "heads": 8, "vocab": 8})
    assert type(ok.head_dim) is int and ok.head_dim == 8
    assert ok.ffn_type is FfnType.GELU and FfnType.SWIGLU.num_matrices == 3 and FfnType.GELU.num_matrices == 2


# ---- operations of one layer on one device ------------------------------------------------------------------


def _ops(model, *, tokens=256.0, seq_len=128, tp=2.0, sp=2.0, ep=1.0, fused=False, flex=False):
    arrays = [np.array([x]) for x in (tokens, tp, sp, ep)]
    layer = layer_operations(
        model,
        tokens=arrays[0],
        seq_len=seq_len,
        tp=arrays[1],
        sp_split=arrays[2],
        ep=arrays[3],
        fused_attention=fused,
        flex_dispatch=np.array([flex]),
    )
    return {op.name: op for op in layer}


def test_dense_layer_operations_by_hand():
    # T = 256 tokens, s = 128, t = 2 (sequence parallel: norms split by 2), h = 64, q = 64, kv = 16, f = 160.
    ops = _ops(LLAMA)
    assert list(ops) == [
        "qkv",
        "attention core",
        "attention scores",
        "output projection",
        "mlp",
        "norms and residuals",
        "bias and activation",
    ]
    expected = {  # (kind, forward FLOPs, bytes, backward / forward)
        "qkv": (OpKind.GEMM, 2 * 256 * 64 * 96 / 2, 0.0, 2.0),
        "attention core": (OpKind.ATTENTION, 4 * 256 * 128 * 64 / 2, 0.0, 2.0),
        "attention scores": (OpKind.MEMORY, 0.0, 13 * 256 * 128 * 8 / 2, 15 / 13),
        "output projection": (OpKind.GEMM, 2 * 256 * 64 * 64 / 2, 0.0, 2.0),
        "mlp": (OpKind.GEMM, 2 * 256 * 64 * 160 * 3 / 2, 0.0, 2.0),
        "norms and residuals": (OpKind.MEMORY, 0.0, 2 * 256 * 11 * 64 / 2, 1.5),
        # rotary / QKV I/O 2 (q + 2 kv), SwiGLU reads gate and up, writes one: (3 + 1) f; 16-bit, split by t
        "bias and activation": (OpKind.MEMORY, 0.0, 2 * 256 * (2 * 96 + 4 * 160) / 2, 1.5),
    }
    for name, (kind, flop, nbytes, ratio) in expected.items():
        op = ops[name]
        assert (op.kind, op.flop[0], op.bytes[0], op.backward_ratio) == pytest.approx((kind, flop, nbytes, ratio)), name
    # The size of one GEMM call (what sets its efficiency): the fused QKV GEMM whole, one of the 3 MLP matrices.
    assert ops["qkv"].gemm_flop[0] == ops["qkv"].flop[0]
    assert ops["mlp"].gemm_flop[0] == 2 * 256 * 64 * 160 / 2


def test_fused_attention_halves_the_core_and_drops_the_scores():
    ops = _ops(LLAMA, fused=True, sp=1.0)
    assert "attention scores" not in ops
    assert ops["attention core"].flop[0] == 4 * 256 * 128 * 64 / 2 / 2
    assert ops["norms and residuals"].bytes[0] == 2 * 256 * 11 * 64  # no sequence parallelism


def test_moe_layer_operations_by_hand():
    # T = 256, t = 1, ep = 2: 4 experts of width 32, top-2 + 1 shared, capacity 1.25.
    ops = _ops(MIX, tp=1.0, sp=1.0, ep=2.0, fused=True)
    assert "mlp" not in ops
    assert list(ops)[3:] == ["experts", "router", "token permutation", "norms and residuals", "bias and activation"]
    routed = 256 * 3 * 1.25  # token-expert pairs, the shared expert counted
    assert ops["experts"].flop[0] == pytest.approx(2 * routed * 64 * 32 * 3)
    # One expert GEMM: the EP group's 2 x 256 tokens x top-2 x 1.25 spread over 4 experts.
    assert ops["experts"].gemm_flop[0] == pytest.approx(2 * (256 * 2 * 1.25 * 2 / 4) * 64 * 32)
    assert ops["router"].flop[0] == 2 * 256 * 64 * 4 and ops["router"].kind is OpKind.GEMM
    # Four read-and-write copies of a 64-wide 16-bit row per routed pair (top-2 x capacity 1.25; the shared
    # expert's tokens stay in place); its backward moves the gradients back through the same copies.
    permutation = ops["token permutation"]
    assert (permutation.kind, permutation.backward_ratio) == (OpKind.MEMORY, 1.0)
    assert permutation.bytes[0] == pytest.approx(4 * 2 * 2 * (256 * 2 * 1.25) * 64)
    sequence_parallel = _ops(MIX, tp=2.0, sp=2.0, ep=2.0, fused=True)["token permutation"]
    assert sequence_parallel.bytes[0] == pytest.approx(permutation.bytes[0] / 2)  # each rank routes its own tokens
    # The flex dispatcher (DeepEP, HybridEP) sends and combines from the tokens' own order: two copies are left
    flex = _ops(MIX, tp=1.0, sp=1.0, ep=2.0, fused=True, flex=True)
    assert flex["token permutation"].bytes[0] == pytest.approx(permutation.bytes[0] / 2)
    assert all(flex[name].bytes[0] == ops[name].bytes[0] for name in ops if name != "token permutation")
    assert ops["bias and activation"].bytes[0] == pytest.approx(2 * 256 * (2 * 96 + 4 * 32 * 3 * 1.25))


def test_head_operations_by_hand():
    head = head_operations(LLAMA, tokens=np.array([256.0]), tp=np.array([4.0]))
    logits, loss = head
    assert (logits.name, logits.kind, logits.flop[0], logits.backward_ratio) == (
        "logits",
        OpKind.GEMM,
        2 * 256 * 1000 * 64 / 4,
        2.0,
    )
    # Softmax cross-entropy over FP32 logits: 14 bytes per logit forward and backward, 1/3 of it forward.
    assert (loss.name, loss.kind, loss.backward_ratio) == ("loss", OpKind.MEMORY, 2.0)
    assert loss.bytes[0] == pytest.approx(14 / 3 * 256 * 1000 / 4)


def test_operations_broadcast_over_layouts():
    tokens = np.array([128.0, 256.0, 512.0])
    ops = layer_operations(
        LLAMA,
        tokens=tokens,
        seq_len=128,
        tp=np.array([1.0, 2.0, 4.0]),
        sp_split=np.ones(3),
        ep=np.ones(3),
        fused_attention=True,
    )
    qkv = next(op for op in ops if op.name == "qkv")
    assert np.allclose(qkv.flop, 2 * tokens * 64 * 96 / np.array([1.0, 2.0, 4.0]))
    assert qkv.bytes.shape == (3,) and not qkv.bytes.any()
    # Any one argument as an array (the others scalars) gives every array of every operation its shape.
    scalars = {"tokens": np.array(256.0), "tp": np.array(1.0), "sp_split": np.array(1.0), "ep": np.array(1.0)}
    for name in scalars:
        args = {**scalars, name: np.full(3, float(scalars[name]))}
        for op in layer_operations(MIX, seq_len=128, fused_attention=False, **args):
            assert op.flop.shape == op.gemm_flop.shape == op.bytes.shape == (3,), (name, op.name)


def test_each_mtp_module_adds_a_pass_through_the_head_and_a_2h_to_h_projection():
    """DeepSeek-V3's multi-token prediction (arXiv 2412.19437 section 2.2): per module, the logits and the loss
    once more (kernel by kernel: each GEMM is one pass) and a projection of the concatenated 2h-wide input."""
    mtp = LLAMA.model_copy(update={"mtp_layers": 2})
    tokens, tp = np.array([256.0]), np.array([4.0])
    plain = {op.name: op for op in head_operations(LLAMA, tokens=tokens, tp=tp)}
    head = {op.name: op for op in head_operations(mtp, tokens=tokens, tp=tp)}
    assert head["logits"].flop[0] == 3 * plain["logits"].flop[0]
    assert head["logits"].gemm_flop[0] == plain["logits"].flop[0]
    assert head["loss"].bytes[0] == pytest.approx(3 * plain["loss"].bytes[0])
    projection = head["mtp projection"]
    assert (projection.kind, projection.backward_ratio) == (OpKind.GEMM, 2.0)
    assert projection.flop[0] == 2 * (2 * 256 * 2 * 64 * 64 / 4)
    assert "mtp projection" not in plain
