"""An engine whose steps never mix prompts and decodes (vLLM V0 without chunked prefill) in the request simulator."""

import functools

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model

REQUEST = Request(1024, 256)


@functools.cache
def _setup():
    return load_model("llama3.1-8b", use_env=False), serving_system_for_instance(
        load_catalog(use_env=False), "p5.48xlarge", tp=1
    )


@functools.cache
def _run(mixed: bool, rate: float = 12.0):
    model, system = _setup()
    engine = engine_profile("vllm-v0").model_copy(update={"mixed_steps": mixed})
    return simulate(model, system, REQUEST, Load(rate_per_s=rate * system.dp), requests=400, engine=engine, seed=3)


def test_the_v0_profile_never_mixes_and_the_simulator_runs_it():
    assert not engine_profile("vllm-v0").mixed_steps and engine_profile("vllm").mixed_steps
    run = _run(False)
    assert np.isfinite(run.finish_s).all() and (run.finish_s >= run.first_token_s).all()
    assert run.output_tokens.sum() == 400 * REQUEST.output_tokens


def test_prompts_first_shortens_ttft_and_stalls_the_decoders():
    """A prompt runs as soon as it is admitted, alone: its TTFT is about its own prefill; meanwhile every decoder
    waits a whole prompt step, so the gaps between tokens grow past any decode step's."""
    separate, mixed = _run(False), _run(True)
    model, system = _setup()
    alone = float(
        step_times(
            model, system, REQUEST.precision, REQUEST.kv, decode_sequences=0.0, decode_context_tokens=0.0,
            prefill_tokens=1024.0, prefill_sequences=1.0, prompt_tokens=1024.0,
        ).step_s
    )  # fmt: skip
    assert np.median(separate.ttft_s) == pytest.approx(alone, rel=0.25)
    assert np.median(separate.ttft_s) < np.median(mixed.ttft_s)
    assert separate.steps > mixed.steps  # prompt steps come on top of the decode steps
    assert np.percentile(separate.request_itl_s, 90) > np.percentile(mixed.request_itl_s, 90)


def test_the_decode_steps_log_only_decoders():
    run = _run(False)
    assert len(run.step_s) < run.steps  # prompt-only steps are not decode steps
    assert (np.asarray(run.step_s) > 0).all()
