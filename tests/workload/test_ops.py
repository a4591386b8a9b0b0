"""Per-operation work of a layer: it adds up to the model FLOPs and splits with tensor parallelism."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.workload.ops import OpKind, head_operations, layer_operations
from clustersim.workload.zoo import load_model


def _flops(model, *, tp=1.0, fused=False, tokens=4096.0, seq_len=4096):
    arrays = {"tokens": np.array([tokens]), "tp": np.array([tp]), "sp_split": np.array([1.0]), "ep": np.array([1.0])}
    layer = layer_operations(
        model,
        tokens=arrays["tokens"],
        seq_len=seq_len,
        tp=arrays["tp"],
        sp_split=arrays["sp_split"],
        ep=arrays["ep"],
        fused_attention=fused,
    )
    head = head_operations(model, tokens=arrays["tokens"], tp=arrays["tp"])
    return model.layers * sum(op.flop[0] for op in layer) + sum(op.flop[0] for op in head), layer


@pytest.mark.parametrize("name", ["gpt3-175b", "llama3-70b", "mixtral-8x7b"])
def test_operations_add_up_to_the_forward_flops(name):
    model = load_model(name, use_env=False)
    total, _ = _flops(model, seq_len=4096)
    assert total == pytest.approx(4096 * model.forward_flops_per_token(4096), rel=1e-12)


def test_tensor_parallelism_splits_every_gemm_but_the_router():
    model = load_model("mixtral-8x7b", use_env=False)
    _, one = _flops(model, tp=1.0)
    _, eight = _flops(model, tp=8.0)
    for a, b in zip(one, eight, strict=True):
        if a.kind is OpKind.GEMM and a.name != "router":
            assert b.flop[0] == pytest.approx(a.flop[0] / 8)


def test_fused_causal_attention_executes_half_and_keeps_no_score_traffic():
    model = load_model("llama3-8b", use_env=False)
    _, unfused = _flops(model, fused=False)
    _, fused = _flops(model, fused=True)
    core = {op.name: op for op in unfused}["attention core"].flop[0]
    assert {op.name: op for op in fused}["attention core"].flop[0] == pytest.approx(core / 2)
    assert "attention scores" in {op.name for op in unfused} and "attention scores" not in {op.name for op in fused}


def _eager_bytes(model, *, tp: float, sp: bool) -> float:
    ops = layer_operations(
        model, tokens=np.array([1.0]), seq_len=8192, tp=np.array([tp]), sp_split=np.array([tp if sp else 1.0]),
        ep=np.array([1.0]), fused_attention=True, eager_elementwise=True,
    )  # fmt: skip
    return {op.name: op for op in ops}["eager element-wise"].bytes[0]


def test_eager_elementwise_traffic_of_a_llama_8b_block_is_counted_kernel_by_kernel():
    """Llama 3 8B (h 4096, q 4096, kv 1024, f 14336), one token, forward: two RMSNorms 2 x 32 x 4096, rotary
    16 x 5120, the GQA expansion 4 x 5120, the output transpose 4 x 4096, SwiGLU 2 x 14336 = 409,600 bytes."""
    model = load_model("llama3-8b", use_env=False)
    assert _eager_bytes(model, tp=1.0, sp=False) == pytest.approx(409_600.0)
    # tensor parallelism splits the head-wise and MLP work; the norms only under sequence parallelism
    assert _eager_bytes(model, tp=8.0, sp=False) == pytest.approx(262_144.0 + 147_456.0 / 8)
    assert _eager_bytes(model, tp=8.0, sp=True) == pytest.approx(409_600.0 / 8)
    fused = layer_operations(
        model, tokens=np.array([1.0]), seq_len=8192, tp=np.array([1.0]), sp_split=np.array([1.0]),
        ep=np.array([1.0]), fused_attention=True,
    )  # fmt: skip
    assert "eager element-wise" not in {op.name for op in fused}


def test_without_grouped_queries_nothing_is_expanded():
    gqa = load_model("llama3-8b", use_env=False)
    mha = load_model("llama2-7b", use_env=False)
    assert mha.kv_width == mha.q_width and gqa.kv_width < gqa.q_width
    # llama2-7b: norms 2 x 32 x 4096, rotary 16 x 8192, output 4 x 4096, SwiGLU 2 x 11008: no GQA expansion
    assert _eager_bytes(mha, tp=1.0, sp=False) == pytest.approx(262_144.0 + 131_072.0 + 16_384.0 + 22_016.0)
