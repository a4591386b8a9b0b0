"""Memory cases the mutation run showed untested: full recompute without sequence parallelism, and the
leading dense layers of a MoE model split over tensor-parallel ranks."""

from __future__ import annotations

import pytest

from clustersim.compute.memory import activation_bytes, layer_activation_bytes, params_per_device
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.workload.transformer import MoE, Transformer

DENSE = Transformer(name="d", layers=4, hidden=1024, ffn_hidden=4096, heads=8, vocab=32768, ffn_type="swiglu")


def test_full_recompute_without_sequence_parallelism_keeps_one_whole_input_per_layer():
    # tp 2, no SP: each layer's checkpoint is the whole 2 x T x h input (SP would split it over tp).
    lay = LayoutArrays.of([Layout(tp=2, dp=1, recompute=Recompute.FULL)])
    tokens = 2048
    stored = activation_bytes(DENSE, lay, seq_len=tokens, global_batch=1, fused=True)
    per_layer = layer_activation_bytes(DENSE, lay, seq_len=tokens, fused=True)
    logits = 4.0 * tokens * DENSE.vocab / 2
    assert float(stored[0]) == pytest.approx(4 * 2 * tokens * 1024 + float(per_layer[0]) + logits, rel=1e-12)
    sp = LayoutArrays.of([Layout(tp=2, dp=1, recompute=Recompute.FULL, sequence_parallel=True)])
    with_sp = activation_bytes(DENSE, sp, seq_len=tokens, global_batch=1, fused=True)
    sp_layer = layer_activation_bytes(DENSE, sp, seq_len=tokens, fused=True)
    assert float(with_sp[0]) == pytest.approx(4 * 2 * tokens * 1024 / 2 + float(sp_layer[0]) + logits, rel=1e-12)


def test_leading_dense_layers_split_over_tensor_parallel_ranks_like_the_rest():
    moe = DENSE.model_copy(update={"name": "m", "moe": MoE(experts=4, top_k=2), "dense_layers": 1})
    one, two = (params_per_device(moe, LayoutArrays.of([Layout(tp=t, dp=1)])) for t in (1, 2))
    norms = moe.layers * moe.layer_norm_params() + moe.norm_params()
    # Everything but the norms (and tied/untied embeddings, also split) halves with tp 2.
    assert float(two[0]) - norms == pytest.approx((float(one[0]) - norms) / 2, rel=1e-12)
