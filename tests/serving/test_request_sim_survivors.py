"""What mutation testing of the request-level simulator (``serving.sim_steps``, ``serving.sim_scheduler``) found
unpinned: a static batch's admission on its KV blocks and sequence cap, its clock, cached prompts and first-token
lag, counted by hand on a step model of round numbers; and the step table's accuracy check, which must see a
table that is off."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.sim_scheduler import Arrivals, SchedulerLimits, run_replica
from clustersim.serving.sim_steps import axis, max_error, step_table
from clustersim.workload.zoo import load_model

PREFILL_S, PER_TOKEN_S, DECODE_S = 1.0, 0.001, 0.1


class HandSteps:
    """A step costs 1 s plus 1 ms a prompt token, and with decoders 0.1 s plus ``per_context_s`` a token of their
    mean context (0: a flat 0.1 s); no attention pairs. Records the prompts and contexts it is asked for."""

    def __init__(self, per_context_s: float = 0.0) -> None:
        self.per_context_s = per_context_s
        self.prefills: list[tuple[float, int]] = []  # (prompt tokens, prompts) of each step priced whole
        self.asked: list[tuple[str, int, list[float]]] = []

    def step_s(self, decoding: int, context: float, prefill_tokens: float, prompts: int, pairs: float) -> float:
        self.prefills.append((prefill_tokens, prompts))
        self.asked.append(("step", decoding, [context]))
        decode = (DECODE_S + self.per_context_s * context) if decoding else 0.0
        return PREFILL_S + PER_TOKEN_S * prefill_tokens + decode

    def decode_steps_s(self, decoding: int, contexts: np.ndarray) -> np.ndarray:
        self.asked.append(("decode", decoding, contexts.tolist()))
        return DECODE_S + self.per_context_s * contexts

    def chunk_pairs(self, start: float, end: float) -> float:
        return 0.0


def _static(requests: int, *, times: list[float] | None = None, **limits: object):
    """``requests`` of 32 prompt and 4 output tokens, batched statically: blocks of 16 tokens, so 3 a request."""
    table = HandSteps()
    settings = {"token_budget": 4096, "max_sequences": 8, "block_tokens": 16, "kv_blocks": 1000, "static": True}
    settings.update(limits)
    order = list(range(requests))
    arrivals = Arrivals(order, [0.0] * requests if times is None else times, None)
    log = run_replica(table, SchedulerLimits(**settings), [32] * requests, [4] * requests, arrivals)  # type: ignore[arg-type]
    return log, table


def test_a_static_batch_takes_requests_while_their_blocks_fit_and_stops_at_the_first_that_does_not():
    """Each request holds ceil(36 / 16) = 3 blocks and one of state: 4. Twelve blocks take exactly three of
    five waiting requests, then the two left; every batch's blocks come back at its end."""
    log, table = _static(5, kv_blocks=12, state_blocks=1)
    assert [prompts for _, prompts in table.prefills] == [3, 2]
    first = PREFILL_S + PER_TOKEN_S * 96 + 3 * DECODE_S  # the prompts, then three decode steps
    second = first + PREFILL_S + PER_TOKEN_S * 64 + 3 * DECODE_S
    assert [log.finish_s[r] for r in range(5)] == pytest.approx([first] * 3 + [second] * 2)
    assert log.blocks_left == 12 and log.steps == 8
    assert log.step_decoding == [3, 3, 3, 2, 2, 2]  # every slot makes a token until the last is done


def test_the_sequence_cap_bounds_a_static_batch_where_blocks_are_plenty():
    log, table = _static(5, max_sequences=2)
    assert [prompts for _, prompts in table.prefills] == [2, 2, 1]
    assert log.first_token_s[0] == pytest.approx(PREFILL_S + PER_TOKEN_S * 64)


def test_a_static_replica_starts_at_zero_and_waits_for_a_late_arrival():
    log, _ = _static(2, times=[0.0, 10.0])
    one = PREFILL_S + PER_TOKEN_S * 32 + 3 * DECODE_S
    assert log.first_token_s[0] == pytest.approx(PREFILL_S + PER_TOKEN_S * 32)
    assert log.finish_s[0] == pytest.approx(one)
    assert log.arrival_s == {0: 0.0, 1: 10.0} and log.finish_s[1] == pytest.approx(10.0 + one)


def test_cached_prompt_tokens_leave_at_least_the_last_to_compute_and_the_first_token_may_lag():
    log, table = _static(2, cached_tokens=(40, 16), first_token_lag_steps=2)
    assert table.prefills == [(1.0 + 16.0, 2)]  # 32 - min(40, 31) and 32 - 16
    prefilled = PREFILL_S + PER_TOKEN_S * 17
    assert log.first_token_s[0] == pytest.approx(prefilled + 2 * DECODE_S)  # reported two decode steps later
    assert log.finish_s[0] == pytest.approx(prefilled + 3 * DECODE_S)


@pytest.fixture(scope="module")
def small_table():
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    profile = engine_profile("vllm", system.family)
    request, cal = Request(1, 1), default_calibration()
    table = step_table(model, system, request.precision, request.kv, max_tokens=profile.max_tokens_per_step,
                       max_sequences=256, max_context=4096, cal=cal, engine=profile)  # fmt: skip
    return table, model, system, request, cal, profile


def test_the_tables_accuracy_check_sees_a_table_half_again_too_slow(small_table):
    table, model, system, request, cal, profile = small_table

    def worst(t) -> float:
        return max_error(t, model, system, request.precision, request.kv, cal=cal, engine=profile,
                         rng=np.random.default_rng(5), samples=60)  # fmt: skip

    slow = dataclasses.replace(
        table, rest=[[1.5 * v for v in row] for row in table.rest], attention=1.5 * table.attention,
        pair_s=1.5 * table.pair_s, cube=[], lines={}, eager_floor_s=1.5 * table.eager_floor_s,
    )  # fmt: skip
    assert worst(table) < 0.01
    assert worst(slow) == pytest.approx(0.5, abs=0.02)


def _continuous(inputs: list[int], outputs: list[int], times: list[float]):
    table = HandSteps(per_context_s=1e-3)
    limits = SchedulerLimits(token_budget=4096, max_sequences=8, block_tokens=16, kv_blocks=1000)
    order = list(range(len(inputs)))
    return run_replica(table, limits, inputs, outputs, Arrivals(order, times, None)), table  # type: ignore[arg-type]


def test_decoders_read_their_prompt_and_what_they_made_and_leave_the_mean_when_done():
    """Two prompts of 32 tokens together: their decode steps read 33 and 34 tokens each; once the one of three
    tokens is done, the other reads 35, 36, 37 alone."""
    log, table = _continuous([32, 32], [3, 6], [0.0, 0.0])
    assert table.asked == [("step", 0, [0.0]), ("decode", 2, [33.0, 34.0]), ("decode", 1, [35.0, 36.0, 37.0])]
    prefill = PREFILL_S + PER_TOKEN_S * 64
    assert log.first_token_s == {0: pytest.approx(prefill), 1: pytest.approx(prefill)}
    assert log.finish_s[0] == pytest.approx(prefill + 0.133 + 0.134)
    assert log.finish_s[1] == pytest.approx(prefill + 0.133 + 0.134 + 0.135 + 0.136 + 0.137)
    assert log.step_decoding == [2, 2, 1, 1, 1]


def test_a_prompt_arriving_mid_decode_joins_a_mixed_step_and_the_mean_context_counts_both():
    """A 32-token prompt decodes from 1.032 s; a 16-token one arrives at 1.1 s, after the first decode step
    (ending 1.165 s): the next step runs its prompt beside the decoder at 34 tokens; then the two decode at
    (35 + 17) / 2 = 26 and 27 tokens, and the longer alone at 37."""
    log, table = _continuous([32, 16], [6, 3], [0.0, 1.1])
    assert [(kind, decoding, contexts) for kind, decoding, contexts in table.asked[1:]] == [
        ("decode", 1, [33.0, 34.0, 35.0, 36.0, 37.0]),  # priced up to the next event, then cut at the arrival
        ("step", 1, [34.0]),
        ("decode", 2, [26.0, 27.0]),
        ("decode", 1, [37.0]),
    ]
    mixed_end = 1.032 + 0.133 + (PREFILL_S + PER_TOKEN_S * 16 + DECODE_S + 0.034)
    assert log.first_token_s == {0: pytest.approx(1.032), 1: pytest.approx(mixed_end)}
    assert log.finish_s == {1: pytest.approx(mixed_end + 0.126 + 0.127), 0: pytest.approx(mixed_end + 0.253 + 0.137)}
    assert log.step_s == pytest.approx([0.133, mixed_end - 1.165, 0.126, 0.127, 0.137])
    assert log.blocks_left == 1000 and log.steps == 6


def test_a_static_batch_decodes_at_its_mean_prompt_and_ends_each_request_at_its_own_last_token():
    """Three 32-token prompts of 1, 2 and 3 output tokens: the prompts' step has no decoders, then every slot
    decodes at 33 and 34 tokens until the longest is done; each request ends at its own last token."""
    table = HandSteps(per_context_s=1e-3)
    limits = SchedulerLimits(token_budget=4096, max_sequences=8, block_tokens=16, kv_blocks=1000, static=True)
    finished: list[int] = []
    arrivals = Arrivals([0, 1, 2], [0.0, 0.0, 0.0], None)
    log = run_replica(table, limits, [32, 32, 32], [1, 2, 3], arrivals, finished.append)  # type: ignore[arg-type]
    assert table.asked == [("step", 0, [0.0]), ("decode", 3, [33.0, 34.0])]
    prefilled = PREFILL_S + PER_TOKEN_S * 96
    assert log.finish_s == pytest.approx({0: prefilled, 1: prefilled + 0.133, 2: prefilled + 0.133 + 0.134})
    assert finished == [1, 1, 1]


def test_a_static_batchs_blocks_are_whole_blocks():
    """36 tokens take three blocks of 16 (not 2.25) and one of state: thirteen blocks hold three requests."""
    _, table = _static(5, kv_blocks=13, state_blocks=1)
    assert [prompts for _, prompts in table.prefills] == [3, 2]


def test_the_accuracy_check_prices_its_exact_steps_with_the_tables_own_engine_and_calibration():
    """A table built with half the GEMM efficiency and an engine of 0.7 kernel efficiency matches the step model
    run with those same two: the check must not price its exact steps with the packaged calibration or the
    default engine (either would put the table tens of percent off)."""
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    base = default_calibration()
    cal = dataclasses.replace(base, flop_efficiency=base.flop_efficiency / 2)
    profile = engine_profile("vllm", system.family).model_copy(update={"kernel_efficiency": 0.7})
    request = Request(1, 1)
    table = step_table(model, system, request.precision, request.kv, max_tokens=2048, max_sequences=64,
                       max_context=2048, cal=cal, engine=profile)  # fmt: skip
    worst = max_error(table, model, system, request.precision, request.kv, cal=cal, engine=profile,
                      rng=np.random.default_rng(3), samples=40)  # fmt: skip
    assert worst < 0.01


def test_a_decode_only_step_costs_the_same_through_the_vectorized_line_as_alone(small_table):
    """The scheduler prices decode-only steps in bulk (``decode_steps_s``, the table's cube interpolated at the
    decoders' count and their rows written) and single steps with ``step_s``: at every count of decoders, on the
    table's grid points and between them, and at each tabulated context, the two agree."""
    table = small_table[0]
    contexts = np.asarray(table.context_axis[:12], dtype=float)
    for decoding in (1, 3, 15, 16, 17, 23, 40, 77, 130, 201, 256):
        line = dataclasses.replace(table, lines={}).decode_steps_s(decoding, contexts)
        alone = [table.step_s(decoding, float(c), 0.0, 0, 0.0) for c in contexts]
        assert line == pytest.approx(alone, rel=1e-9), decoding


def test_a_decode_only_step_under_cuda_graphs_runs_the_padded_rows_through_its_gemms(small_table):
    """With graphs captured at 8, 16, 32 and 64 sequences, 17 decoders run 32 rows through the GEMMs, in a
    single step and in the scheduler's bulk pricing alike; 64 run 64, and 70, beyond the largest graph, 70.
    Their attention reads the 17 sequences' caches only."""
    table = dataclasses.replace(small_table[0], graph_sizes=(8, 16, 32, 64), lines={})
    assert [table.decode_rows(n) for n in (17, 64, 70)] == [32.0, 64.0, 70.0]
    context = float(table.context_axis[5])
    alone = table.step_s(17, context, 0.0, 0, 0.0)
    assert alone == pytest.approx(table.rest_s(32.0, 32.0) + table.attention_s(17, context, 17.0), rel=1e-12)
    assert alone > small_table[0].step_s(17, context, 0.0, 0, 0.0)  # the padding costs rows of GEMMs
    assert table.decode_steps_s(17, np.array([context]))[0] == pytest.approx(alone, rel=1e-9)


def test_a_table_axis_counts_every_integer_below_its_exact_limit_then_grows_to_its_top():
    assert axis(40.0, 1.25) == [float(i) for i in range(33)] + [40.0]  # every integer to 32 by default
    assert axis(5.0, 1.25) == [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    assert axis(0.2, 2.0) == [0.0, 1.0]  # a top under one still spans one step
    assert axis(100.0, 1.5, exact_below=4) == [0.0, 1.0, 2.0, 3.0, 4.0, 6.0, 9.0, 13.5, 20.25, 30.375, 45.5625,
                                                68.34375, 100.0]  # fmt: skip
