"""Tests that kill what mutation testing of ``workload/ops`` left alive (benchmarks/mutation.py): every
array of every operation has one element per layout whichever input varies, and latent attention with a
fused causal kernel meets half the keys (no window)."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import MLA, Transformer

BASE = {"layers": 4, "hidden": 64, "ffn_hidden": 160, "heads": 8, "kv_heads": 2, "vocab": 1000, "ffn_type": "swiglu"}
MOE = Transformer(**BASE, moe={"experts": 4, "top_k": 2})
MLA_MODEL = Transformer(
    **{**BASE, "kv_heads": 8, "head_dim": 24}, mla=MLA(q_lora_rank=32, kv_lora_rank=24, rope_head_dim=8, v_head_dim=16)
)


@pytest.mark.parametrize("varying", ["tokens", "tp", "sp_split", "ep"])
def test_every_operation_has_one_element_per_layout_whichever_input_varies(varying):
    inputs = {"tokens": 256.0, "tp": 1.0, "sp_split": 1.0, "ep": 1.0}
    inputs[varying] = np.array([1.0, 2.0, 4.0]) * inputs[varying]
    ops = layer_operations(MOE, seq_len=128, fused_attention=False, **inputs)
    assert {"router", "experts", "attention scores"} <= {op.name for op in ops}
    for op in ops:  # the router ignores tp and ep, most bytes are 0: still one value per layout
        for array in (op.flop, op.gemm_flop, op.bytes):
            assert np.shape(array) == (3,), (op.name, varying)


def test_fused_latent_attention_without_a_window_meets_half_the_keys():
    one = {"tokens": np.array([256.0]), "tp": np.array([2.0]), "sp_split": np.array([1.0]), "ep": np.array([1.0])}
    ops = {op.name: op for op in layer_operations(MLA_MODEL, seq_len=128, fused_attention=True, **one)}
    # scores over q_width 192, context over 128, 64 of 128 keys per query, split over tp 2
    assert ops["attention core"].flop[0] == pytest.approx(2 * 256 * (192 + 128) * 64 / 2, rel=1e-12)
    assert ops["qkv"].flop[0] == pytest.approx(2 * 256 * MLA_MODEL.qkv_matmul_params() / 2, rel=1e-12)
    assert "attention scores" not in ops  # a fused kernel keeps no score traffic
