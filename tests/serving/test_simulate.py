"""The request-level serving simulator: agreement with the closed forms where both apply, and invariants."""

import functools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.engine import default_calibration, serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.latency import estimate_server
from clustersim.serving.sim_report import Slo
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.sim_scheduler import Arrivals, SchedulerLimits, run_replica
from clustersim.serving.sim_steps import max_error, step_table
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model


@functools.cache
def setup(name: str, tp: int, instance: str = "p5.48xlarge"):
    return load_model(name, use_env=False), serving_system_for_instance(load_catalog(use_env=False), instance, tp=tp)


def steady(result, cycle_s: float) -> tuple[float, float]:
    """Output tokens/s and mean TPOT of the requests finishing away from the run's start and end."""
    lo, hi = 2 * cycle_s, float(result.finish_s.max()) - 2 * cycle_s
    inside = (result.finish_s >= lo) & (result.finish_s < hi)
    assert inside.sum() > 100
    return float(result.output_tokens[inside].sum()) / (hi - lo), float(result.request_itl_s[inside].mean())


# ---- agreement with the closed forms --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "tp", "engine", "n", "o", "per_replica"),
    [("llama3.1-8b", 1, "vllm", 256, 64, 128), ("llama2-70b", 8, None, 512, 256, 32)],
)
def test_a_closed_loop_at_fixed_lengths_matches_the_concurrency_closed_form(name, tp, engine, n, o, per_replica):
    """Clients started over one request's time keep the steady state the closed form assumes (each step
    carries the prompts of output / clients of them): throughput and TPOT within 5% (measured: -0.8% and
    -0.4% for Llama 3.1 8B, -1.6% and +0.6% for Llama 2 70B)."""
    model, system = setup(name, tp)
    request = Request(n, o)
    clients = per_replica * system.dp
    closed = estimate_concurrency(model, system, request, clients, engine=engine)
    cycle = o * closed.tpot_s
    result = simulate(model, system, request, Load(concurrency=clients, ramp_up_s=cycle), requests=clients * 10,
                      engine=engine)  # fmt: skip
    tokens_per_s, tpot = steady(result, cycle)
    assert tokens_per_s == pytest.approx(closed.output_tokens_per_s, rel=0.05)
    assert tpot == pytest.approx(closed.tpot_s, rel=0.05)


@pytest.mark.parametrize(("name", "tp"), [("llama3.1-8b", 1), ("llama2-70b", 8)])
def test_at_a_low_rate_ttft_is_the_prefill_of_one_prompt(name, tp):
    model, system = setup(name, tp)
    n = 2048
    result = simulate(model, system, Request(n, 16), Load(rate_per_s=0.05 * system.dp), requests=100)
    alone = step_times(
        model, system, Request(n, 16).precision, Request(n, 16).kv, decode_sequences=0.0, decode_context_tokens=0.0,
        prefill_tokens=float(n), prefill_sequences=1.0, prompt_tokens=float(n),
    ).step_s  # fmt: skip
    assert float(np.median(result.ttft_s)) == pytest.approx(float(alone), rel=0.01)


def test_steady_decode_itl_is_the_step_model_at_that_batch():
    """32 clients with short prompts and long outputs on one replica: the median token gap is a decode
    step of 32 sequences at the mean context (prompt + half the output)."""
    model, system = setup("llama3.1-8b", 8)
    assert system.dp == 1
    n, o, clients = 64, 1024, 32
    result = simulate(model, system, Request(n, o), Load(concurrency=clients, ramp_up_s=0.3), requests=clients * 4)
    step = step_times(
        model, system, Request(n, o).precision, Request(n, o).kv, decode_sequences=float(clients),
        decode_context_tokens=n + o / 2, prefill_tokens=0.0, prefill_sequences=0.0, prompt_tokens=float(n),
    ).step_s  # fmt: skip
    assert result.pooled_itl()["p50"] == pytest.approx(float(step), rel=0.05)


@pytest.mark.parametrize(("name", "tp", "rate_per_replica"), [("llama2-70b", 8, 2.0), ("llama3.1-8b", 1, 2.0)])
def test_poisson_arrivals_match_the_server_closed_form(name, tp, rate_per_replica):
    """Below saturation, where a prompt's step stays near the memory-bound decode step, the mean TPOT and
    TTFT agree with ``estimate_server`` within 5% (measured +2.3%/+2.0% for 70B, +2.9%/+0.1% for 8B)."""
    model, system = setup(name, tp)
    request = Request(512, 256)
    rate = rate_per_replica * system.dp
    closed = estimate_server(model, system, request, rate)
    result = simulate(model, system, request, Load(rate_per_s=rate), requests=3000)
    summary = result.to_json()
    assert summary["tpot_s"]["mean"] == pytest.approx(closed.tpot_s, rel=0.05)
    assert summary["ttft_s"]["mean"] == pytest.approx(closed.ttft_s, rel=0.05)
    assert summary["throughput"]["output_tokens_per_s"] == pytest.approx(rate * 256, rel=0.05)


@pytest.mark.parametrize(("name", "tp", "engine"), [("llama3.1-8b", 1, "vllm"), ("mixtral-8x7b", 2, None)])
def test_the_step_table_is_the_step_model(name, tp, engine):
    model, system = setup(name, tp)
    profile = engine_profile(engine, system.family)
    cal = default_calibration()
    request = Request(1, 1)
    table = step_table(model, system, request.precision, request.kv, max_tokens=profile.max_tokens_per_step,
                       max_sequences=512, max_context=8192, cal=cal, engine=profile)  # fmt: skip
    worst = max_error(table, model, system, request.precision, request.kv, cal=cal, engine=profile,
                      rng=np.random.default_rng(3), samples=150)  # fmt: skip
    assert worst < 0.01


# ---- invariants -------------------------------------------------------------------------------------------------


def check_invariants(result, outputs_total: int) -> None:
    assert np.all(result.first_token_s > result.arrival_s)
    assert np.all(result.ttft_s <= result.e2e_s)
    assert np.all(np.diff(result.arrival_s) >= 0)
    summary = result.to_json()
    for key in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        values = summary[key]
        assert 0 <= values["p50"] <= values["p90"] <= values["p99"], key
    # every token is a first token, a decode step's token or a preempted request's first after its recompute
    made = result.arrival_s.size + int(result.step_tokens.sum()) + result.resume_gaps_s.size
    assert made == outputs_total == int(result.output_tokens.sum())


def test_a_sharegpt_run_holds_its_invariants_and_stays_under_the_offered_load():
    model, system = setup("llama3.1-8b", 1)
    rate = 40.0
    sampler = request_sampler("sharegpt", 229.7, 203.1)
    result = simulate(model, system, Request(229.7, 203.1), Load(rate_per_s=rate), requests=3000, sampler=sampler,
                      slo=Slo(ttft_s=2.0, itl_s=0.05))  # fmt: skip
    check_invariants(result, int(result.output_tokens.sum()))
    summary = result.to_json()
    assert summary["throughput"]["requests_per_s"] <= rate * 1.05
    assert summary["goodput"]["fraction"] == pytest.approx(1.0)
    assert summary["goodput"]["requests_per_s"] <= summary["throughput"]["requests_per_s"]


def test_preemption_happens_when_the_kv_cache_is_tiny_and_never_when_it_is_huge():
    model, system = setup("llama3.1-8b", 8)
    request = Request(256, 256)
    load = Load(concurrency=32)
    # paged admission (vLLM's, TensorRT-LLM's MAX_UTILIZATION); a reservation never preempts (test_admission)
    tiny = simulate(model, system, request, load, requests=200, kv_capacity_tokens=2048, admission="paged")
    huge = simulate(model, system, request, load, requests=200, kv_capacity_tokens=1e9, admission="paged")
    assert tiny.preemptions.sum() > 0 and tiny.resume_gaps_s.size > 0
    assert huge.preemptions.sum() == 0
    check_invariants(tiny, 200 * 256)
    check_invariants(huge, 200 * 256)
    assert tiny.to_json()["e2e_s"]["mean"] > huge.to_json()["e2e_s"]["mean"]


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    model, system = setup("llama3.1-8b", 1)
    sampler = request_sampler("openorca", 222.33, 294.45)

    def run(seed):
        return simulate(model, system, Request(222.33, 294.45), Load(rate_per_s=20), requests=400, sampler=sampler,
                        seed=seed).to_json()  # fmt: skip

    first, again, other = run(7), run(7), run(8)
    first.pop("sim_wall_s"), again.pop("sim_wall_s"), other.pop("sim_wall_s")
    assert first == again
    assert first != other


def test_a_prefix_cache_hit_shortens_the_first_token():
    model, system = setup("llama2-70b", 8)
    request = Request(4000, 32)
    cold = simulate(model, system, request, Load(rate_per_s=0.2), requests=50)
    warm = simulate(model, system, request, Load(rate_per_s=0.2), requests=50, prefix_hit_rate=0.75)
    assert float(np.median(warm.ttft_s)) < 0.5 * float(np.median(cold.ttft_s))


def test_static_batches_wait_for_their_longest_request():
    model, system = setup("llama3.1-8b", 8)
    request = Request(512, 128, batching=Batching.STATIC)
    sampler = request_sampler("mlperf_mixtral", 427.39, 145.9)
    static = simulate(model, system, request, Load(concurrency=16), requests=160, sampler=sampler)
    continuous = simulate(model, system, Request(512, 128), Load(concurrency=16), requests=160, sampler=sampler)
    check_invariants(static, int(static.output_tokens.sum()))
    assert (
        static.to_json()["throughput"]["output_tokens_per_s"]
        < continuous.to_json()["throughput"]["output_tokens_per_s"]
    )


def test_the_batch_cap_bounds_the_decoding_sequences():
    model, system = setup("llama3.1-8b", 8)
    result = simulate(model, system, Request(128, 64), Load(concurrency=64), requests=256, max_batch=8)
    assert result.step_tokens.max() <= 8


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(0.5, 200.0),
    clients=st.sampled_from([None, 1, 5, 40]),
    n=st.integers(1, 3000),
    o=st.integers(1, 600),
    seed=st.integers(0, 2**31),
    kv=st.sampled_from([None, 8192.0]),
    hit=st.sampled_from([0.0, 0.5]),
    dataset=st.sampled_from([None, "sharegpt", "mlperf_mixtral"]),
    batching=st.sampled_from([Batching.CONTINUOUS, Batching.STATIC]),
)
def test_any_run_serves_every_request_once_and_every_token(rate, clients, n, o, seed, kv, hit, dataset, batching):
    model, system = setup("llama3.1-8b", 8)
    sampler = request_sampler(dataset, n, o, stated=(dataset is None, dataset is None))
    if kv is not None and dataset is not None:
        kv = 1e5
    load = Load(rate_per_s=rate) if clients is None else Load(concurrency=clients)
    result = simulate(model, system, Request(n, o, batching=batching), load, requests=60, sampler=sampler, seed=seed,
                      kv_capacity_tokens=kv, prefix_hit_rate=hit)  # fmt: skip
    check_invariants(result, int(result.output_tokens.sum()))
    if batching is Batching.STATIC:
        assert result.preemptions.sum() == 0


# ---- refusals ---------------------------------------------------------------------------------------------------


def test_what_the_simulator_cannot_run_is_refused_naming_the_option():
    model, system = setup("llama2-70b", 8)
    with pytest.raises(ClusterSimError, match=r"--prefix-hit: .* \[0, 1\), got 1.0"):
        simulate(model, system, Request(128, 128), Load(rate_per_s=1), prefix_hit_rate=1.0)
    with pytest.raises(ClusterSimError, match="kv cache: the longest request"):
        simulate(model, system, Request(4000, 96), Load(rate_per_s=1), requests=5, kv_capacity_tokens=1024)
    with pytest.raises(ClusterSimError, match="load: give exactly one"):
        Load(rate_per_s=1, concurrency=2)
    trn_model, trn = (
        load_model("llama3.1-8b", use_env=False),
        serving_system_for_instance(load_catalog(use_env=False), "trn1.32xlarge", tp=8),
    )
    with pytest.raises(ClusterSimError, match="engine: the simulator models engines"):
        simulate(trn_model, trn, Request(128, 128), Load(rate_per_s=1), requests=5)


@settings(max_examples=30, deadline=None)
@given(
    block=st.sampled_from([1, 16, 64]),
    blocks=st.integers(40, 400),
    budget=st.sampled_from([64, 512, 8192]),
    cap=st.sampled_from([2, 16, 256]),
    clients=st.integers(1, 40),
    seed=st.integers(0, 2**31),
    state=st.integers(0, 3),
)
def test_every_kv_block_comes_back_and_every_request_finishes(block, blocks, budget, cap, clients, seed, state):
    """One replica's scheduler on its own: tight KV caches, budgets and caps, and preemptions among them; a hybrid
    model's requests each hold ``state`` more blocks while they run."""
    model, system = setup("llama3.1-8b", 8)
    profile = engine_profile("vllm", system.family)
    request = Request(1, 1)
    table = step_table(model, system, request.precision, request.kv, max_tokens=budget, max_sequences=cap,
                       max_context=64 * 40, cal=default_calibration(), engine=profile)  # fmt: skip
    rng = np.random.default_rng(seed)
    count = 80
    longest = blocks * block // 2
    inputs = rng.integers(1, max(longest // 2, 2), count).tolist()
    outputs = [int(rng.integers(1, max(longest - n, 1) + 1)) for n in inputs]
    limits = SchedulerLimits(budget, cap, block, blocks, state_blocks=state)
    log = run_replica(table, limits, inputs, outputs, Arrivals(list(range(count)), None, [0.0] * clients))
    assert log.blocks_left == blocks
    assert sorted(log.finish_s) == list(range(count))
    assert all(log.finish_s[r] >= log.first_token_s[r] >= log.arrival_s[r] for r in range(count))
    made = count + sum(log.step_decoding) + len(log.resume_gaps_s)
    assert made == sum(outputs)


def test_a_requests_state_blocks_bound_how_many_run_at_once():
    """30 requests of 64 + 64 tokens in blocks of 16 on 100 blocks: each is admitted with its prompt's 4 blocks and
    ``state`` more, which it holds until it is done (or preempted)."""
    model, system = setup("llama3.1-8b", 8)
    profile = engine_profile("vllm", system.family)
    table = step_table(model, system, Request(1, 1).precision, Request(1, 1).kv, max_tokens=8192, max_sequences=64,
                       max_context=256, cal=default_calibration(), engine=profile)  # fmt: skip
    most = []
    for state in (0, 3, 12):
        limits = SchedulerLimits(8192, 64, 16, 100, state_blocks=state)
        log = run_replica(table, limits, [64] * 30, [64] * 30, Arrivals(list(range(30)), None, [0.0] * 30))
        assert log.blocks_left == 100 and sorted(log.finish_s) == list(range(30))
        most.append(max(log.step_decoding))
        assert most[-1] <= 100 // (4 + state)
    assert most[0] > most[1] > most[2]


def test_a_per_accelerator_token_budget_chunks_prompts_on_that_chip_only():
    """``max_tokens_per_step_on`` (an MLPerf harness's per-system max_num_tokens) reaches the simulator on the
    chip it names: a 1,024-token prompt under a 256-token budget runs as four chunks, one a step, so its
    first token comes later (measured: 40.6 ms against 30.6 ms whole, Llama 3.1 8B on an H100); the same
    budget keyed to another chip changes nothing."""
    model, system = setup("llama3.1-8b", 1)
    chip = system.system.accelerator.id
    base = engine_profile("tensorrt-llm")

    def ttft_s(profile) -> float:
        load = Load(concurrency=system.dp)
        run = simulate(model, system, Request(1024, 8), load, requests=3 * system.dp, engine=profile)
        return float(run.ttft_s.mean())

    whole = ttft_s(base)
    assert ttft_s(base.model_copy(update={"max_tokens_per_step_on": {"b200": 256}})) == whole
    assert ttft_s(base.model_copy(update={"max_tokens_per_step_on": {chip: 256}})) > 1.2 * whole


@pytest.mark.parametrize(("name", "tp"), [("llama3.1-8b", 1), ("llama2-70b", 8)])
def test_a_lone_clients_ttft_is_its_prompt_alone_in_the_closed_form_and_the_simulator(name, tp):
    """One request in flight per replica: when it finishes, the client's next prompt finds the engine idle and
    runs at once, with no other sequence decoding beside it."""
    model, system = setup(name, tp)
    request = Request(2048, 64)
    alone = step_times(
        model, system, request.precision, request.kv, decode_sequences=0.0, decode_context_tokens=0.0,
        prefill_tokens=2048.0, prefill_sequences=1.0, prompt_tokens=2048.0,
    ).step_s  # fmt: skip
    closed = estimate_concurrency(model, system, request, system.dp)
    assert closed.ttft_s == pytest.approx(system.pp * float(alone), rel=1e-9)
    result = simulate(model, system, request, Load(concurrency=system.dp), requests=20 * system.dp)
    assert float(result.ttft_s.mean()) == pytest.approx(closed.ttft_s, rel=0.05)


def test_a_closed_loop_of_equal_requests_moves_in_waves_and_one_of_spread_lengths_does_not():
    # 64 clients over 640 requests of SGLang's defaults (prompts apart from decodes): at one length every client's
    # request ends on the same step and the next 64 arrive together, each wave queueing behind its own prompts; drawn
    # as SGLang's bench_serving draws them (uniform in [1, 2 m]) they end apart, and a prompt mostly waits for one step
    model, system = setup("llama3-8b", 1)
    request = Request(input_tokens=512.0, output_tokens=512.0)
    ttft = {}
    for name in (None, "sglang_random"):
        sampler = request_sampler(name, 512.0, 512.0, stated=(True, True), stated_means=True)
        run = simulate(model, system, request, Load(concurrency=64), requests=640, sampler=sampler, engine="sglang")
        later = run.arrival_s > run.arrival_s.min()  # the requests after the first wave
        ttft[name] = float(np.median(run.ttft_s[later]))
        check_invariants(run, int(run.output_tokens.sum()))
    assert ttft["sglang_random"] < 0.5 * ttft[None]
