"""The server closed form's prompts on an engine that runs them in launches of their own (SGLang: ``mixed_steps``
false, eager prompt launches): a launch's fixed costs and its launch floor are the launch's, shared by the prompts it
carries, so the prompts' queue saturates where the prompts' own device time fills the replica, as the request
simulator does, not at one launch per prompt; and the saturation rate an error names is where latency turns
infinite."""

from __future__ import annotations

import math

import numpy as np
import pytest

from clustersim.catalog.kinds import Dtype
from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import serving_system_for_accelerator, step_times
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.latency import _own_prompt_s, estimate_server
from clustersim.serving.simulate import Load, simulate
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
LLAMA = load_model("llama3-8b", use_env=False)
TP8 = serving_system_for_accelerator(CATALOG, "h100-sxm", tp=8, dp=1, devices_per_node=8)
ONE_TOKEN = Request(input_tokens=222.0, output_tokens=1.0, precision=Dtype.BF16, kv_precision=Dtype.BF16)


def _saturation(engine: str | EngineProfile) -> float:
    with pytest.raises(ClusterSimError, match="exceeds the saturation rate of") as refused:
        estimate_server(LLAMA, TP8, ONE_TOKEN, 1e6, engine=engine)
    return float(str(refused.value).split("saturation rate of ")[1].split(" ")[0])


def test_a_prompt_in_a_launch_of_its_own_costs_its_share_of_a_full_launch_beyond_the_launchs_fixed_costs():
    profile = engine_profile("sglang", "hopper")
    assert not profile.mixed_steps and profile.eager_launch_s
    batch = np.array([0.5, 8.0])
    own, _ = _own_prompt_s(LLAMA, TP8, ONE_TOKEN, batch, None, profile.model_copy(update={"eager_launch_s": None}))

    def step(prompts: float) -> np.ndarray:
        return step_times(LLAMA, TP8, Dtype.BF16, Dtype.BF16, decode_sequences=batch, decode_context_tokens=222.0,
                          prefill_tokens=prompts * 222.0, prefill_sequences=prompts, prompt_tokens=222.0,
                          engine=profile.model_copy(update={"eager_launch_s": None})).step_s  # fmt: skip

    full = profile.token_budget("h100-sxm") / 222.0  # the prompts a launch's token budget holds
    assert own == pytest.approx((step(full) - step(1.0)) / (full - 1.0))
    assert np.all(own < step(1.0) - step(0.0))  # the launch's weights and overheads are not the prompt's
    assert np.all(own < step(2.0) - step(1.0))  # nor a small launch's part-empty GEMMs


def test_the_named_saturation_rate_is_where_latency_turns_infinite():
    limit = _saturation("sglang")
    assert math.isfinite(estimate_server(LLAMA, TP8, ONE_TOKEN, 0.99 * limit, engine="sglang").ttft_s)
    with pytest.raises(ClusterSimError, match=f"saturation rate of {limit:.3g} requests/s"):
        estimate_server(LLAMA, TP8, ONE_TOKEN, 1.01 * limit, engine="sglang")


def test_eager_prompt_launches_share_their_floor_as_the_simulator_batches_them():
    profile = engine_profile("sglang", "hopper")
    graphed = profile.model_copy(update={"eager_launch_s": None})

    def step(prompts: float, engine=graphed) -> float:
        return float(step_times(LLAMA, TP8, Dtype.BF16, Dtype.BF16, decode_sequences=1.0, decode_context_tokens=222.0,
                                prefill_tokens=prompts * 222.0, prefill_sequences=prompts, prompt_tokens=222.0,
                                engine=engine).step_s)  # fmt: skip

    limit = _saturation("sglang")
    assert limit > 3.0 / (step(1.0) - step(0.0))  # 592 requests/s; one launch a prompt gave 168
    assert limit > 10.0 / (step(1.0, profile) - step(0.0, profile))  # one launch floor a prompt gave 40
    # at 120 requests/s, which the closed form once refused, it stays within a quarter of the simulator's TTFT
    closed = estimate_server(LLAMA, TP8, ONE_TOKEN, 120.0, engine="sglang").ttft_s
    run = simulate(LLAMA, TP8, ONE_TOKEN, Load(rate_per_s=120.0), engine="sglang", requests=2000, seed=0)
    assert closed == pytest.approx(float(np.mean(run.ttft_s)), rel=0.25)


def test_a_mixed_steps_engines_launch_floor_is_the_steps_not_each_prompts():
    mixed = engine_profile("sglang", "hopper").model_copy(update={"mixed_steps": True})  # --enable-mixed-chunk
    floor_s = LLAMA.layers * 12 * mixed.eager_launch_s  # 12 launches a layer at TP 8
    assert _saturation(mixed) > 5.0 / floor_s  # a whole floor a prompt capped it at 1 / floor (33 requests/s)
