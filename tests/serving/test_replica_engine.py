"""One replica's scheduler limits (``clustersim.serving.simulate.replica_engine``): its KV cache in whole blocks, a
pipeline stage's share of it, a hybrid's recurrent states beside it, and the refusals when a request cannot fit;
and the lengths a run draws, cut to the model's context."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from clustersim.catalog.schema import Dtype
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, memory_plan, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.memory import state_room
from clustersim.serving.simulate import Load, draw_lengths, replica_engine
from clustersim.serving.speculative import Speculation
from clustersim.serving.traces import read_trace
from tests.serving.test_disaggregation import catalog, model

TRTLLM = engine_profile("tensorrt-llm", "hopper")  # 32-token KV blocks, hybrids' states in the cache's pool
SGLANG = engine_profile("sglang", "hopper")  # 1-token blocks, a pool of its own for the states


def _engine(instance: str, profile, *, name: str = "llama3.1-8b", tp: int = 1, pp: int = 1, lengths=(1000, 24),
            **kwargs):  # fmt: skip
    """One replica's (steps, limits) for one request of ``lengths`` on ``instance``."""
    system = serving_system_for_instance(catalog(), instance, tp=tp, pp=pp)
    inputs, outputs = np.array([lengths[0]]), np.array([lengths[1]])
    return replica_engine(model(name), system, Request(*lengths), profile, default_calibration(), inputs, outputs,
                          **kwargs)  # fmt: skip


def _limits(lengths: tuple[int, int], kv_tokens: float, *, profile=TRTLLM, **kwargs):
    """The limits of one request of ``lengths`` on one H100 holding ``kv_tokens`` of cache."""
    return _engine("p5.48xlarge", profile, lengths=lengths, kv_capacity_tokens=kv_tokens, **kwargs)[1]


def test_a_request_that_fills_every_block_is_admitted_and_one_token_more_is_refused():
    """1,024 tokens of cache in 32-token blocks: a request of 1,000 + 24 tokens takes all 32 blocks; 1,001 + 24 needs
    a 33rd."""
    limits = _limits((1000, 24), 1024.0)
    assert (limits.kv_blocks, limits.block_tokens, limits.state_blocks) == (32, 32, 0)
    assert (limits.prefix_hit_rate, limits.first_token_lag_steps) == (0.0, 0)  # the defaults
    message = (
        r"^kv cache: the longest request \(1,025 tokens\) needs 1,056 tokens of KV cache, more than the 1,024 a "
        r"replica holds; use a larger tp, an fp8 KV cache or shorter requests$"
    )
    with pytest.raises(ClusterSimError, match=message) as error:
        _limits((1001, 24), 1024.0)
    assert error.value.field == "kv_capacity_tokens"


def test_a_pipeline_stage_holds_its_share_of_the_cache():
    """Two stages of 2,048 tokens between them: each micro-batch engine holds 1,024, so the 1,025-token request that
    one stage of 2,048 would hold is refused."""
    assert _limits((1001, 24), 2048.0).kv_blocks == 64
    assert _limits((1000, 24), 2048.0, pp=2).kv_blocks == 32
    with pytest.raises(ClusterSimError, match=r"more than the 1,024 a replica holds"):
        _limits((1001, 24), 2048.0, pp=2)


def test_a_reservation_must_fit_the_cache_whole():
    """TensorRT-LLM's reserve admission holds each request's prompt and output cap: a cap of 1,024 tokens fits 1,024
    tokens of cache, 1,025 does not."""
    assert _limits((100, 24), 1024.0, reserve=np.array([1024])).reserve_tokens == (1024,)
    message = (
        r"^--admission reserve: a request's prompt and output cap \(1,025 tokens\) need more KV cache than the 1,024 "
        r"tokens a replica holds; use --admission paged or a larger tp$"
    )
    with pytest.raises(ClusterSimError, match=message) as error:
        _limits((100, 24), 1024.0, reserve=np.array([1025]))
    assert (error.value.field, error.value.value) == ("--admission", "reserve")


def test_a_hybrid_s_state_takes_whole_blocks_of_a_shared_cache():
    """Qwen3-Next on TensorRT-LLM keeps each sequence's Gated DeltaNet state in the cache's pool: its 1,608 tokens'
    worth take 51 blocks of 32, beside the request's own; one block fewer than both is refused."""
    name = "qwen3-next-80b-a3b"
    shared = state_room(model(name), Dtype.BF16, 1e6, TRTLLM.state_pool)[2]
    state = math.ceil(shared / 32)
    assert state == 51
    need = 32 + state  # 1,000 + 24 tokens and the state
    assert _limits((1000, 24), need * 32.0, name=name).state_blocks == state
    with pytest.raises(ClusterSimError, match=r"^kv cache: the longest request \(1,024 tokens\) needs 2,656 tokens"):
        _limits((1000, 24), (need - 1) * 32.0, name=name)


def test_a_states_pool_of_its_own_caps_the_running_sequences():
    """SGLang keeps hybrids' states in a pool of their own: where it holds 1.5 requests' states the replica runs one
    sequence at a time; where it holds half of one, nothing runs."""
    name = "qwen3-next-80b-a3b"
    slots_per_token = state_room(model(name), Dtype.BF16, 1.0, SGLANG.state_pool)[1]
    assert _limits((1000, 24), 1.5 / slots_per_token, name=name, profile=SGLANG).max_sequences == 1
    assert _limits((1000, 24), 3.5 / slots_per_token, name=name, profile=SGLANG).max_sequences == 3
    message = (
        r"^kv cache: one sequence's recurrent state needs more than the states' pool of a replica; use a larger tp or "
        r"an engine that shares one pool$"
    )
    with pytest.raises(ClusterSimError, match=message) as error:
        _limits((1000, 24), 0.5 / slots_per_token, name=name, profile=SGLANG)
    assert error.value.field == "kv_capacity_tokens"


def test_without_a_stated_capacity_the_engine_s_own_memory_plan_sizes_the_cache():
    """vLLM's plan (its memory fraction, its 16-token blocks) and a calibration's workspace both reach the blocks."""
    system = serving_system_for_instance(catalog(), "p5.48xlarge", tp=1)
    llama, request = model("llama3.1-8b"), Request(1000, 24)
    vllm = engine_profile("vllm", "hopper")
    roomy = dataclasses.replace(default_calibration(), workspace_bytes=1 << 30)
    for profile, cal in ((vllm, default_calibration()), (vllm, roomy), (TRTLLM, roomy)):
        limits = replica_engine(llama, system, request, profile, cal, np.array([1000]), np.array([24]))[1]
        plan = memory_plan(llama, system, request.precision, request.kv, cal, profile)
        assert limits.kv_blocks == int(plan.kv_capacity_tokens // profile.kv_block_tokens)
    assert (
        memory_plan(llama, system, request.precision, request.kv, roomy, vllm).kv_capacity_tokens
        > memory_plan(llama, system, request.precision, request.kv, default_calibration(), vllm).kv_capacity_tokens
    )


def test_a_reservation_counts_a_hybrid_s_state_blocks():
    """Qwen3-Next on TensorRT-LLM in 60 blocks of 32: a 124-token request (4 blocks and its state's 51) runs; a
    reservation of 1,024 tokens needs 32 + 51 blocks, more than 60, one of 288 tokens 9 + 51, exactly 60."""
    name = "qwen3-next-80b-a3b"
    assert _limits((100, 24), 60 * 32.0, name=name, reserve=np.array([288])).kv_blocks == 60
    with pytest.raises(ClusterSimError, match=r"^--admission reserve: a request's prompt and output cap \(1,024 "):
        _limits((100, 24), 60 * 32.0, name=name, reserve=np.array([1024]))


def test_lengths_drawn_beyond_the_context_are_cut_to_it_unless_asked_not_to(tmp_path):
    """Llama 3 8B's 8,192-token context: a 9,000-token prompt keeps 8,191 tokens and one output token, an 8,000-token
    prompt keeps 192 of its 500 outputs; --beyond-context leaves them whole."""
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0.0,9000,100\n0.1,8000,500\n0.2,100,10\n")
    load, rng = Load(trace=read_trace(path)), np.random.default_rng(0)
    inputs, outputs = draw_lengths(model("llama3-8b"), Request(100, 10), load, None, rng, 3)
    assert (inputs.tolist(), outputs.tolist()) == ([8191, 8000, 100], [1, 192, 10])
    whole = draw_lengths(model("llama3-8b"), Request(100, 10, beyond_context=True), load, None, rng, 3)
    assert (whole[0].tolist(), whole[1].tolist()) == ([9000, 8000, 100], [100, 500, 10])


def test_the_accelerator_s_own_caps_set_the_limits_and_a_smaller_batch_caps_them_further():
    """vLLM runs at most 256 sequences and 2,048 tokens a step on an A100 (its defaults there), 1,024 and 8,192 on
    an H100; --batch 100 caps the sequences, a larger one does not raise them."""
    vllm = engine_profile("vllm", "hopper")
    a100 = _engine("p4de.24xlarge", vllm, kv_capacity_tokens=1e5)[1]
    h100 = _engine("p5.48xlarge", vllm, kv_capacity_tokens=1e5)[1]
    assert (a100.max_sequences, a100.token_budget) == (256, 2048)
    assert (h100.max_sequences, h100.token_budget) == (1024, 8192)
    assert _engine("p4de.24xlarge", vllm, kv_capacity_tokens=1e5, max_batch=100)[1].max_sequences == 100
    assert _engine("p4de.24xlarge", vllm, kv_capacity_tokens=1e5, max_batch=5000)[1].max_sequences == 256


def test_the_step_table_covers_every_step_the_scheduler_can_form():
    """Its tokens reach the step's budget and, speculating, every running sequence's drafts verified beside it; its
    sequences the cap; its decode contexts the longest request; a static batch's tokens its whole prompts."""
    vllm = engine_profile("vllm", "hopper")
    table, limits = _engine("p4de.24xlarge", vllm, kv_capacity_tokens=1e5, lengths=(3000, 500))
    assert table.tokens_axis[-1] >= limits.token_budget and table.sequences_axis[-1] >= limits.max_sequences
    assert table.context_axis[-1] >= 3500
    spec = Speculation(4, 0.7)
    speculating, limits = _engine("p4de.24xlarge", vllm, kv_capacity_tokens=1e5, speculation=spec)
    assert speculating.target.tokens_axis[-1] >= limits.token_budget + 4 * limits.max_sequences
    assert speculating.draft.tokens_axis[-1] >= limits.token_budget
    system = serving_system_for_instance(catalog(), "p5.48xlarge", tp=1)
    request = Request(3000, 500, batching=Batching.STATIC)
    lengths = np.array([3000, 2000]), np.array([500, 500])
    table, limits = replica_engine(model("llama3.1-8b"), system, request, TRTLLM, default_calibration(), *lengths,
                                   kv_capacity_tokens=1e6, max_batch=8)  # fmt: skip
    assert limits.static and table.tokens_axis[-1] >= 8 * 3000  # eight whole prompts in one step


def test_a_head_drafts_inside_the_target_s_launch_and_a_draft_model_in_its_own():
    """A one-layer head's steps pay no overhead of their own (the engine's step cost is the target's); a separate
    draft model's steps pay the engine's."""
    vllm = engine_profile("vllm", "hopper")
    head = _engine("p5.48xlarge", vllm, kv_capacity_tokens=1e5, speculation=Speculation(2, 0.7))[0]
    drafter = model("qwen3-0.6b")
    own = _engine("p5.48xlarge", vllm, kv_capacity_tokens=1e5, speculation=Speculation(2, 0.7, drafter))[0]
    assert head.draft.step_s(1, 100.0, 0.0, 0, 0.0) < own.draft.step_s(1, 100.0, 0.0, 0, 0.0)
    alone = _engine("p5.48xlarge", vllm, name="qwen3-0.6b", kv_capacity_tokens=1e5)[0]
    assert own.draft.step_s(1, 100.0, 0.0, 0, 0.0) == pytest.approx(alone.step_s(1, 100.0, 0.0, 0, 0.0))


def test_a_states_pool_of_exactly_one_sequence_runs_one_and_tensor_parallel_ranks_share_the_states():
    """SGLang's states' pool holding exactly one request's states runs one sequence; at TP 4 each rank holds a quarter
    of each state but, Qwen3-Next having two KV heads, half a token's cache, so the same room of cache tokens holds
    twice the states."""
    name = "qwen3-next-80b-a3b"
    slots_per_token = state_room(model(name), Dtype.BF16, 1.0, SGLANG.state_pool)[1]
    assert _limits((1000, 24), 1.0 / slots_per_token, name=name, profile=SGLANG).max_sequences == 1
    tp4 = state_room(model(name), Dtype.BF16, 1.0, SGLANG.state_pool, tp=4)[1]
    assert tp4 == pytest.approx(2 * slots_per_token)
    room = 3.5 / slots_per_token
    one, four = (_engine("p5.48xlarge", SGLANG, name=name, tp=tp, kv_capacity_tokens=room)[1] for tp in (1, 4))
    assert (one.max_sequences, four.max_sequences) == (3, 7)
