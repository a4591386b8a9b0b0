"""Multi-step scheduling (vLLM V0's --num-scheduler-steps N): the engine schedules once every N decode steps, so
waiting prompts are admitted only then, gathered, and an arrival at a busy engine waits half of N steps."""

import dataclasses
import functools

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.latency import estimate_server
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import CaseEngineSettings, CaseWorkload
from clustersim.validation.inference import engine_with_settings
from clustersim.workload.zoo import load_model

REQUEST = Request(1024, 256)


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


def test_the_server_closed_form_moves_with_the_simulator():
    """An engine that mixes prompts into decode steps: the closed form's TTFT grows with ten steps between
    schedulings by the simulator's factor (2.5x at 12 requests/s on one H100), within 10%."""
    model, system = _setup()
    closed = [estimate_server(model, system, REQUEST, 12.0 * system.dp, engine=_engine("vllm", n)) for n in (1, 10)]
    simulated = [float(np.mean(_poisson("vllm", n).ttft_s)) for n in (1, 10)]
    assert closed[1].ttft_s / closed[0].ttft_s == pytest.approx(simulated[1] / simulated[0], rel=0.1)


def test_the_server_closed_form_waits_half_the_steps_between_schedulings():
    """At a vanishing rate nothing is gathered: the wait is the whole difference, 4.5 steps."""
    model, system = _setup()
    one = estimate_server(model, system, REQUEST, 1e-3, engine=_engine("vllm", 1))
    ten = estimate_server(model, system, REQUEST, 1e-3, engine=_engine("vllm", 10))
    assert ten.tpot_s == one.tpot_s
    assert ten.ttft_s - one.ttft_s == pytest.approx(4.5 * one.tpot_s, rel=1e-3)


def test_a_burst_gathers_its_prompts_into_fewer_launches_and_runs_faster():
    """An engine that never mixes runs each admission's prompts in a launch of their own: scheduling every ten
    steps gathers the prompts that found room over those steps into one launch, so there are fewer launches, each
    reading the weights once, and the run ends sooner."""
    single, every = _burst(1), _burst(10)
    assert every.steps - len(every.step_s) < 0.5 * (single.steps - len(single.step_s))  # prompt-only launches
    assert every.finish_s.max() < single.finish_s.max()
    assert every.output_tokens.sum() == single.output_tokens.sum()


def test_the_closed_form_launches_the_prompts_one_scheduling_gathered_together():
    """A steady state's 0.3 prompts a step: one launch of one prompt on 0.3 of the steps, or with ten steps between
    schedulings one launch of three prompts on 0.1 of them: the prompts' weights are read a third as often, and
    their GEMMs pay a launch's fixed cost a third as often."""
    model, system = _setup()

    def step(steps: int):
        return step_times(
            model, system, REQUEST.precision, REQUEST.kv, decode_sequences=64.0, decode_context_tokens=1100.0,
            prefill_tokens=0.3 * 1024, prefill_sequences=0.3, prompt_tokens=1024.0, engine=_engine("vllm-v0", steps),
        )  # fmt: skip

    one, ten = step(1), step(10)
    decode, prompts = (float(launch.gemm_memory_s) for launch in one.launches)
    assert float(ten.gemm_memory_s) == pytest.approx(decode + prompts / 3, rel=1e-9)
    assert float(ten.launches[0].step_s) == pytest.approx(float(one.launches[0].step_s), rel=1e-12)
    assert float(ten.gemm_compute_s) < float(one.gemm_compute_s)
    assert float(ten.step_s) < float(one.step_s)


def test_a_case_states_its_scheduler_steps_and_a_bad_value_is_refused():
    workload = CaseWorkload(scenario="offline", engine_settings=CaseEngineSettings(scheduler_steps=10))
    assert engine_with_settings(engine_profile("vllm-v0"), workload).scheduler_steps == 10
    with pytest.raises(ValueError, match="scheduler_steps"):
        CaseEngineSettings(scheduler_steps=0)
    with pytest.raises(ValueError, match="scheduler_steps"):
        EngineProfile.model_validate({**engine_profile("vllm").model_dump(), "scheduler_steps": 0})
