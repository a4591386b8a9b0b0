"""Routing an open loop's requests to replicas: at random, or cache-aware (the soonest first token)."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.routing import ROUTINGS, check_routing, prefill_price, route
from clustersim.serving.sim_steps import step_table
from clustersim.serving.simulate import Load, simulate
from clustersim.serving.traces import HASH_BLOCK_TOKENS, Trace, cached_prefix_tokens
from clustersim.workload.zoo import load_model


def conversations(count: int, gap_s: float, turns: int = 3) -> Trace:
    """Conversations of ``turns`` turns sent one after another, each turn's prompt the one before and two
    more blocks; a request every ``gap_s``."""
    hashes, inputs = [], []
    for k in range(count):
        conversation, turn = divmod(k, turns)
        blocks = tuple(1000 * conversation + b for b in range(2 * turn + 2))
        hashes.append(blocks)
        inputs.append(len(blocks) * HASH_BLOCK_TOKENS)
    arrival = np.arange(count, dtype=np.float64) * gap_s
    return Trace(arrival, np.array(inputs, dtype=np.int64), np.full(count, 32, dtype=np.int64), tuple(hashes))


def linear_prefill(cached: int, n: int) -> float:
    return (n - cached) * 1e-5


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(0, 2**16))
def test_random_routing_finds_what_each_replicas_own_cache_holds(replicas, seed):
    trace = conversations(48, 0.01)
    routed = route("random", trace.arrival_s, trace.input_tokens, replicas, np.random.default_rng(seed),
                   hashes=trace.prefix_hashes, capacity_blocks=7)  # fmt: skip
    assert np.all((routed.replica >= 0) & (routed.replica < replicas))
    for r in range(replicas):
        mine = np.flatnonzero(routed.replica == r)
        own = cached_prefix_tokens([trace.prefix_hashes[i] for i in mine], trace.input_tokens[mine].tolist(), 7)
        assert routed.cached_tokens[mine].tolist() == own.tolist()


def test_cache_aware_routing_keeps_a_conversation_on_the_replica_that_holds_it():
    trace = conversations(60, 1.0)  # a request a second: no replica has a queue
    routed = route("cache-aware", trace.arrival_s, trace.input_tokens, 4, np.random.default_rng(0),
                   hashes=trace.prefix_hashes, prefill_s=linear_prefill)  # fmt: skip
    one_cache = cached_prefix_tokens(trace.prefix_hashes, trace.input_tokens.tolist(), float("inf"))
    assert routed.cached_tokens.tolist() == one_cache.tolist()  # every later turn finds the one before
    turns = routed.replica.reshape(-1, 3)
    assert np.all(turns == turns[:, :1])
    randomly = route("random", trace.arrival_s, trace.input_tokens, 4, np.random.default_rng(0),
                     hashes=trace.prefix_hashes)  # fmt: skip
    assert randomly.cached_tokens.sum() < routed.cached_tokens.sum()


def test_cache_aware_routing_without_hashes_evens_out_the_waiting_work():
    count, replicas = 40, 4
    arrival = np.zeros(count)  # all at once: each goes to the replica with the least work queued
    inputs = np.full(count, 2048, dtype=np.int64)
    routed = route("cache-aware", arrival, inputs, replicas, np.random.default_rng(0), prefill_s=linear_prefill)
    assert np.bincount(routed.replica, minlength=replicas).tolist() == [count // replicas] * replicas
    assert routed.cached_tokens.sum() == 0


def test_a_policy_is_named_or_refused():
    assert ROUTINGS == ("random", "cache-aware") and check_routing("cache-aware") == "cache-aware"
    with pytest.raises(ClusterSimError, match=r"^--routing: 'nearest' is not one of random, cache-aware$") as found:
        check_routing("nearest")
    assert found.value.field == "--routing"


@functools.cache
def four_replicas():
    catalog = load_catalog(use_env=False)
    return load_model("llama3.1-8b", use_env=False), serving_system_for_instance(catalog, "p5.48xlarge", tp=2)


def test_cache_aware_routing_finds_more_and_answers_sooner_than_random():
    model, system = four_replicas()
    assert system.dp == 4
    trace = conversations(240, 0.05)
    runs = {how: simulate(model, system, Request(2048, 32), Load(trace=trace), routing=how) for how in ROUTINGS}
    random_run, aware_run = runs["random"], runs["cache-aware"]
    assert (random_run.setup["routing"], aware_run.setup["routing"]) == ("random", "cache-aware")
    found = {how: run.setup["prefix_cache"]["cached_share"] for how, run in runs.items()}
    assert found["cache-aware"] > found["random"] + 0.1
    assert float(np.mean(aware_run.ttft_s)) < float(np.mean(random_run.ttft_s))
    assert aware_run.output_tokens.sum() == random_run.output_tokens.sum()


def test_a_closed_loop_is_not_routed():
    model, system = four_replicas()
    with pytest.raises(ClusterSimError, match=r"^--routing cache-aware: a closed loop"):
        simulate(model, system, Request(512, 32), Load(concurrency=8), requests=16, routing="cache-aware")


def test_random_routing_uses_every_replica():
    trace = conversations(400, 0.01)
    for replicas in (2, 3, 8):
        routed = route("random", trace.arrival_s, trace.input_tokens, replicas, np.random.default_rng(1))
        assert sorted(set(routed.replica.tolist())) == list(range(replicas))
        assert routed.replica.dtype == np.int64 and routed.cached_tokens.dtype == np.int64


def test_cache_aware_routing_needs_a_prefill_price():
    trace = conversations(6, 0.1)
    with pytest.raises(ClusterSimError, match="cache-aware routing needs the replicas' prefill price"):
        route("cache-aware", trace.arrival_s, trace.input_tokens, 2, np.random.default_rng(0))


def test_the_prefill_price_is_the_step_models_prompt_steps():
    model, system = four_replicas()
    request, profile = Request(1, 1), engine_profile(None, system.family)
    steps = step_table(model, system, request.precision, request.kv, max_tokens=8192, max_sequences=64,
                       max_context=70_000.0, cal=default_calibration(), engine=profile)  # fmt: skip
    budget = 4096
    price = prefill_price(steps, budget)

    def prompt_step(start: int, end: int) -> float:
        return steps.step_s(0, 0.0, float(end - start), 1, steps.chunk_pairs(start, end))

    assert price(0, budget) == pytest.approx(prompt_step(0, budget), rel=1e-6)
    assert price(budget, 2 * budget) == pytest.approx(prompt_step(budget, 2 * budget), rel=1e-6)
    assert price(0, 2 * budget) == pytest.approx(prompt_step(0, budget) + prompt_step(budget, 2 * budget), rel=1e-6)
    longer = [price(0, n) for n in (1024, 8192, 32768, 65536)]
    assert longer == sorted(longer) and longer[-1] > 2 * longer[-2]  # attention: more than linear
    assert price(30_000, 32768) < price(0, 32768)
