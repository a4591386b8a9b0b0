"""Serving a Gated DeltaNet hybrid (Qwen3.5-35B-A3B): a KV cache on its attention layers only, a fixed state per
sequence that each decode step reads and writes, and the batch that state leaves room for."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.eager_launches import kernels_per_layer
from clustersim.serving.engine import (
    DEFAULT_CALIBRATION,
    kv_bytes_per_token,
    memory_plan,
    serving_system_for_instance,
    step_times,
)
from clustersim.serving.engines import engine_for_software, engine_profile
from clustersim.serving.estimate import Request, batch_limit, estimate_offline
from clustersim.serving.memory import causal_pairs, state_bytes_per_sequence, state_room
from clustersim.serving.speculative import Speculation
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
STATE_ELEMENTS = 32 * 128 * 128 + 8192 * 3  # every value head's state and the convolution's last three inputs


def _hybrid() -> Transformer:
    return load_model("qwen3.5-35b-a3b", use_env=False)


def _system(tp: int = 1):
    return serving_system_for_instance(CATALOG, "p5en.48xlarge", tp=tp)


def test_the_cache_grows_on_the_attention_layers_only() -> None:
    model = _hybrid()
    assert kv_bytes_per_token(model, Dtype.BF16) == 10 * 2 * 2 * 256 * 2
    assert kv_bytes_per_token(model, Dtype.FP8) == 10 * 2 * 2 * 256
    assert float(causal_pairs(model, 1000.0)) == 10 * 1000 * 1000 / 2


@pytest.mark.parametrize(("tp", "heads_held"), [(1, 32), (4, 8), (64, 1)])
def test_the_state_is_split_by_value_heads(tp: int, heads_held: int) -> None:
    whole = 30 * STATE_ELEMENTS * 2
    assert state_bytes_per_sequence(_hybrid(), tp) == pytest.approx(whole * heads_held / 32)
    assert state_bytes_per_sequence(load_model("qwen3-30b-a3b", use_env=False), tp) == 0.0


def test_a_decode_step_reads_and_writes_each_sequences_state() -> None:
    model, system = _hybrid(), _system()
    common = {"decode_context_tokens": 16.0, "prefill_tokens": 0.0, "prefill_sequences": 0.0, "prompt_tokens": 16.0}
    few = step_times(model, system, Dtype.BF16, Dtype.BF16, decode_sequences=64.0, **common)
    many = step_times(model, system, Dtype.BF16, Dtype.BF16, decode_sequences=128.0, **common)
    bandwidth = system.system.memory_bandwidth_bytes_per_s * DEFAULT_CALIBRATION.kv_read_efficiency_on("hopper")
    state_s = 64 * 2 * state_bytes_per_sequence(model) / bandwidth  # the 64 more sequences' states, read and written
    added = float(many.decode_attention_s - few.decode_attention_s)
    assert added == pytest.approx(state_s, rel=0.05)  # 16 tokens of cache each add under 1% beside it


def test_the_state_takes_room_a_sequence_would_otherwise_cache() -> None:
    model, system = _hybrid(), _system()
    request = Request(8192, 1024, Dtype.BF16)
    plan = memory_plan(model, system, request.precision, request.kv, DEFAULT_CALIBRATION, "vllm")
    tokens, slots, extra = state_room(model, Dtype.BF16, plan.kv_capacity_tokens, engine_profile("vllm").state_pool)
    assert (tokens, slots) == (plan.kv_capacity_tokens, float("inf"))  # vLLM: one pool for tokens and states
    assert extra == pytest.approx(30 * STATE_ELEMENTS * 2 / (10 * 2 * 2 * 256 * 2))  # 1,608 tokens' worth
    batch, limit, _ = batch_limit(model, system, request, engine="vllm")
    per_sequence = np.ceil((8192 + 1024) / 16) * 16 + extra
    assert (limit, batch) == ("capacity", int(plan.kv_capacity_tokens // per_sequence))


def test_the_draft_head_of_a_hybrid_is_one_attention_layer() -> None:
    head = Speculation(draft_tokens=2, acceptance=0.7).drafter(_hybrid())
    assert head.layers == 1 and head.linear_attention is None and head.full_attention_layers == 1
    assert state_bytes_per_sequence(head) == 0.0


def test_an_estimate_says_what_state_a_hybrids_sequence_holds() -> None:
    request = Request(1024, 1024, Dtype.BF16)
    hybrid = estimate_offline(_hybrid(), _system(), request, engine="vllm")
    (note,) = [n for n in hybrid.notes if n.startswith("state:")]
    assert "30 Gated DeltaNet layers hold 32.9 MB a sequence" in note and "its 10 attention layers" in note
    plain = estimate_offline(load_model("qwen3-30b-a3b", use_env=False), _system(), request, engine="vllm")
    assert not [n for n in plain.notes if n.startswith("state:")]


def test_sglang_keeps_32_bit_states_in_a_pool_of_their_own() -> None:
    model, system = _hybrid(), _system()
    request = Request(8192, 1024, Dtype.BF16)
    sglang = engine_profile("sglang", "hopper")
    state = 30 * (32 * 128 * 128 * 4 + 8192 * 3 * 2)  # the recurrent state in 32 bits, the convolution's in 16
    assert state_bytes_per_sequence(model, ssm_bytes=sglang.state_pool.ssm_bytes) == state
    plan = memory_plan(model, system, request.precision, request.kv, DEFAULT_CALIBRATION, sglang)
    tokens, slots, shared = state_room(model, Dtype.BF16, plan.kv_capacity_tokens, sglang.state_pool)
    assert shared == 0.0 and tokens == pytest.approx(plan.kv_capacity_tokens / 1.9)  # mamba_full_memory_ratio 0.9
    # a running request counts five of the pool's slots: its live state, its radix cache's two checkpoints and the
    # extra_buffer strategy's two ping-pong buffers (the overlap scheduler's, on by default)
    assert slots == pytest.approx(plan.kv_budget_bytes * 0.9 / 1.9 / state / 5)
    batch, limit, _ = batch_limit(model, system, request, engine=sglang)
    assert (limit, batch) == ("capacity", int(min(tokens / (8192 + 1024), slots)))  # SGLang pages by the token


def test_sglang_with_its_radix_cache_off_runs_a_request_per_state_slot() -> None:
    model, system = _hybrid(), _system()
    request = Request(8192, 1024, Dtype.BF16)
    sglang = engine_profile("sglang", "hopper")
    one = sglang.state_pool.model_copy(update={"slots_per_request": 1})
    plan = memory_plan(model, system, request.precision, request.kv, DEFAULT_CALIBRATION, sglang)
    _, five_slots, _ = state_room(model, Dtype.BF16, plan.kv_capacity_tokens, sglang.state_pool)
    _, one_slot, _ = state_room(model, Dtype.BF16, plan.kv_capacity_tokens, one)
    assert one_slot == pytest.approx(5 * five_slots)
    vllm = engine_profile("vllm", "hopper").state_pool
    assert vllm.memory_ratio is None and state_room(model, Dtype.BF16, plan.kv_capacity_tokens, vllm)[1] == math.inf


def test_an_sglang_estimate_says_how_many_sequences_its_state_pool_lets_run() -> None:
    model, system = _hybrid(), _system()
    request = Request(8192, 1024, Dtype.BF16)
    sglang = engine_profile("sglang", "hopper")
    estimate = estimate_offline(model, system, request, engine=sglang)
    (note,) = [n for n in estimate.notes if n.startswith("state pool:")]
    plan = memory_plan(model, system, request.precision, request.kv, DEFAULT_CALIBRATION, sglang)
    tokens, running, _ = state_room(model, Dtype.BF16, plan.kv_capacity_tokens, sglang.state_pool)
    assert estimate.max_batch == math.floor(running) < tokens / (8192 + 1024)  # the slots bind, not the cache
    assert f"{5 * running:,.0f} slots" in note and "takes 5 slots" in note
    assert f"at most {math.floor(running):,} sequences run at once" in note and "47% of a device's KV room" in note
    vllm = estimate_offline(model, system, request, engine="vllm")
    assert not [n for n in vllm.notes if n.startswith("state pool:")]
    plain = estimate_offline(load_model("qwen3-30b-a3b", use_env=False), system, request, engine=sglang)
    assert not [n for n in plain.notes if n.startswith("state pool:")]


def test_sglang_releases_before_the_extra_buffer_default_count_three_slots_a_request() -> None:
    """auto resolved to no_buffer (3 slots: the live state and two radix checkpoints) until mid-2026, to extra_buffer
    (5: two ping-pong buffers more) from 0.5.15 on; a nightly with no release number is placed by its month."""
    counts = {
        version: engine_for_software("sglang", version).state_pool.slots_per_request
        for version in ("SGLang v0.5.8", "SGLang v0.5.14", "SGLang v0.5.15", "SGLang v0.5.16",
                        "SGLang main branch, nightly-dev-20260310 (2026-03)", "SGLang nightly (2026-07)")
    }  # fmt: skip
    assert list(counts.values()) == [3, 3, 5, 5, 3, 5]


def test_a_32_bit_state_doubles_what_a_decode_step_reads_of_it() -> None:
    model, system = _hybrid(), _system()
    common = {"decode_context_tokens": 16.0, "prefill_tokens": 0.0, "prefill_sequences": 0.0, "prompt_tokens": 16.0}
    reads = {
        name: float(step_times(model, system, Dtype.BF16, Dtype.BF16, decode_sequences=64.0, engine=name,
                               **common).decode_attention_s)
        for name in ("vllm", "sglang")
    }  # fmt: skip
    bandwidth = system.system.memory_bandwidth_bytes_per_s * DEFAULT_CALIBRATION.kv_read_efficiency_on("hopper")
    wider = 64 * 2 * (state_bytes_per_sequence(model, ssm_bytes=4.0) - state_bytes_per_sequence(model)) / bandwidth
    assert reads["sglang"] - reads["vllm"] == pytest.approx(wider, rel=1e-6)


def test_an_eager_step_launches_a_gated_deltanet_layers_fifteen_kernels() -> None:
    model = load_model("qwen3-next-80b-a3b", use_env=False)
    # two norms; a gated attention layer's 5 + query/key norm + gate on 12 of 48 layers, a Gated DeltaNet's 15 on
    # 36; the MoE's 7 and its shared expert's 3
    assert kernels_per_layer(model, Dtype.BF16, 1) == pytest.approx(2 + (12 * 7 + 36 * 15) / 48 + 10)
    # quantized: one launch more per GEMM, 2 an attention layer, 3 a Gated DeltaNet, 2 + 2 the experts'
    assert kernels_per_layer(model, Dtype.FP8, 1) - kernels_per_layer(model, Dtype.BF16, 1) == pytest.approx(
        (12 * 2 + 36 * 3) / 48 + 4
    )


def test_an_estimate_names_a_mamba2_hybrids_layers() -> None:
    request = Request(1024, 1024, Dtype.BF16)
    nano = estimate_offline(load_model("nemotron-3-nano-30b-a3b", use_env=False), _system(), request, engine="vllm")
    (note,) = [n for n in nano.notes if n.startswith("state:")]
    assert "23 Mamba-2 layers hold" in note and "its 6 attention layers" in note


@pytest.mark.parametrize("name", ["qwen3.5-35b-a3b", "nemotron-3-nano-30b-a3b"])
def test_a_hybrid_on_a_neuron_engine_is_refused_naming_the_engines_that_serve_it(name: str) -> None:
    trainium = serving_system_for_instance(CATALOG, "trn2.48xlarge", tp=4)
    with pytest.raises(ClusterSimError, match=r"serves no .* layers.*tensorrt-llm, vllm, sglang"):
        estimate_offline(load_model(name, use_env=False), trainium, Request(1024, 128, Dtype.BF16))
    plain = estimate_offline(load_model("qwen3-8b", use_env=False), trainium, Request(1024, 128, Dtype.BF16))
    assert plain.output_tokens_per_s > 0  # a model without recurrent layers is served there


def test_a_nemotron_checkpoints_float32_states_are_what_vllm_reads() -> None:
    nano = load_model("nemotron-3-nano-30b-a3b", use_env=False)
    request = Request(1024, 1024, Dtype.BF16)
    (note,) = [n for n in estimate_offline(nano, _system(), request, engine="vllm").notes if n.startswith("state:")]
    assert "its states in 32 bits as its checkpoint asks" in note
    sixteen = nano.model_copy(
        update={"linear_attention": nano.linear_attention.model_copy(update={"state_bytes": 2.0})}
    )
    wide = estimate_offline(nano, _system(), request, engine="vllm", batch=64)
    narrow = estimate_offline(sixteen, _system(), request, engine="vllm", batch=64)
    assert wide.tpot_s > narrow.tpot_s  # a decode step reads and writes twice the states' bytes
