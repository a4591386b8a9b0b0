"""One replica's scheduler limits (``clustersim.serving.simulate.replica_engine``): its KV cache in whole blocks, a
pipeline stage's share of it, a hybrid's recurrent states beside it, and the refusals when a request cannot fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.memory import state_room
from clustersim.serving.simulate import replica_engine
from tests.serving.test_disaggregation import catalog, model

TRTLLM = engine_profile("tensorrt-llm", "hopper")  # 32-token KV blocks, hybrids' states in the cache's pool
SGLANG = engine_profile("sglang", "hopper")  # 1-token blocks, a pool of its own for the states


def _limits(lengths: tuple[int, int], kv_tokens: float, *, pp: int = 1, name: str = "llama3.1-8b", profile=TRTLLM,
            **kwargs):  # fmt: skip
    system = serving_system_for_instance(catalog(), "p5.48xlarge", tp=1, pp=pp)
    inputs, outputs = np.array([lengths[0]]), np.array([lengths[1]])
    return replica_engine(model(name), system, Request(*lengths), profile, default_calibration(), inputs, outputs,
                          kv_capacity_tokens=kv_tokens, **kwargs)[1]  # fmt: skip


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
