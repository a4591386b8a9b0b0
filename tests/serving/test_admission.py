"""KV admission: paged (vLLM, TensorRT-LLM's MAX_UTILIZATION) against a reservation of the prompt and the whole
output cap (TensorRT-LLM's default GUARANTEED_NO_EVICT)."""

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_for_software, engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.sim_scheduler import Arrivals, SchedulerLimits, run_replica
from clustersim.serving.sim_steps import step_table
from clustersim.serving.simulate import Load, output_cap, simulate
from clustersim.workload.zoo import load_model


@functools.cache
def setup(name: str = "llama3.1-8b", tp: int = 8):
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=tp)
    return load_model(name, use_env=False), system


def test_each_engine_admits_as_its_defaults_say():
    assert engine_profile("tensorrt-llm").kv_admission == "reserve"  # GUARANTEED_NO_EVICT, the documented default
    assert engine_profile("vllm").kv_admission == "paged"
    # NVIDIA's MLPerf harness sets max_util (MAX_UTILIZATION): admitted on what a request holds now
    assert engine_for_software("tensorrt-llm", "MLPerf Inference v4.0, NVIDIA submission").kv_admission == "paged"


def test_the_output_cap_is_the_sets_longest_output_else_each_requests_own():
    assert output_cap(Request(222.33, 294.45), request_sampler("openorca", 222.33, 294.45)) == 1024  # max_new_tokens
    assert output_cap(Request(512, 128), None) == 128  # fixed lengths: each asks for its own
    assert output_cap(Request(229.7, 203.1), request_sampler("sharegpt", 229.7, 203.1)) == 0  # unbounded: its own


def test_near_saturation_a_reservation_queues_prompts_and_never_preempts():
    """Llama 3.1 8B on TP8 with 60,000 tokens of KV cache, OpenOrca requests (outputs capped at 1,024): at 60
    requests/s the paged engine's mean TTFT is 8 ms, a reserving one admits fewer requests at a time (each holds
    its prompt and 1,024 output tokens) and its prompts wait (2.6 s, seed 1); at 80/s paged preempts (28 times)
    and the reservation never does."""
    model, system = setup()
    sampler = request_sampler("openorca", 222.33, 294.45)

    def run(rate, admission):
        return simulate(model, system, Request(222.33, 294.45), Load(rate_per_s=rate), requests=1500, sampler=sampler,
                        kv_capacity_tokens=60_000, admission=admission, seed=1)  # fmt: skip

    paged, reserve = run(60, "paged"), run(60, "reserve")
    assert reserve.ttft_s.mean() > 10 * paged.ttft_s.mean()
    assert reserve.preemptions.sum() == 0
    assert run(80, "paged").preemptions.sum() > 0 and run(80, "reserve").preemptions.sum() == 0
    light_paged, light_reserve = run(20, "paged"), run(20, "reserve")  # far from the KV limit: the same run
    assert np.array_equal(light_paged.first_token_s, light_reserve.first_token_s)


@pytest.mark.parametrize("engine", ["tensorrt-llm", "vllm"])
def test_with_room_for_every_reservation_the_closed_form_still_holds(engine):
    """A closed loop of 32 clients at 512/256 tokens on Llama 2 70B TP8 reserving its KV: throughput and TPOT
    within 5% of the concurrency closed form, as paged."""
    model, system = setup("llama2-70b", 8)
    request = Request(512, 256)
    closed = estimate_concurrency(model, system, request, 32, engine=engine)
    cycle = 256 * closed.tpot_s
    result = simulate(model, system, request, Load(concurrency=32, ramp_up_s=cycle), requests=320, engine=engine,
                      admission="reserve")  # fmt: skip
    lo, hi = 2 * cycle, float(result.finish_s.max()) - 2 * cycle
    inside = (result.finish_s >= lo) & (result.finish_s < hi)
    tokens_per_s = float(result.output_tokens[inside].sum()) / (hi - lo)
    assert tokens_per_s == pytest.approx(closed.output_tokens_per_s, rel=0.05)
    assert float(result.request_itl_s[inside].mean()) == pytest.approx(closed.tpot_s, rel=0.05)


def test_a_bad_admission_or_a_reservation_larger_than_the_cache_is_refused():
    model, system = setup()
    with pytest.raises(ClusterSimError, match="--admission: 'evict' is not one of paged, reserve") as caught:
        simulate(model, system, Request(128, 128), Load(rate_per_s=1), requests=5, admission="evict")
    assert caught.value.field == "--admission"
    with pytest.raises(ClusterSimError, match="--admission reserve: a request's prompt and output cap") as caught:
        # 300-token prompts and OpenOrca outputs (capped at 1,024): each fits 1,100 tokens, a reservation does not
        simulate(model, system, Request(300, 294.45), Load(rate_per_s=1), requests=5, sampler=request_sampler(
            "openorca", 300, 294.45, stated=(True, False)), kv_capacity_tokens=1100, admission="reserve")  # fmt: skip
    assert caught.value.field == "--admission"


@settings(max_examples=25, deadline=None)
@given(
    block=st.sampled_from([1, 16, 64]),
    blocks=st.integers(40, 400),
    cap=st.sampled_from([2, 16, 256]),
    clients=st.integers(1, 40),
    seed=st.integers(0, 2**31),
)
def test_reserving_every_block_comes_back_and_nothing_is_preempted(block, blocks, cap, clients, seed):
    """One replica reserving: tight KV caches; every request done, its tokens all made, no preemption, and the
    requests in flight never reserve more blocks than there are (checked at each first token)."""
    model, system = setup()
    profile = engine_profile("tensorrt-llm", system.family)
    table = step_table(model, system, Request(1, 1).precision, Request(1, 1).kv, max_tokens=512, max_sequences=cap,
                       max_context=64 * 400, cal=default_calibration(), engine=profile)  # fmt: skip
    rng = np.random.default_rng(seed)
    count = 60
    longest = blocks * block // 2
    inputs = rng.integers(1, max(longest // 2, 2), count).tolist()
    outputs = [int(rng.integers(1, max(longest - n, 1) + 1)) for n in inputs]
    reserve = [n + max(o, int(rng.integers(o, longest - n + 1))) for n, o in zip(inputs, outputs, strict=True)]
    limits = SchedulerLimits(512, cap, block, blocks, reserve_tokens=tuple(min(r, longest) for r in reserve))
    log = run_replica(table, limits, inputs, outputs, Arrivals(list(range(count)), None, [0.0] * clients))
    assert log.blocks_left == blocks and not log.preemptions and not log.resume_gaps_s
    assert sorted(log.finish_s) == list(range(count))
    assert count + sum(log.step_decoding) == sum(outputs)
    for r in range(count):  # the reservations of the requests in flight when r made its first token fit
        t = log.first_token_s[r]
        flying = [q for q in range(count) if log.first_token_s[q] <= t < log.finish_s[q] or q == r]
        assert sum(-(-limits.reserve_tokens[q] // block) for q in flying) <= blocks


def _serve(*args):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    env = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
    return CliRunner().invoke(app, ["serve", "llama3.1-8b", "--tp", "1", "--requests", "60", *args], env=env)


def test_the_cli_takes_the_engines_admission_or_the_flag_and_refuses_others():
    import json

    runs = {
        (engine, flag): _serve("--rate", "5", "--engine", engine, *(("--admission", flag) if flag else ()), "--json")
        for engine, flag in (("tensorrt-llm", None), ("vllm", None), ("vllm", "reserve"))
    }
    for (engine, flag), result in runs.items():
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["admission"] == flag or ("reserve" if engine == "tensorrt-llm" else "paged")
    bad = _serve("--rate", "5", "--admission", "evict")
    assert bad.exit_code != 0 and "--admission: 'evict' is not one of paged, reserve" in bad.output
    split = _serve("--rate", "5", "--disaggregate", "1:1", "--admission", "reserve")
    assert split.exit_code != 0 and "--admission: the disaggregated pools admit paged" in split.output
    static = _serve("--rate", "5", "--batching", "static", "--admission", "paged")
    assert static.exit_code != 0 and "--admission: a static batch takes the blocks" in static.output
