"""Multi-step scheduling (vLLM V0's --num-scheduler-steps N): the engine schedules once every N decode steps, so
waiting prompts are admitted only then, gathered, and an arrival at a busy engine waits half of N steps."""

import dataclasses
import functools
import math

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import default_calibration, serving_system_for_instance, step_times
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.latency import estimate_server
from clustersim.serving.sim_requests import in_flight_output_tokens, request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.serving.whole_prompts import step_mix
from clustersim.validation.cases import CaseEngineSettings, CaseWorkload
from clustersim.validation.engine_settings import engine_with_settings
from clustersim.workload.zoo import load_model

REQUEST = Request(1024, 256)
CAL = default_calibration()


@functools.cache
def _setup():
    return load_model("llama3.1-8b", use_env=False), serving_system_for_instance(
        load_catalog(use_env=False), "p5.48xlarge", tp=1
    )


def _engine(name: str, steps: int):
    return engine_profile(name).model_copy(update={"scheduler_steps": steps})


@functools.cache
def _poisson(name: str, steps: int):
    model, system = _setup()
    load = Load(rate_per_s=12.0 * system.dp)
    return simulate(model, system, REQUEST, load, requests=400, engine=_engine(name, steps), seed=3)


@functools.cache
def _burst(steps: int):
    model, system = _setup()
    sampler = request_sampler("sharegpt", 230.0, 200.0)
    request = Request(230, 200)
    load = Load(concurrency=600)
    return simulate(
        model, dataclasses.replace(system, dp=1), request, load, requests=600, sampler=sampler,
        engine=_engine("vllm-v0", steps), seed=1,
    )  # fmt: skip


def test_one_scheduler_step_is_the_profiles_default():
    assert engine_profile("vllm-v0").scheduler_steps == 1 and engine_profile("vllm").scheduler_steps == 1


@pytest.mark.parametrize("name", ["vllm", "vllm-v0"])
def test_an_arrival_at_a_busy_engine_waits_for_the_next_scheduling(name: str):
    """Ten steps between schedulings: a prompt waits 4.5 decode steps more on average than with one, and then the
    step that admits it also runs the prompts that arrived over those steps."""
    every, single = _poisson(name, 10), _poisson(name, 1)
    step = float(np.median(single.step_s))
    extra = float(np.mean(every.ttft_s) - np.mean(single.ttft_s))
    assert 0.8 * 4.5 * step < extra < 3.0 * 4.5 * step
    assert every.output_tokens.sum() == single.output_tokens.sum()


@functools.cache
def _steady(name: str, steps: int) -> tuple[float, float]:
    """One replica in a steady state at 12 requests/s: the simulated mean TTFT and gap between tokens over the
    middle half of 2,000 requests (by arrival)."""
    model, system = _setup()
    one = dataclasses.replace(system, dp=1)
    run = simulate(model, one, REQUEST, Load(rate_per_s=12.0), requests=2000, engine=_engine(name, steps), seed=1)
    middle = np.argsort(run.arrival_s)[500:1500]
    return float(np.mean(run.ttft_s[middle])), float(np.mean(run.request_itl_s[middle]))


@pytest.mark.parametrize("steps", [1, 10])
def test_the_server_closed_form_agrees_with_the_simulator_in_a_steady_state(steps: int):
    """An engine that mixes prompts into decode steps, one replica at 12 requests/s: the closed form's TTFT and TPOT
    within 5% of the simulator's, scheduling every step or every ten (within 1% on 2026-12-03; TTFT 6% and 2% short
    before the counts were chained, ``whole_prompts.chained_counts``)."""
    model, system = _setup()
    closed = estimate_server(model, dataclasses.replace(system, dp=1), REQUEST, 12.0, engine=_engine("vllm", steps))
    ttft, itl = _steady("vllm", steps)
    assert closed.ttft_s == pytest.approx(ttft, rel=0.05)
    assert closed.tpot_s == pytest.approx(itl, rel=0.05)


def test_the_server_closed_form_waits_half_the_steps_between_schedulings():
    """At a vanishing rate nothing is gathered: the wait for the next scheduling is the whole difference, half of
    ten steps against half of one (steps of the mean batch, a fraction of one: 0.8% shorter than the step a decoding
    request sees, itself in it, its TPOT)."""
    model, system = _setup()
    one = estimate_server(model, system, REQUEST, 1e-3, engine=_engine("vllm", 1))
    ten = estimate_server(model, system, REQUEST, 1e-3, engine=_engine("vllm", 10))
    assert ten.tpot_s == pytest.approx(one.tpot_s, rel=1e-9)
    assert ten.ttft_s - one.ttft_s == pytest.approx(4.5 * one.tpot_s, rel=0.01)
    assert ten.ttft_s - one.ttft_s < 4.5 * one.tpot_s


def test_a_burst_gathers_its_prompts_into_fewer_launches_and_runs_faster():
    """An engine that never mixes runs each admission's prompts in a launch of their own: scheduling every ten
    steps gathers the prompts that found room over those steps into one launch, so there are fewer launches, each
    reading the weights once, and the run ends sooner."""
    single, every = _burst(1), _burst(10)
    assert every.steps - len(every.step_s) < 0.5 * (single.steps - len(single.step_s))  # prompt-only launches
    assert every.finish_s.max() < single.finish_s.max()
    assert every.output_tokens.sum() == single.output_tokens.sum()


def test_the_closed_form_launches_the_prompts_one_scheduling_gathered_together():
    """An engine that never mixes, 0.3 prompts a step on average: scheduling every step, a prompt launch (reading
    the weights again) follows 1 - e^-0.3 = 26% of the steps; every ten steps, ten steps' prompts gather on one,
    so a launch follows (1 - e^-3) / 10 = 9.5% of them."""
    model, system = _setup()
    lengths, formats = (REQUEST.input_tokens, REQUEST.output_tokens), (REQUEST.precision, REQUEST.kv)

    def mix(steps: int):
        return step_mix(model, system, lengths, formats, np.asarray([64.0]), 0.3, CAL, _engine("vllm-v0", steps))

    def reads(prompts: float) -> float:  # a step's weight reads: the decode launch, and a prompt launch if any
        one = step_times(
            model, system, *formats, decode_sequences=64.0, decode_context_tokens=1152.0, prefill_tokens=prompts * 1024,
            prefill_sequences=prompts, prompt_tokens=1024.0, engine=_engine("vllm-v0", 1), cal=CAL,
        )  # fmt: skip
        return float(one.gemm_memory_s[()])

    decode, both = reads(0.0), reads(1.0)
    for steps, launched in ((1, 1 - math.exp(-0.3)), (10, (1 - math.exp(-3.0)) / 10)):
        assert float(mix(steps).mean.gemm_memory_s[0]) == pytest.approx(decode + launched * (both - decode), rel=1e-9)
    assert float(mix(10).mean.step_s[0]) < float(mix(1).mean.step_s[0])


def test_a_case_states_its_scheduler_steps_and_a_bad_value_is_refused():
    workload = CaseWorkload(scenario="offline", engine_settings=CaseEngineSettings(scheduler_steps=10))
    assert engine_with_settings(engine_profile("vllm-v0"), workload.engine_settings).scheduler_steps == 10
    with pytest.raises(ValueError, match="scheduler_steps"):
        CaseEngineSettings(scheduler_steps=0)
    with pytest.raises(ValueError, match="scheduler_steps"):
        EngineProfile.model_validate({**engine_profile("vllm").model_dump(), "scheduler_steps": 0})


def test_over_sharegpts_lengths_the_server_closed_form_agrees_with_the_simulator():
    """Drawn lengths, one replica at 20 requests/s: the closed form at the set's means, its decoders at the in-flight
    mean output (E[o^2] / E[o], 404 tokens where a request's mean is 203), within 5% of the simulated TTFT and TPOT
    (2026-12-03: -3.1% and -1.2%; -4.8% and -3.3% with every decoder at half the mean output)."""
    model, system = _setup()
    one = dataclasses.replace(system, dp=1)
    sampler = request_sampler("sharegpt", 229.7, 203.1)
    request = dataclasses.replace(Request(229.7, 203.1), output_tokens_in_flight=in_flight_output_tokens(sampler))
    closed = estimate_server(model, one, request, 20.0, engine="vllm")
    run = simulate(model, one, request, Load(rate_per_s=20.0), requests=4000, sampler=sampler, engine="vllm", seed=0)
    middle = slice(1000, 3000)
    assert closed.ttft_s == pytest.approx(float(np.mean(run.ttft_s[middle])), rel=0.05)
    assert closed.tpot_s == pytest.approx(float(np.mean(run.request_itl_s[middle])), rel=0.05)
    at_half = estimate_server(model, one, Request(229.7, 203.1), 20.0, engine="vllm")
    assert at_half.tpot_s < closed.tpot_s  # the longer contexts in flight read more KV cache


def test_attention_dp_balancing_admits_prompts_every_its_steps_and_only_under_attention_dp():
    """TensorRT-LLM's attention-DP balancing with sparse arrivals: prompts are admitted once every
    ``adp_balance_steps`` steps, the closed form's wait growing as scheduling every that many steps does (the request
    simulator refuses attention DP); without attention DP the setting changes nothing."""
    model = load_model("qwen3-30b-a3b", use_env=False)
    catalog = load_catalog(use_env=False)
    grouped = serving_system_for_instance(catalog, "p5.48xlarge", tp=1, attention_dp=8)
    plain = serving_system_for_instance(catalog, "p5.48xlarge", tp=1)
    base = engine_profile("tensorrt-llm")
    held = base.model_copy(update={"adp_balance_steps": 9})
    assert (held.admission_steps(8), held.admission_steps(1), base.admission_steps(8)) == (9, 1, 1)
    every = base.model_copy(update={"scheduler_steps": 9})
    rate = 1e-3
    one = estimate_server(model, grouped, REQUEST, rate, engine=base)
    balanced = estimate_server(model, grouped, REQUEST, rate, engine=held)
    assert balanced.ttft_s == pytest.approx(estimate_server(model, grouped, REQUEST, rate, engine=every).ttft_s)
    assert balanced.ttft_s - one.ttft_s == pytest.approx(4.0 * one.tpot_s, rel=0.02)
    unaffected = estimate_server(model, plain, REQUEST, rate, engine=held)
    assert unaffected.ttft_s == estimate_server(model, plain, REQUEST, rate, engine=base).ttft_s


def test_a_case_states_its_attention_dp_balancing_and_a_bad_value_is_refused():
    workload = CaseWorkload(scenario="server", engine_settings=CaseEngineSettings(adp_balance_steps=9))
    assert engine_with_settings(engine_profile("tensorrt-llm"), workload.engine_settings).adp_balance_steps == 9
    with pytest.raises(ValueError, match="adp_balance_steps"):
        CaseEngineSettings(adp_balance_steps=-1)
