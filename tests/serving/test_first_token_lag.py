"""A serving stack that sends a request's first token with the responses of a later step
(``simulate(first_token_lag_steps=...)``): only the first report moves, by whole steps, never past the finish."""

import functools

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.engines import ENV_VAR, engine_profile, engine_profiles
from clustersim.serving.estimate import Request
from clustersim.serving.first_token import check_lag, first_token_lag_steps
from clustersim.serving.latency import estimate_server
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model


@functools.cache
def setup():
    return load_model("llama3.1-8b", use_env=False), serving_system_for_instance(
        load_catalog(use_env=False), "p5.48xlarge", tp=1
    )


@pytest.mark.parametrize("batching", [Batching.CONTINUOUS, Batching.STATIC])
@pytest.mark.parametrize("lag", [1, 2, 3, 10])
def test_one_request_reports_its_first_token_at_the_end_of_a_later_step(batching, lag):
    """One request alone: its prompt step, then 3 decode steps; with a lag of k the first token leaves at the end
    of the k-th decode step (the finish when k >= 3), and nothing else changes."""
    model, system = setup()
    request = Request(128, 4, batching=batching)
    base = simulate(model, system, request, Load(concurrency=1), requests=1, engine="vllm")
    late = simulate(model, system, request, Load(concurrency=1), requests=1, engine="vllm", first_token_lag_steps=lag)
    assert base.step_s.size == 3
    expected = min(base.first_token_s[0] + base.step_s[: min(lag, 3)].sum(), base.finish_s[0])
    assert late.first_token_s[0] == pytest.approx(expected, rel=1e-12)
    assert late.first_token_s[0] > base.first_token_s[0]
    np.testing.assert_array_equal(late.finish_s, base.finish_s)
    np.testing.assert_array_equal(late.step_s, base.step_s)


def test_a_lag_under_load_moves_only_first_tokens_and_by_at_most_its_steps():
    """A Poisson run of ShareGPT requests near the replica's capacity: arrivals, finishes, steps and preemptions
    are the lag-0 run's; each first token is reported no earlier, no later than its finish, and a one-step lag
    adds at most the longest step (the mean added is between the shortest and the longest step)."""
    model, system = setup()
    sampler = request_sampler("sharegpt", 512, 256)
    load = Load(rate_per_s=30.0)
    base, late = (
        simulate(model, system, Request(512, 256), load, requests=1500, sampler=sampler, seed=3, engine="vllm",
                 first_token_lag_steps=lag)
        for lag in (0, 1)
    )  # fmt: skip
    for name in ("arrival_s", "finish_s", "step_s", "preemptions", "output_tokens"):
        np.testing.assert_array_equal(getattr(late, name), getattr(base, name))
    added = late.first_token_s - base.first_token_s
    assert (added >= 0).all()
    assert (late.first_token_s <= late.finish_s).all()
    longer = base.output_tokens > 1
    assert (added[longer] > 0).all()
    assert added.max() <= base.step_s.max() * (1 + 1e-9)
    assert base.step_s.min() <= added[longer].mean() <= base.step_s.max()
    assert late.ttft_s.mean() > base.ttft_s.mean()


def test_one_token_requests_report_their_first_token_when_they_finish():
    model, system = setup()
    result = simulate(model, system, Request(200, 1), Load(rate_per_s=5.0), requests=50, engine="vllm",
                      first_token_lag_steps=2)  # fmt: skip
    np.testing.assert_array_equal(result.first_token_s, result.finish_s)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_a_lag_that_is_not_a_whole_number_of_steps_is_refused(bad):
    model, system = setup()
    with pytest.raises(ClusterSimError, match=r"first_token_lag_steps: must be a whole number of steps >= 0") as e:
        simulate(model, system, Request(128, 4), Load(concurrency=1), requests=1, engine="vllm",
                 first_token_lag_steps=bad)  # fmt: skip
    assert "\n" not in str(e.value)


def test_an_engine_named_for_its_lag_gets_it_unless_a_run_says_otherwise():
    """``first_token_lag_steps=None`` takes the engine's (MLPerf v4.0's TensorRT-LLM build: one step)."""
    model, system = setup()
    request, load = Request(300, 64), Load(rate_per_s=20.0)
    engine = "tensorrt-llm-mlperf-v4"
    assert first_token_lag_steps(engine_profile(engine)) == 1
    own, one, none = (
        simulate(model, system, request, load, requests=300, engine=engine, first_token_lag_steps=lag)
        for lag in (None, 1, 0)
    )
    np.testing.assert_array_equal(own.first_token_s, one.first_token_s)
    assert (own.first_token_s > none.first_token_s).all()
    plain = simulate(model, system, request, load, requests=300, engine="tensorrt-llm-mlperf-v5")
    assert first_token_lag_steps(engine_profile("tensorrt-llm-mlperf-v5")) == 0
    assert plain.ttft_s.mean() < own.ttft_s.mean()


def test_only_the_v4_harness_reports_first_tokens_late():
    lags = {name: p.first_token_lag_steps for name, p in engine_profiles(use_env=False).items()}
    assert {name for name, lag in lags.items() if lag} == {"tensorrt-llm-mlperf-v4"}
    assert check_lag(lags["tensorrt-llm-mlperf-v4"]) == 1


def without_lag(monkeypatch, tmp_path, engine: str) -> None:
    """A user engine file that gives ``engine`` no first-token lag (the env var the profiles read)."""
    path = tmp_path / "engines.toml"
    path.write_text(f'[{engine}]\nfirst_token_lag_steps = 0\nsource = "test"\n', encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(path))


def test_the_server_closed_form_adds_the_lag_in_steps(monkeypatch, tmp_path):
    """At a rate, the closed form's TTFT with the engine's lag is its TTFT without it plus that many TPOTs;
    TPOT and the batch are unchanged."""
    model, system = setup()
    request, engine = Request(300, 64), "tensorrt-llm-mlperf-v4"
    late = estimate_server(model, system, request, 40.0, engine=engine)
    without_lag(monkeypatch, tmp_path, engine)
    prompt = estimate_server(model, system, request, 40.0, engine=engine)
    assert late.tpot_s == prompt.tpot_s and late.batch == prompt.batch
    # the lag is priced from the server curve's step, interpolated over its grid of batches; TPOT is the step at
    # the batch itself and the prompts that came while a request's own ran (a few parts in 10,000 here)
    assert late.ttft_s == pytest.approx(prompt.ttft_s + prompt.tpot_s, rel=1e-3)
    assert late.ttft_s < prompt.ttft_s + prompt.tpot_s
