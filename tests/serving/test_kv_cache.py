"""What serving holds and reads, by hand: latent-attention and sliding-window KV caches, MoE weights.

The device, calibration and engine are test_closed_form's round ones: every byte read takes 1e-12 s
(2 TB/s at half), a BF16 GEMM runs at 5e14 FLOP/s, KV blocks of 16 tokens.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.schema import Dtype
from clustersim.serving.engine import decode_attention_peak_flop_per_s, memory_plan, step_times
from clustersim.serving.estimate import Request, batch_limit
from clustersim.serving.memory import (
    cached_token_layers,
    causal_pairs,
    decode_attention_flops_per_key,
    kv_bytes_per_token,
    matmul_params,
    reserved_tokens,
    weight_bytes_per_device,
)
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import MLA, MoE, Transformer
from tests.serving.test_closed_form import CAL, ENGINE, GEMM, HBM, HEAD, REL, TINY, serving
from tests.workload.hf_configs import DEEPSEEK_V3

# TINY with latent attention: 8 heads of 64 (32 rotary), a latent of 128, values of 64.
LATENT = Transformer(
    name="latent",
    layers=4,
    hidden=1024,
    ffn_hidden=4096,
    heads=8,
    head_dim=64,
    vocab=32768,
    ffn_type="swiglu",
    mla=MLA(kv_lora_rank=128, rope_head_dim=32, v_head_dim=64),
)
# TINY with a 256-token window on 2 of its 4 layers (Gemma 2 alternates them).
WINDOWED = TINY.model_copy(update={"sliding_window": 256, "window_layers": 2})


def _decode(model: Transformer, *, b: object = 4, context: float = 1100, tp: int = 1, prefill: float = 0.0):
    return step_times(
        model,
        serving(tp=tp),
        Dtype.BF16,
        Dtype.BF16,
        decode_sequences=np.atleast_1d(b),
        decode_context_tokens=context,
        prefill_tokens=prefill,
        prefill_sequences=1.0 if prefill else 0.0,
        prompt_tokens=prefill or 1000.0,
        cal=CAL,
        engine=ENGINE,
    )


# ---- multi-head latent attention ----------------------------------------------------------------------------


def test_deepseek_v3_caches_its_latent_not_every_head(tmp_path: Path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DEEPSEEK_V3))
    v3 = read_hf_config(path)
    assert (v3.kv_cache_elements, v3.kv_cache_heads) == (512 + 64, 1)
    # every head's key and value would be 2 x 128 heads x 192 = 49,152 elements: 85x more
    assert 2 * v3.heads * v3.head_dim / v3.kv_cache_elements == pytest.approx(85.33, abs=0.01)
    # 61 layers x 576 elements; the latent is whole on every TP rank
    assert kv_bytes_per_token(v3, Dtype.FP8) == kv_bytes_per_token(v3, Dtype.FP8, tp=8) == 61 * 576
    assert kv_bytes_per_token(v3, Dtype.BF16, pp=61) == 1152


def test_a_plain_model_caches_key_and_value_per_kv_head():
    assert (TINY.kv_cache_elements, TINY.kv_cache_heads) == (2 * 4 * 128, 4)
    assert kv_bytes_per_token(TINY, Dtype.BF16, tp=2) == 4 * 2 * 128 * 2 * 2  # 2 of the 4 KV heads per rank


def test_latent_decode_reads_the_latent_once_and_works_in_it():
    # 4 sequences at 1100 tokens of context, 4 layers, 160 cached elements of 2 bytes; plus the 4 new tokens
    step = _decode(LATENT)
    read = (4 * 1100 * 4 + 4 * 4) * 160 * 2 / HBM
    # scores over 128 + 32 and context over 128 per head: 2 x 8 x 288 FLOPs per key: memory-bound here
    assert decode_attention_flops_per_key(LATENT) == 2 * 8 * (2 * 128 + 32)
    assert step.decode_attention_s[0] == pytest.approx(read, rel=REL)
    # at tp 2 each rank keeps the whole latent for its 4 heads: the same read, half the FLOPs
    assert _decode(LATENT, tp=2).decode_attention_s[0] == pytest.approx(read, rel=REL)
    assert read / 30 > 4608 * 4 * 1100 * 4 / GEMM  # 14 FLOPs per byte read, against 500 the device does


def test_latent_decode_computes_at_the_16_bit_attention_rate():
    """With 512 heads to one latent the decode is compute-bound (922 FLOPs per byte read), and its kernels are
    attention kernels in 16 bits: the BF16 peak at latent_decode_flop_efficiency (0.25 here: 2.5e14 FLOP/s), whatever
    the cache's format; a grouped-query model's decode attention keeps the GEMMs' rate in its cache's format."""
    wide = LATENT.model_copy(update={"heads": 512})
    flops = decode_attention_flops_per_key(wide) * 4 * 1100 * 4  # 4 sequences x 1100 keys x 4 layers
    read = (4 * 1100 * 4 + 4 * 4) * 160 * 2 / HBM
    attention_rate = 1e15 * CAL.latent_decode_flop_efficiency
    assert flops / attention_rate > 2 * read
    assert _decode(wide).decode_attention_s[0] == pytest.approx(flops / attention_rate, rel=REL)
    device = serving()
    for cache in (Dtype.BF16, Dtype.FP8):
        assert decode_attention_peak_flop_per_s(wide, device, cache, CAL) == pytest.approx(attention_rate, rel=REL)
    fp8 = device.peak_flop_per_s(Dtype.FP8) * CAL.flop_efficiency_on(device.family, Dtype.FP8)
    assert fp8 > attention_rate and decode_attention_peak_flop_per_s(TINY, device, Dtype.FP8, CAL) == fp8


def test_latent_memory_holds_many_more_tokens():
    plan = memory_plan(LATENT, serving(), Dtype.BF16, Dtype.BF16, CAL, ENGINE)
    assert plan.kv_bytes_per_token == 4 * 160 * 2
    assert plan.kv_capacity_tokens == pytest.approx(plan.kv_budget_bytes / 1280, rel=REL)


# ---- sliding windows ---------------------------------------------------------------------------------------


def test_a_window_caps_what_a_windowed_layer_caches_and_reads():
    # 2 full layers hold all 1100 tokens, 2 windowed ones 256 each
    assert cached_token_layers(WINDOWED, 1100) == 2 * 1100 + 2 * 256
    assert cached_token_layers(WINDOWED, 100) == 4 * 100  # a short sequence stays inside the window
    assert cached_token_layers(TINY, 1100, pp=2) == 2 * 1100
    per_layer_token = 2 * 4 * 128 * 2  # K and V of 4 KV heads of 128, bf16
    read = (4 * (2 * 1100 + 2 * 256) + 4 * 4) * per_layer_token / HBM
    assert _decode(WINDOWED).decode_attention_s[0] == pytest.approx(read, rel=REL)
    assert _decode(WINDOWED, context=200).decode_attention_s[0] == _decode(TINY, context=200).decode_attention_s[0]


def test_a_window_caps_the_memory_a_sequence_reserves():
    # 1001 + 200 tokens in 16-token blocks: 1216 on a full layer, the 256-token window on a windowed one
    assert reserved_tokens(1001, 200, ENGINE, WINDOWED) == (2 * 1216 + 2 * 256) / 4
    assert reserved_tokens(100, 20, ENGINE, WINDOWED) == reserved_tokens(100, 20, ENGINE) == 128
    plan = memory_plan(WINDOWED, serving(), Dtype.BF16, Dtype.BF16, CAL, ENGINE)
    limit, reason, _ = batch_limit(WINDOWED, serving(), Request(100_000, 1001), CAL, ENGINE)
    per_sequence = (2 * 101_008 + 2 * 256) / 4
    assert (limit, reason) == (math.floor(plan.kv_capacity_tokens / per_sequence), "capacity")
    assert limit > batch_limit(TINY, serving(), Request(100_000, 1001), CAL, ENGINE)[0] * 1.99


@settings(max_examples=60, deadline=None)
@given(
    window=st.integers(1, 4096),
    windowed=st.integers(0, 4),
    tokens=st.floats(1, 20_000),
    more=st.floats(0, 5_000),
)
def test_a_window_never_adds_and_only_caps(window: int, windowed: int, tokens: float, more: float):
    model = TINY.model_copy(update={"sliding_window": window if windowed else 0, "window_layers": windowed})
    held = float(cached_token_layers(model, tokens))
    assert min(4 * tokens, 4 * window) <= held + 1e-9 and held <= 4 * tokens + 1e-9  # between capped and whole
    assert float(cached_token_layers(model, tokens + more)) >= held  # more context never holds less
    if window >= tokens or not windowed:
        assert held == pytest.approx(4 * tokens)
        assert causal_pairs(model, tokens) == pytest.approx(causal_pairs(TINY, tokens))
    assert 0 < causal_pairs(model, tokens) <= causal_pairs(TINY, tokens) * (1 + 1e-12)
    assert reserved_tokens(tokens, 1 + more, ENGINE, model) <= reserved_tokens(tokens, 1 + more, ENGINE)


def test_a_windowed_prompt_meets_at_most_the_window_of_keys():
    # full layers: n^2 / 2 pairs; windowed, n = 1000 > w = 256: n w - w^2 / 2
    assert causal_pairs(WINDOWED, 1000) == 2 * 500_000 + 2 * (256_000 - 32_768)
    assert causal_pairs(WINDOWED, 200) == causal_pairs(TINY, 200) == 4 * 20_000
    step = _decode(WINDOWED, b=0, prefill=1000)
    flops = causal_pairs(WINDOWED, 1000) * 2 * (1024 + 1024)  # scores and context of 8 heads of 128
    assert step.prefill_attention_s[0] == pytest.approx(flops / 2.5e14, rel=REL)  # a quarter of the peak


# ---- mixture of experts ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("tokens", "touched"), [(1, 2.0), (2, 3.0), (3, 3.5), (8, 4 * (1 - 0.5**8))])
def test_a_step_reads_the_distinct_experts_its_tokens_touch(tokens: int, touched: float):
    # 4 experts, each token picks 2: E (1 - (1 - k/E)^tokens) distinct experts are read once each
    moe = TINY.model_copy(update={"moe": MoE(experts=4, top_k=2)})
    step = _decode(moe, b=tokens, context=0)
    always = 4 * (3_145_728 + 1024 * 4)  # attention and router, 4 layers
    expert = 4 * 12_582_912  # one expert's MLP, 4 layers
    assert step.gemm_memory_s[0] == pytest.approx(((always + touched * expert) * 2 + HEAD * 2) / HBM, rel=REL)


def test_leading_dense_layers_hold_a_dense_mlp_not_experts():
    # 3 blocks: 1 dense (MLP 3 x 64 x 256), 2 MoE (a shared and 4 routed experts of 3 x 64 x 32, a router)
    model = Transformer(
        name="deep-tiny",
        layers=3,
        hidden=64,
        ffn_hidden=256,
        heads=4,
        vocab=1000,
        ffn_type="swiglu",
        dense_layers=1,
        moe=MoE(experts=4, top_k=2, shared_experts=1, expert_ffn_hidden=32),
    )
    attention = 64 * 192 + 64 * 64  # 16,384
    assert matmul_params(model) == (3 * attention + 2 * (6144 + 256) + 49_152, 2 * 6144)
    quantized = 3 * attention + 2 * (6144 + 256) + 49_152 + 4 * 2 * 6144  # 160,256
    assert weight_bytes_per_device(model, Dtype.BF16) == 2 * model.num_params()
    assert weight_bytes_per_device(model, Dtype.BF16) - weight_bytes_per_device(model, Dtype.FP8) == quantized
    # decode of one token: every dense weight and 2 routed experts of the 2 MoE layers
    step = _decode(model, b=1, context=0)
    assert step.gemm_memory_s[0] == pytest.approx(((160_256 - 2 * 2 * 6144) * 2 + 1000 * 64 * 2) / HBM, rel=REL)


def test_many_experts_approach_top_k_per_token_then_all():
    moe = TINY.model_copy(update={"moe": MoE(experts=64, top_k=2)})
    few, many = _decode(moe, b=1, context=0), _decode(moe, b=4096, context=0)
    expert = 4 * 12_582_912 * 2 / HBM
    assert few.gemm_memory_s[0] - many.gemm_memory_s[0] == pytest.approx(-62 * expert, rel=1e-6)
    assert np.all(np.diff(_decode(moe, b=np.arange(1, 40), context=0).gemm_memory_s) > 0)
