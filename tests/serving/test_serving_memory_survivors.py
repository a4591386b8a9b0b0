"""What serving holds, by hand, where mutation testing of ``serving.memory`` and ``serving.state_pool`` found it
unpinned: a hybrid's state over uneven tensor ranks and pipeline stages, the state pool's split of the KV room, a
latent MoE's weights, the notes an estimate prints and the errors a bad combination gets.

Qwen3-Next-80B-A3B (zoo): 48 layers, 36 Gated DeltaNet (32 value heads of 128 x 128 keys, a 4-tap convolution over
8,192 channels) and 12 attention layers (2 KV heads of 256).
"""

from __future__ import annotations

import math

import pytest

from clustersim.errors import ClusterSimError
from clustersim.serving.memory import (
    expert_weight_bytes,
    holding_notes,
    kv_bytes_per_token,
    kv_bytes_per_token_layer,
    kv_heads_per_device,
    matmul_params,
    parse_precision,
    reserved_tokens,
    sequences_held,
    state_bytes_per_sequence,
    state_room,
    weight_bytes_per_device,
)
from clustersim.serving.state_pool import StatePool, check_recurrent_engine
from clustersim.workload.quantization import Quantization, QuantMethod
from clustersim.workload.zoo import load_model

BF16 = parse_precision("bf16")
NVFP4 = parse_precision("nvfp4")
NEXT = load_model("qwen3-next-80b-a3b")
SSM = 32 * 128 * 128  # a layer's recurrent state: value heads x key width x value width
CONV = 3 * (2 * 16 * 128 + 32 * 128)  # the convolution's last 3 inputs of its query, key and value channels
KV_PER_TOKEN_LAYER = 2 * 256 * 2  # one KV head's key and value of 256, 16 bits each
SGLANG = StatePool(ssm_bytes=4.0, memory_ratio=0.9, slots_per_request=5)
MQA = NEXT.model_copy(update={"kv_heads": 1})  # one KV head, whole on every rank: tp splits the state alone


def _state(tp: int, pp: int = 1, ssm_bytes: float = 2.0) -> float:
    """A sequence's state on one device: the device's value heads (at least one) of the stage's layers."""
    stage_layers = 36 * math.ceil(48 / pp) / 48
    return stage_layers * (SSM * ssm_bytes + CONV * 2) * max(32 // tp, 1) / 32


def test_the_state_splits_over_whole_value_heads_and_the_largest_stage() -> None:
    assert state_bytes_per_sequence(NEXT, tp=3, pp=2) == pytest.approx(_state(3, 2))  # 10 of 32 heads, 18 layers
    assert state_bytes_per_sequence(NEXT, tp=64) == pytest.approx(_state(64))  # one head, not half of one
    assert state_bytes_per_sequence(NEXT, tp=3, pp=2) < state_bytes_per_sequence(NEXT, tp=3)


def test_a_separate_pool_splits_the_room_and_caps_the_running_requests() -> None:
    kv_tokens = 1.0e6
    for tp in (1, 2):
        per_token = 12 * max(2 // tp, 1) * KV_PER_TOKEN_LAYER
        slots = kv_tokens * per_token * 0.9 / 1.9 / _state(tp, ssm_bytes=4.0)
        tokens, running, shared = state_room(NEXT, BF16, kv_tokens, SGLANG, tp=tp)
        assert (tokens, running, shared) == (pytest.approx(kv_tokens / 1.9), pytest.approx(slots / 5), 0.0)
        assert kv_bytes_per_token(NEXT, BF16, tp) == per_token
    assert state_room(MQA, BF16, kv_tokens, SGLANG) == state_room(MQA, BF16, kv_tokens, SGLANG, tp=1)
    assert state_room(MQA, BF16, kv_tokens, SGLANG)[1] < state_room(MQA, BF16, kv_tokens, SGLANG, tp=2)[1]


def test_one_shared_pool_charges_each_sequence_its_state_in_cache_tokens() -> None:
    tokens, running, shared = state_room(NEXT, BF16, 5000.0, StatePool(), tp=2)
    assert (tokens, running) == (5000.0, math.inf)
    assert shared == pytest.approx(_state(2) / (12 * KV_PER_TOKEN_LAYER))


def test_a_model_without_recurrent_layers_keeps_its_whole_room() -> None:
    dense = load_model("llama3-8b")
    assert state_room(dense, BF16, 1000.0, SGLANG) == (1000.0, math.inf, 0.0)


def test_sequences_held_counts_on_the_devices_own_share() -> None:
    """At tp 4 the two KV heads are replicated while the state splits further, so the pool holds more sequences
    than at tp 1; short sequences make the pool's cap bind."""
    per_sequence = 64.0
    for tp in (1, 4):
        tokens, running, _ = state_room(NEXT, BF16, 1.0e6, SGLANG, tp=tp)
        assert sequences_held(NEXT, BF16, 1.0e6, per_sequence, SGLANG, tp=tp) == math.floor(
            min(tokens / per_sequence, running)
        )
    default = sequences_held(MQA, BF16, 1.0e6, per_sequence, SGLANG)
    assert default == sequences_held(MQA, BF16, 1.0e6, per_sequence, SGLANG, tp=1)
    assert default < sequences_held(MQA, BF16, 1.0e6, per_sequence, SGLANG, tp=2)
    assert sequences_held(NEXT, BF16, 1.0e6, per_sequence, SGLANG) < sequences_held(
        NEXT, BF16, 1.0e6, per_sequence, SGLANG, tp=4
    )


def test_kv_heads_are_whole_and_the_default_is_one_rank() -> None:
    llama = load_model("llama3-8b")  # 8 KV heads of 128
    assert kv_heads_per_device(llama, 3) == 2 and isinstance(kv_heads_per_device(llama, 3), int)
    assert kv_bytes_per_token_layer(llama, BF16) == 8 * 2 * 128 * 2
    assert kv_bytes_per_token_layer(llama, BF16, tp=3) == 2 * 2 * 128 * 2


def test_a_hybrid_on_an_uneven_pipeline_gets_both_notes() -> None:
    notes = holding_notes(NEXT, 5)
    assert len(notes) == 2 and notes[0].startswith("pipeline: 48 layers over pp 5: 3 stage(s) of 10 layers and 2 of 9")
    narrow, wide = 36 * (SSM * 2 + CONV * 2) / 1e6, 36 * (SSM * 4 + CONV * 2) / 1e6
    assert notes[1] == (
        f"state: qwen3-next-80b-a3b's 36 Gated DeltaNet layers hold {narrow:.1f} MB a sequence in 16 bits "
        f"({wide:.1f} MB where the engine keeps it in 32, as SGLang does), split over tp by value heads, read and "
        "written by every decode step; the batch counts it beside the KV cache of its 12 attention layers"
    )


def test_a_latent_moe_holds_its_shared_experts_and_projections_at_the_hidden_size() -> None:
    """Nemotron 3 Super with biases: a shared expert reads the hidden size (4,096), a routed one the latent (1,024);
    the latent projections count without their biases."""
    super_ = load_model("nemotron-3-super-120b-a12b").model_copy(update={"linear_bias": True})
    hidden, latent, width, moe_layers = 4096, 1024, 2688, 40
    per_moe_layer = 2 * 2 * hidden * width + hidden * 512 + 2 * hidden * latent
    dense, routed = matmul_params(super_)
    assert dense == super_.layers * super_.mixer_matmul_params() + moe_layers * per_moe_layer
    assert routed == moe_layers * 2 * latent * width


def test_a_quantized_checkpoint_at_a_4_bit_float_format_is_refused_naming_the_field() -> None:
    gptq = load_model("llama3-8b").model_copy(
        update={"quantization": Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128)}
    )
    for price in (lambda: weight_bytes_per_device(gptq, NVFP4), lambda: expert_weight_bytes(gptq, NVFP4)):
        with pytest.raises(ClusterSimError, match="precision: nvfp4 prices weights stored as nvfp4") as caught:
            price()
        assert (caught.value.field, caught.value.value) == ("precision", "nvfp4")


def test_a_hybrid_on_an_engine_without_recurrent_layers_is_refused_naming_the_engine() -> None:
    with pytest.raises(ClusterSimError) as caught:
        check_recurrent_engine(NEXT, "vllm-neuron", "vllm-neuron")
    assert str(caught.value) == (
        "engine: vllm-neuron (vllm-neuron) serves no Gated DeltaNet layers, which qwen3-next-80b-a3b has; engines that "
        "do: tensorrt-llm, vllm, sglang (on GPUs)"
    )
    assert (caught.value.field, caught.value.value) == ("engine", "vllm-neuron")
    check_recurrent_engine(NEXT, "sglang", "sglang")  # served
    check_recurrent_engine(load_model("llama3-8b"), "vllm-neuron", "vllm-neuron")  # nothing recurrent


def test_a_model_without_windows_reserves_its_whole_length_in_blocks() -> None:
    assert reserved_tokens(100, 29, "vllm", model=load_model("llama3-8b")) == 144  # 129 in blocks of 16
    assert reserved_tokens(100, 29, "vllm") == 144
