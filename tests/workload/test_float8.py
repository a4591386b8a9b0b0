"""What a float8 recipe adds over tensorwise scaling, and what PyTorch's eager cross-entropy adds to the head."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.workload import float8
from clustersim.workload.float8 import Float8Recipe, float8_extra_bytes, scaled_gemm_surcharge
from clustersim.workload.ops import LOSS_BYTES_PER_LOGIT, OpKind, head_operations, layer_operations
from clustersim.workload.zoo import load_model

LLAMA_8B = load_model("llama3.1-8b", use_env=False)


def _layer(recipe: Float8Recipe | None, *, tp: float = 1.0, tokens: float = 8192.0, sp: bool = False):
    arrays = {k: np.array([v]) for k, v in {"tokens": tokens, "tp": tp, "sp_split": tp if sp else 1.0}.items()}
    ops = layer_operations(
        LLAMA_8B, seq_len=8192, ep=np.array([1.0]), fused_attention=True, float8_recipe=recipe, **arrays
    )
    return {op.name: op for op in ops}


def test_tensorwise_is_what_the_fp8_rate_holds_and_adds_nothing():
    plain, tensorwise = _layer(None), _layer(Float8Recipe.TENSORWISE)
    assert plain.keys() == tensorwise.keys()
    assert "float8 casts" not in tensorwise and "float8 scaled GEMMs" not in tensorwise
    assert all(np.array_equal(plain[n].bytes, tensorwise[n].bytes) for n in plain)


def test_rowwise_casts_counted_by_hand_without_tensor_parallelism():
    # Llama 3.1 8B, one device: X widths 4096 (QKV in) + 4096 (MLP in) + 4096 (out-proj in) + 14336 (down in),
    # G widths 6144 (QKV out) + 28672 (gate and up out) + 4096 + 4096. Rowwise casts each element at 8 bytes to
    # tensorwise's 6 and rescales dX (4 bytes per X element); weights 10 + 4 bytes to 8.
    h, f = 4096, 14336
    inputs, grads = 3 * h + f, (h + 2 * 1024) + 2 * f + 2 * h
    weights = h * (h + 2 * 1024) + h * h + 3 * h * f
    tokens = 8192.0
    expected = tokens * ((8 - 6) * (inputs + grads) + 4 * inputs) + (10 + 4 - 8) * weights
    extra = float8_extra_bytes(
        LLAMA_8B, Float8Recipe.ROWWISE, tokens=np.array([tokens]), tp=np.array([1.0]), sp_split=np.array([1.0])
    )
    assert extra[0] == pytest.approx(expected / float8.CAST_ROOFLINE_FRACTION, rel=1e-12)
    casts = _layer(Float8Recipe.ROWWISE)["float8 casts"]  # split as the GEMMs: one forward, two backward
    assert casts.kind is OpKind.MEMORY and casts.backward_ratio == 2.0
    assert 3 * casts.bytes[0] == pytest.approx(extra[0])


def test_rowwise_under_tensor_parallelism_pays_for_casting_the_gathered_tensors_on_every_rank():
    # Tensorwise casts the sequence shard before the all-gather; rowwise casts the gathered tensor on all tp ranks,
    # so its extra traffic per GEMM FLOP grows with tp (the torchtitan rowwise runs' TP8 penalty, issue 1207).
    def per_flop(tp: float) -> float:
        ops = _layer(Float8Recipe.ROWWISE, tp=tp, sp=tp > 1)
        gemm = sum(op.flop[0] for op in ops.values() if op.name in ("qkv", "output projection", "mlp"))
        return 3 * ops["float8 casts"].bytes[0] / gemm

    assert per_flop(8.0) > 3 * per_flop(1.0)


def test_the_scaled_gemm_surcharge_is_forward_for_rowwise_and_adds_the_bf16_weight_gradient_for_gw_hp():
    forward, backward = scaled_gemm_surcharge(Float8Recipe.ROWWISE)
    assert forward == pytest.approx(1 / float8.ROWWISE_GEMM_RATE - 1) and backward == 0.0
    forward_hp, backward_hp = scaled_gemm_surcharge(Float8Recipe.ROWWISE_WITH_GW_HP)
    assert forward_hp == forward and backward_hp == pytest.approx(float8.BF16_OVER_FP8_GEMM_TIME - 1)
    ops = _layer(Float8Recipe.ROWWISE_WITH_GW_HP)
    linear = sum(ops[n].flop[0] for n in ("qkv", "output projection", "mlp"))
    surcharge = ops["float8 scaled GEMMs"]
    assert surcharge.kind is OpKind.GEMM
    assert surcharge.flop[0] == pytest.approx(forward * linear)
    assert surcharge.flop[0] * surcharge.backward_ratio == pytest.approx(backward_hp * linear)
    assert surcharge.gemm_flop[0] == ops["mlp"].gemm_flop[0]  # priced at the size of the layer's largest call


def test_gw_hp_moves_fewer_cast_bytes_than_rowwise():
    kwargs = {"tokens": np.array([8192.0]), "tp": np.array([8.0]), "sp_split": np.array([8.0])}
    rowwise = float8_extra_bytes(LLAMA_8B, Float8Recipe.ROWWISE, **kwargs)
    hp = float8_extra_bytes(LLAMA_8B, Float8Recipe.ROWWISE_WITH_GW_HP, **kwargs)
    assert 0 < hp[0] < rowwise[0]


@settings(max_examples=40, deadline=None)
@given(
    tokens=st.floats(min_value=1.0, max_value=1e6),
    tp=st.sampled_from([1.0, 2.0, 4.0, 8.0]),
    sp=st.booleans(),
    recipe=st.sampled_from(list(Float8Recipe)),
)
def test_extra_bytes_are_never_negative_and_grow_with_tokens(tokens, tp, sp, recipe):
    def extra(n: float) -> float:
        shard = np.array([tp if sp else 1.0])
        return float(float8_extra_bytes(LLAMA_8B, recipe, tokens=np.array([n]), tp=np.array([tp]), sp_split=shard)[0])

    assert extra(tokens) >= 0.0
    assert extra(2 * tokens) >= extra(tokens)
    if recipe is Float8Recipe.TENSORWISE:
        assert extra(tokens) == 0.0


def test_eager_cross_entropy_adds_its_unfused_passes_to_the_head():
    tokens, tp = np.array([8192.0]), np.array([1.0])
    fused = {op.name: op for op in head_operations(LLAMA_8B, tokens=tokens, tp=tp)}
    eager = {op.name: op for op in head_operations(LLAMA_8B, tokens=tokens, tp=tp, eager_elementwise=True)}
    assert "eager loss" not in fused and fused.keys() < eager.keys()
    logits = 8192.0 * LLAMA_8B.vocab
    loss, extra = eager["loss"], eager["eager loss"]
    # forward: upcast (2 + 4) and a three-read log-softmax (12 + 4); backward: NLL's dense gradient (4), the
    # log-softmax backward (12 + 4) and the cast back (4 + 2): 48 bytes per FP32 logit in all
    total = sum(op.bytes[0] * (1 + op.backward_ratio) for op in (loss, extra))
    assert total == pytest.approx(48.0 * logits)
    assert loss.bytes[0] + extra.bytes[0] == pytest.approx(22.0 * logits)  # the forward pass
    assert LOSS_BYTES_PER_LOGIT < 48.0
