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
