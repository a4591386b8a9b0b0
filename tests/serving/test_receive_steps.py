"""An engine that takes arrivals in once every N decode steps, or right after a step that ran a prompt (SGLang's
``--scheduler-recv-interval``, ``EngineProfile.receive_steps``): an arrival at a busy engine waits for the next
intake; what it has taken in is admitted at any step, so prompts that keep coming are not held N steps each."""

import dataclasses
import functools

import numpy as np
import pytest
from pydantic import ValidationError

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.latency import estimate_server
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import CaseWorkload
from clustersim.validation.engine_settings import engine_with_settings
from clustersim.workload.zoo import load_model

REQUEST = Request(1024, 256)


@functools.cache
def _setup():
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    return model, dataclasses.replace(system, dp=1)


def _engine(**update):
    """SGLang with --enable-mixed-chunk (prompts share the decoders' step), the intake's mechanics alone."""
    return engine_profile("sglang").model_copy(update={"mixed_steps": True, **update})


@functools.cache
def _run(rate: float, request: Request, **update):
    model, system = _setup()
    return simulate(model, system, request, Load(rate_per_s=rate), requests=400, engine=_engine(**update), seed=3)


def test_one_step_is_the_profiles_default():
    assert engine_profile("sglang").receive_steps == 1 and engine_profile("vllm").receive_steps == 1


def test_an_arrival_at_a_busy_engine_waits_for_the_next_intake():
    """Ten decode steps between intakes at a light load: a prompt waits about 4.5 decode steps more on average."""
    every, single = _run(4.0, REQUEST, receive_steps=10), _run(4.0, REQUEST)
    step = float(np.median(single.step_s))
    extra = float(np.mean(every.ttft_s) - np.mean(single.ttft_s))
    assert 0.6 * 4.5 * step < extra < 1.5 * 4.5 * step
    assert every.output_tokens.sum() == single.output_tokens.sum()


def test_a_step_that_ran_a_prompt_takes_the_next_arrivals_in_at_once():
    """Long prompts arriving faster than the intake's interval: each step that ran a prompt takes the next arrivals
    in, so the prompts are not held thirty decode steps each as a scheduler that admits every thirty steps holds
    them (vLLM V0's multi-step scheduling, ``scheduler_steps``)."""
    long = Request(8192, 256)
    intake, single = _run(2.5, long, receive_steps=30), _run(2.5, long)
    held = _run(2.5, long, scheduler_steps=30)
    assert np.mean(intake.ttft_s) < 1.5 * np.mean(single.ttft_s)
    assert np.mean(held.ttft_s) > 2.0 * np.mean(intake.ttft_s)


def test_the_server_closed_form_waits_half_the_intake_interval():
    """At a vanishing rate the wait for the next intake is the whole difference: half of ten steps against half of
    one, as a scheduler every ten steps."""
    model, system = _setup()
    one = estimate_server(model, system, REQUEST, 1e-3, engine=_engine())
    ten = estimate_server(model, system, REQUEST, 1e-3, engine=_engine(receive_steps=10))
    assert ten.ttft_s - one.ttft_s == pytest.approx(4.5 * one.tpot_s, rel=0.02)
    assert ten.tpot_s == pytest.approx(one.tpot_s, rel=1e-9)


def test_a_case_states_its_intake_interval_and_a_bad_value_is_refused():
    workload = CaseWorkload.model_validate({"engine_settings": {"receive_steps": 30}})
    assert engine_with_settings(engine_profile("sglang"), workload.engine_settings).receive_steps == 30
    for bad in (0, 65):
        with pytest.raises((ValidationError, ClusterSimError), match="receive_steps"):
            CaseWorkload.model_validate({"engine_settings": {"receive_steps": bad}})
