"""What serving.latency computes that its first tests left open (mutation testing, 2026-12-05): a prompt's own time on
an engine that launches prompts apart, the saturation rate a refused rate names, and the fields the highest-rate
search's refusals name."""

import dataclasses
import functools
import math
import re
from typing import Any

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request, request_steps
from clustersim.serving.latency import _own_prompt_s, estimate_server, max_rate
from clustersim.workload.zoo import load_model


@functools.cache
def _replica() -> tuple[Any, Any]:
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    return load_model("qwen3-8b", use_env=False), dataclasses.replace(system, dp=1)


def test_a_prompt_launched_apart_costs_its_share_of_a_full_launch_without_the_eager_floor() -> None:
    """SGLang runs prompts in launches of their own (mixed_steps false) and eagerly (eager_launch_s): a prompt's own
    time is its share of a launch of as many prompts as the token budget holds, beyond a one-prompt launch, its device
    time (the launch floor belongs to the step that admits it)."""
    model, system = _replica()
    request = Request(1024.0, 256.0)
    batch = np.asarray([8.0, 64.0])
    own, attention = _own_prompt_s(model, system, request, batch, None, "sglang")
    sglang = engine_profile("sglang", system.family)
    full = sglang.token_budget(system.system.accelerator.id) / 1024.0  # 8 prompts of 1,024 in 8,192 tokens
    device = sglang.model_copy(update={"eager_launch_s": None})
    steps = request_steps(model, system, request, batch[:, None], np.array([[1.0, full]]),
                          request.decode_context_tokens, default_calibration(), device)  # fmt: skip
    assert np.allclose(own, np.diff(steps.step_s, axis=1)[:, 0] / (full - 1.0), rtol=1e-12)
    assert np.allclose(attention, np.diff(steps.prefill_attention_s, axis=1)[:, 0] / (full - 1.0), rtol=1e-12)
    assert (own > 0).all() and (attention > 0).all() and (attention < own).all()
    # an engine that mixes prompts into its decode steps: one prompt's step beyond none
    mixed, _ = _own_prompt_s(model, system, request, batch, None, "vllm")
    vllm = engine_profile("vllm", system.family)
    one = request_steps(model, system, request, batch[:, None], np.array([[0.0, 1.0]]), request.decode_context_tokens,
                        default_calibration(), vllm)  # fmt: skip
    assert np.allclose(mixed, np.diff(one.step_s, axis=1)[:, 0], rtol=1e-12)


@pytest.mark.parametrize(
    "lengths",
    [
        (1024.0, 256.0),  # the decoders' steps bind
        (16000.0, 16.0),  # prompts longer than the step's token budget, queued behind one another
    ],
)
def test_a_rate_past_saturation_is_refused_naming_the_rate_the_replicas_serve(lengths: tuple[float, float]) -> None:
    model, system = _replica()
    request = Request(*lengths)
    with pytest.raises(ClusterSimError, match="exceeds the saturation rate") as refused:
        estimate_server(model, system, request, 1e4, engine="vllm")
    named = re.search(r"saturation rate of ([0-9.e+]+) requests/s", str(refused.value))
    assert named is not None
    limit = float(named.group(1))  # three significant digits
    assert math.isfinite(estimate_server(model, system, request, 0.99 * limit, engine="vllm").ttft_s)
    with pytest.raises(ClusterSimError, match="exceeds the saturation rate"):
        estimate_server(model, system, request, 1.01 * limit, engine="vllm")


def test_targets_not_met_even_unloaded_are_refused_naming_the_target() -> None:
    model, system = _replica()
    request = Request(1024.0, 256.0)
    with pytest.raises(ClusterSimError, match="even unloaded") as ttft:
        max_rate(model, system, request, ttft_target_s=1e-4, tpot_target_s=1.0, engine="vllm")
    assert (ttft.value.field, ttft.value.value) == ("ttft_target_s", 1e-4)
    with pytest.raises(ClusterSimError, match="even unloaded") as tpot:
        max_rate(model, system, request, ttft_target_s=10.0, tpot_target_s=1e-4, engine="vllm")
    assert (tpot.value.field, tpot.value.value) == ("tpot_target_s", 1e-4)


def test_a_tpot_target_alone_that_never_binds_asks_for_a_ttft_target() -> None:
    model, system = _replica()
    with pytest.raises(ClusterSimError, match="give a TTFT target too") as refused:
        max_rate(model, system, Request(1024.0, 256.0), ttft_target_s=math.inf, tpot_target_s=10.0, engine="vllm")
    assert (refused.value.field, refused.value.value) == ("ttft_target_s", math.inf)
