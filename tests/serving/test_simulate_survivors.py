"""Tests that kill what mutation testing of ``serving_simulate`` (the request simulator's driver and its
disaggregated form, benchmarks/mutation.py) left alive.

Equivalent mutants left alive: the merged logs' arrays built without their dtype (numpy infers float64 and int64
from the values); their stable sort by arrival made unstable or spelled "STABLE" (it can only permute requests
that arrive at the same instant, which no figure reads); the prefill worker index and ones arrays likewise;
``check_run`` handed no system (it reads none); a transfer's wire time from ``inputs.astype(None)`` (float64);
a calibration left None (every callee defaults it alike); the speculative result's ``resume_gaps_s`` passed or
not (the same array); a traced request's output cap at 1 rather than 0 (each output is at least 1); the progress
count starting at 1 (the report of the last hundred moves one request earlier, the calls stay the same); a replica's
cached prefix capped at its prompts plus one token rather than less one (a hit rate below 1 and a trace's cache,
``cached_prefix_tokens``, leave the last token out already); a one-stage replica's steps wrapped in
``PipelinedSteps`` of one stage (the same times); a drafter's table priced with a calibration left None, and a
disaggregated run's engine profile asked for with no family (GPU engines' profiles do not depend on it); the
disaggregated run's gaps starting as None rather than a list (both are falsy when nothing decodes); a lone decode
worker drawn at random (the draw comes after every other); ``_Progress`` halving with ``/`` (equal numbers);
``run_replicas``'s default routing and a Poisson rate's fallback (every caller names them; only a trace has no
rate); the blocks counted with ``/`` rather than ``//`` before ``int`` (positive: the same)."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest

from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.estimate import Request
from clustersim.serving.formats import BlockFp4
from clustersim.serving.serving_system import ServingSystem
from clustersim.serving.sim_disaggregated import _send, simulate_disaggregated
from clustersim.serving.sim_report import Slo
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, reserve_tokens, simulate
from clustersim.serving.speculative import Speculation
from clustersim.serving.traces import read_trace
from tests.serving.test_disaggregation import catalog, model, pools


def test_a_disaggregated_run_reports_progress_every_hundred_requests_of_each_pool_and_at_the_end():
    """Progress over both pools: the prefill pool's first half (its 100th, 200th and last request), then the
    decode pool's second (the same), as ``(done, total)`` with total the run's 250 requests."""
    calls: list[tuple[int, int]] = []
    simulate_disaggregated(
        model("llama3.1-8b"), pools("1:2"), Request(512, 64), Load(rate_per_s=20.0), requests=250, seed=1,
        progress=lambda done, total: calls.append((done, total)),
    )  # fmt: skip
    assert calls == [(50, 250), (100, 250), (125, 250), (175, 250), (225, 250), (250, 250)]


def _h100() -> ServingSystem:
    return serving_system_for_instance(catalog(), "p5.48xlarge", tp=1)


def _run(pool_text: str = "1:1", request: Request | None = None, rate: float = 8.0, **kwargs):
    defaults = {"requests": 120, "seed": 2}
    return simulate_disaggregated(
        model("llama3.1-8b"), pools(pool_text), request or Request(2048, 64), Load(rate_per_s=rate),
        **(defaults | kwargs),
    )  # fmt: skip


def test_the_calibration_given_prices_both_pools():
    """A calibration at half the achieved FLOP and HBM fractions makes both pools slower: a later first token
    and longer gaps between the others."""
    default = default_calibration()
    slow = dataclasses.replace(
        default, flop_efficiency=default.flop_efficiency / 2, hbm_efficiency=default.hbm_efficiency / 2
    )
    base, slower = _run(), _run(cal=slow)
    assert np.median(slower.ttft_s) > 1.3 * np.median(base.ttft_s)
    assert np.mean(slower.request_itl_s) > 1.3 * np.mean(base.request_itl_s)  # the decode pool's steps too


def test_a_batch_cap_and_a_prefix_hit_rate_reach_the_prompts_pool():
    """One sequence a step on the prompts' pool queues the prompts (a later first token); a 90% prefix hit
    leaves a tenth of each prompt to compute (an earlier one)."""
    base = np.median(_run(rate=30.0).ttft_s)
    assert np.median(_run(rate=30.0, max_batch=1).ttft_s) > 1.4 * base
    assert np.median(_run(rate=30.0, prefix_hit_rate=0.9).ttft_s) < 0.5 * base


def test_lengths_drawn_from_a_set_reach_the_run_and_repeat_with_the_seed():
    sampler = request_sampler("sharegpt", 229.7, 203.1)
    run = _run(request=Request(229.7, 203.1), sampler=sampler)
    again = _run(request=Request(229.7, 203.1), sampler=sampler)
    assert len(set(run.input_tokens.tolist())) > 50 and len(set(run.output_tokens.tolist())) > 50
    assert np.array_equal(run.input_tokens, again.input_tokens) and np.array_equal(run.finish_s, again.finish_s)


def test_cache_aware_routing_reaches_the_prompts_pool():
    """Two prompt workers: routing by the soonest first token, not at random, changes who waits."""
    random = _run("2:1", rate=24.0, routing="random")
    aware = _run("2:1", rate=24.0, routing="cache-aware")
    assert not np.array_equal(random.ttft_s, aware.ttft_s)
    assert aware.ttft_s.mean() < random.ttft_s.mean()


def test_what_a_disaggregated_run_refuses_names_the_option():
    with pytest.raises(ClusterSimError, match=r"^--batch: must be at least 1 sequence, got 0$") as error:
        _run(max_batch=0)
    assert error.value.field == "--batch"
    static = Request(512, 64, batching=Batching.STATIC)
    with pytest.raises(
        ClusterSimError, match=r"^--disaggregate: the pools run continuous batching; drop --batching st"
    ):
        _run(request=static)
    with pytest.raises(ClusterSimError, match=r"^precision: nvfp4 is served on Blackwell's FP4 tensor cores") as error:
        _run(request=Request(512, 64, precision=BlockFp4.NVFP4))
    assert error.value.field == "precision"


def test_a_pool_too_small_for_the_weights_is_named():
    """llama2-70b at 16 bits on one H100 a worker: the prompts' pool is named (it is checked first)."""
    with pytest.raises(ClusterSimError, match=r"^--disaggregate: the prefill pool's workers \(tp 1\)") as error:
        simulate_disaggregated(
            model("llama2-70b"), pools("1x1:1x8", tp=8, name="llama2-70b"), Request(512, 64), Load(rate_per_s=1.0),
            requests=10,
        )  # fmt: skip
    assert error.value.field == "--disaggregate" and error.value.value == 1
    with pytest.raises(ClusterSimError, match=r"^--disaggregate: the decode pool's workers \(tp 1\)"):
        simulate_disaggregated(
            model("llama2-70b"), pools("1x8:1x1", tp=8, name="llama2-70b"), Request(512, 64), Load(rate_per_s=1.0),
            requests=10,
        )  # fmt: skip


def test_an_fp4_kv_cache_is_served_where_the_engine_stores_one():
    """TensorRT-LLM keeps an NVFP4 KV cache on Blackwell: a disaggregated run on B200 pools serves it."""
    b200 = pools("1:1", instance="p6-b200.48xlarge")
    request = Request(512, 64, precision=BlockFp4.NVFP4, kv_precision=BlockFp4.NVFP4)
    run = simulate_disaggregated(model("llama3.1-8b"), b200, request, Load(rate_per_s=4.0), requests=20)
    assert run.output_tokens.sum() == 20 * 64


@pytest.mark.parametrize(
    ("sender", "receiver", "arrived"),
    [
        ([0, 0], [0, 1], [1.5, 2.5]),  # one prefill worker: its link sends one cache after the other
        ([0, 1], [0, 0], [1.5, 2.5]),  # one decode worker: its link receives one after the other
        ([0, 1], [0, 1], [1.5, 1.5]),  # separate links: both at once
    ],
)
def test_a_kv_transfer_holds_both_workers_links(sender, receiver, arrived):
    """Both caches ready at 0.5 s, each 1 s on the wire; a request that stays (one output token) moves nothing."""
    ready = np.array([0.5, 0.5, 0.25])
    got = _send(ready, np.array([1.0, 1.0, 9.0]), np.array([*sender, 0]), np.array([*receiver, 0]),
                np.array([True, True, False]))  # fmt: skip
    assert got.tolist() == [*arrived, 0.25]


def test_a_two_token_request_goes_to_the_decode_pool_and_a_one_token_one_does_not():
    """A second token is the decode pool's: a request of two output tokens moves its cache and makes its second
    token there (one decode step each); one of one token ends at its prefill."""
    two = _run(request=Request(512, 2), requests=40)
    one = _run(request=Request(512, 1), requests=40)
    assert np.array_equal(one.finish_s, one.first_token_s)
    assert np.all(two.finish_s > two.first_token_s)
    made = two.arrival_s.size + int(two.step_tokens.sum()) + two.resume_gaps_s.size
    assert made == int(two.output_tokens.sum()) == 80
    assert np.all(two.ttft_s > one.ttft_s)  # the same prompts' pool; the first token waits for its cache's transfer


def test_the_decode_pool_keeps_the_batch_cap_and_spreads_over_its_workers():
    """--batch 1 caps the decode pool's steps at one sequence; two decode workers share the load (each its
    share of the requests), so at a load that fills one the inter-token latency is lower."""
    capped = _run(request=Request(512, 128), rate=8.0, requests=60, max_batch=1)
    assert capped.step_tokens.max() == 1
    one = _run("1:1", request=Request(512, 128), rate=60.0, requests=300)
    two = _run("1:2", request=Request(512, 128), rate=60.0, requests=300)
    assert two.step_tokens.max() < 0.7 * one.step_tokens.max()
    assert np.mean(two.request_itl_s) < np.mean(one.request_itl_s)


def test_the_engine_named_prices_the_pools():
    """SGLang's profile (its own token budget and decode kernels) moves when the requests finish."""
    assert not np.array_equal(_run().finish_s, _run(engine="sglang").finish_s)


def test_a_reserve_admission_holds_at_most_the_context_unless_told_to_go_beyond():
    """TensorRT-LLM's GUARANTEED_NO_EVICT holds a prompt and its output cap; within the model's context (8,192 for
    llama3-8b), but never less than the request's own prompt and output."""
    llama = model("llama3-8b")
    inputs, outputs = np.array([1000, 8000]), np.array([100, 900])
    held = reserve_tokens(llama, Request(1000, 100), "reserve", inputs, outputs, cap=16384)
    assert held is not None and held.tolist() == [8192, 8900]
    beyond = reserve_tokens(llama, Request(1000, 100, beyond_context=True), "reserve", inputs, outputs, cap=16384)
    assert beyond is not None and beyond.tolist() == [17384, 24384]
    assert reserve_tokens(llama, Request(1000, 100), "paged", inputs, outputs, cap=16384) is None
    with pytest.raises(ClusterSimError, match=r"^--admission: 'greedy' is not one of ") as error:
        reserve_tokens(llama, Request(1000, 100), "greedy", inputs, outputs, cap=16384)
    assert (error.value.field, error.value.value) == ("--admission", "greedy")


def test_a_run_reports_its_own_wall_time():
    system = _h100()
    for run in (simulate(model("llama3.1-8b"), system, Request(512, 16), Load(rate_per_s=4.0), requests=20),
                _run(requests=20)):  # fmt: skip
        assert 0.0 < run.wall_s < 60.0


def test_the_simulator_refuses_attention_data_parallel_groups_by_name():
    mixtral = model("mixtral-8x7b")
    system = serving_system_for_instance(catalog(), "p5.48xlarge", tp=1, attention_dp=2)
    with pytest.raises(ClusterSimError, match=r"^attention_dp: the request simulator schedules one queue per replica; "
                       r"attention dp 2 \(groups scheduling their own requests\) is priced by the closed forms only$"
                       ) as error:  # fmt: skip
        simulate(mixtral, system, Request(512, 16), Load(rate_per_s=1.0), requests=10)
    assert (error.value.field, error.value.value) == ("attention_dp", 2)


def test_the_simulator_prices_with_the_calibration_given():
    system = _h100()
    default = default_calibration()
    slow = dataclasses.replace(default, hbm_efficiency=default.hbm_efficiency / 2)
    runs = [
        simulate(model("llama3.1-8b"), system, Request(512, 64), Load(rate_per_s=4.0), requests=20, cal=cal)
        for cal in (None, slow)
    ]
    assert np.mean(runs[1].request_itl_s) > 1.5 * np.mean(runs[0].request_itl_s)


def test_the_simulator_reports_progress_every_hundred_requests():
    calls: list[tuple[int, int]] = []
    simulate(model("llama3.1-8b"), _h100(), Request(512, 16), Load(rate_per_s=40.0), requests=250,
             progress=lambda done, total: calls.append((done, total)))  # fmt: skip
    assert calls == [(100, 250), (200, 250), (250, 250)]


def test_with_speculation_the_pooled_gap_is_a_verify_step_shared_by_its_tokens():
    """A verify step's accepted tokens reach the client together: the pooled inter-token gap is the step over the
    tokens it makes (2.77 at K 4, A 0.7), about a request's mean gap, not the whole step."""
    spec = Speculation(4, 0.7)
    run = simulate(model("llama3.1-8b"), _h100(), Request(512, 256), Load(concurrency=8), requests=40, speculation=spec)
    pooled = float(np.average(run.step_s, weights=run.step_tokens))
    assert pooled == pytest.approx(float(np.mean(run.request_itl_s)), rel=0.15)


@pytest.mark.parametrize(
    ("kwargs", "request_", "message", "field"),
    [
        ({"max_batch": 0}, Request(512, 16), r"^--batch: must be at least 1 sequence, got 0$", "--batch"),
        ({"kv_capacity_tokens": 0.0}, Request(512, 16), r"^kv_capacity_tokens: must be positive, got 0.0$",
         "kv_capacity_tokens"),
        ({}, Request(512, 16, precision=BlockFp4.NVFP4), r"^precision: nvfp4 is served on Blackwell's FP4 tensor cores",
         "precision"),
    ],
)  # fmt: skip
def test_what_the_simulator_refuses_names_the_option(kwargs, request_, message, field):
    with pytest.raises(ClusterSimError, match=message) as error:
        simulate(model("llama3.1-8b"), _h100(), request_, Load(rate_per_s=1.0), requests=10, **kwargs)
    assert error.value.field == field


def test_a_trace_s_requests_reserve_their_own_outputs_not_the_request_s_mean(tmp_path):
    """Eight traced requests of 100 + 10 tokens at t = 0 under TensorRT-LLM's reserve admission with room for
    1,200 KV tokens: each reserves its own 110 (all eight at once), not the 1,100 a 1,000-token mean would cap."""
    path = tmp_path / "trace.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n" + "0.0,100,10\n" * 8)
    run = simulate(model("llama3.1-8b"), _h100(), Request(100, 1000), Load(trace=read_trace(path)),
                   kv_capacity_tokens=1200.0)  # fmt: skip
    assert run.first_token_s.max() < 2 * run.first_token_s.min()


def test_a_disaggregated_run_reports_its_link_waits_its_slo_and_its_open_loop():
    """The report's KV link wait is the time a cache waited behind its workers' earlier transfers (none when its
    links are free); the SLO given judges goodput; the run is an open loop (no concurrency)."""
    free = _run("1:1", request=Request(512, 16), rate=0.5, requests=20, slo=Slo(ttft_s=1e-6))
    setup = free.setup
    assert setup["concurrency"] is None and setup["rate_per_s"] == 0.5
    assert setup["disaggregation"]["kv_link_wait_s"] == {"p50": 0.0, "p90": 0.0, "p99": 0.0, "mean": 0.0}
    assert free.to_json()["goodput"]["fraction"] == 0.0  # no first token within a microsecond
    busy = _run("1:2", request=Request(2048, 16), rate=60.0, requests=200).setup["disaggregation"]["kv_link_wait_s"]
    assert busy["p99"] > 0.0 and busy["mean"] <= busy["p99"]


@pytest.mark.parametrize("seed", range(4))
def test_every_request_is_served_when_some_replicas_get_none(seed):
    """Three requests over eight replicas (random routing): the empty replicas are skipped, not the end of the
    replicas (every request gets its tokens)."""
    run = simulate(model("llama3.1-8b"), serving_system_for_instance(catalog(), "p5.48xlarge", tp=1),
                   Request(512, 16), Load(rate_per_s=1.0), requests=3, seed=seed)  # fmt: skip
    assert run.arrival_s.size == 3
    assert np.all(run.first_token_s > run.arrival_s) and np.all(run.finish_s > run.first_token_s)


def test_a_prefix_hit_rate_caches_its_share_of_each_prompt_up_to_all_but_the_last_token():
    """At a hit rate of 0.999 every 512-token prompt finds floor(511.5) = 511 tokens cached, all but its last
    position, which always runs (it makes the first token)."""
    run = simulate(model("llama3.1-8b"), _h100(), Request(512, 8), Load(rate_per_s=2.0), requests=20,
                   prefix_hit_rate=0.999)  # fmt: skip
    assert run.setup["prefix_cache"] == {"source": "rate", "cached_share": pytest.approx(511 / 512)}
    assert run.setup["routing"] == "random"


def test_an_unknown_routing_is_refused_by_name():
    with pytest.raises(ClusterSimError, match=r"^--routing: 'nearest' is not one of random, cache-aware$") as error:
        simulate(model("llama3.1-8b"), _h100(), Request(512, 8), Load(rate_per_s=1.0), requests=5, routing="nearest")
    assert (error.value.field, error.value.value) == ("--routing", "nearest")


def test_a_speculative_run_reports_its_speculation():
    spec = Speculation(4, 0.7)
    run = simulate(model("llama3.1-8b"), _h100(), Request(512, 64), Load(concurrency=4), requests=12, speculation=spec)
    assert run.setup["speculation"] == spec.to_json()
    assert run.setup["routing"] == "random"


def test_a_disaggregated_run_on_a_trace_takes_its_prefixes_from_the_trace_s_blocks(tmp_path):
    """A trace naming its prompts' blocks (Mooncake's hash_ids) fills the prompts' pool's prefix cache from them:
    the run reports the trace as the cache's source, the routing asked for, and each repeat of a 1,024-token prompt
    finds 1,023 tokens cached (all but the last)."""
    path = tmp_path / "trace.jsonl"
    rows = [{"timestamp": 100 * k, "input_length": 1024, "output_length": 8, "hash_ids": [7, 8]} for k in range(10)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    run = simulate_disaggregated(model("llama3.1-8b"), pools("1:1"), Request(1024, 8), Load(trace=read_trace(path)),
                                 routing="cache-aware")  # fmt: skip
    assert run.setup["prefix_cache"] == {"source": "trace", "cached_share": pytest.approx(9 * 1023 / (10 * 1024))}
    assert run.setup["routing"] == "cache-aware"
    plain = simulate_disaggregated(model("llama3.1-8b"), pools("1:1"), Request(1024, 8), Load(rate_per_s=10.0),
                                   requests=10)  # fmt: skip
    assert plain.setup["prefix_cache"] == {"source": "rate", "cached_share": 0.0}
    assert plain.setup["routing"] == "random"


def test_a_disaggregated_run_refuses_an_unknown_routing_by_name():
    with pytest.raises(ClusterSimError, match=r"^--routing: 'nearest' is not one of random, cache-aware$") as error:
        _run(routing="nearest")
    assert (error.value.field, error.value.value) == ("--routing", "nearest")


def test_a_speculative_pipeline_runs_every_stage_of_its_verify_steps():
    """Llama 3.1 8B with four drafts on two pipeline stages: each verify step passes both stages (each half the
    layers), so a token takes about what it takes on one stage of all the layers, not half of it."""
    spec, gaps = Speculation(4, 0.7), []
    for pp in (1, 2):
        system = serving_system_for_instance(catalog(), "p5.48xlarge", tp=1, pp=pp)
        run = simulate(
            model("llama3.1-8b"), system, Request(512, 64), Load(concurrency=4), requests=12, speculation=spec
        )
        gaps.append(float(np.mean(run.request_itl_s)))
    assert 0.9 < gaps[1] / gaps[0] < 1.3
