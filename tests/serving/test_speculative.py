"""Speculative decoding as an acceptance-rate input: the expected tokens a step (Leviathan et al. 2023), the
price of verifying and drafting, and the simulator against its closed form."""

import functools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.simulate import Load, simulate
from clustersim.serving.speculative import (
    Speculation,
    check_speculation,
    expected_tokens,
    speculative_tpot,
    steps_for_outputs,
)
from clustersim.workload.zoo import load_model

REQUEST = Request(512, 256)


@functools.cache
def setup():
    model = load_model("llama3.1-70b", use_env=False)
    return model, serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=8)


def closed(spec, batch):
    model, system = setup()
    return speculative_tpot(
        model, system, REQUEST.precision, REQUEST.kv, spec, batch=batch, input_tokens=512, output_tokens=256,
        cal=default_calibration(), engine=engine_profile(None, system.family),
    )  # fmt: skip


# ---- the expected tokens ----------------------------------------------------------------------------------------


@given(st.integers(1, 16), st.floats(0.0, 0.999))
def test_expected_tokens_is_the_geometric_sum_of_accepted_prefixes(k, a):
    """Token i of the draft is kept when all before it are: E = sum_{i=0..K} A^i = (1 - A^(K+1)) / (1 - A)."""
    assert expected_tokens(k, a) == pytest.approx(sum(a**i for i in range(k + 1)), rel=1e-9)
    assert 1.0 <= expected_tokens(k, a) <= k + 1
    assert expected_tokens(k + 1, a) >= expected_tokens(k, a)


def test_the_ends_and_a_worked_value():
    assert expected_tokens(4, 0.0) == 1.0 and expected_tokens(4, 1.0) == 5.0
    assert expected_tokens(4, 0.7) == pytest.approx(2.7731, abs=1e-4)  # (1 - 0.7^5) / 0.3
    assert expected_tokens(3, 0.8) == pytest.approx(2.952, abs=1e-9)  # 1 + 0.8 + 0.64 + 0.512


def test_a_request_takes_its_first_token_and_then_e_a_step():
    spec = Speculation(4, 0.7)
    steps = steps_for_outputs(np.array([1, 2, 3, 256]), spec)
    assert steps.tolist() == [1, 2, 2, 1 + int(np.ceil(255 / 2.7731))]


@pytest.mark.parametrize(
    ("k", "a", "field"), [(0, 0.5, "--speculative"), (17, 0.5, "--speculative"), (4, 1.5, "--acceptance")]
)
def test_bad_inputs_are_refused_by_name(k, a, field):
    with pytest.raises(ClusterSimError) as caught:
        Speculation(k, a)
    assert caught.value.field == field


def test_draft_tokens_and_acceptance_come_together():
    check_speculation(None, None)
    check_speculation(4, 0.5)
    with pytest.raises(ClusterSimError, match="--acceptance: --speculative needs it"):
        check_speculation(4, None)
    with pytest.raises(ClusterSimError, match="--speculative: --acceptance needs it"):
        check_speculation(None, 0.5)


# ---- the price ----------------------------------------------------------------------------------------------------


def test_no_acceptance_gives_no_speed_up_but_pays_the_draft_and_the_verify():
    plain = simulate(*setup(), REQUEST, Load(concurrency=8, ramp_up_s=0.5), requests=120).to_json()
    nothing = Speculation(4, 0.0)
    run = simulate(*setup(), REQUEST, Load(concurrency=8, ramp_up_s=0.5), requests=120, speculation=nothing).to_json()
    found = closed(nothing, 8.0)
    assert found["tokens_per_step"] == 1.0 and found["draft_s"] > 0
    assert found["tpot_s"] == pytest.approx(found["verify_s"] + found["draft_s"])
    assert run["tpot_s"]["mean"] > plain["tpot_s"]["mean"] * 1.05
    assert run["throughput"]["output_tokens_per_s"] < plain["throughput"]["output_tokens_per_s"]


def test_a_good_head_speeds_decoding_up_and_a_big_draft_less_so():
    """At 8 sequences a 70B step is memory-bound: verifying 5 tokens costs about one, so K 4 at A 0.7 (2.77
    tokens a step) makes TPOT over 2x shorter with a one-layer head; an 8B draft's four launches eat much of it."""
    head = closed(Speculation(4, 0.7), 8.0)
    big = closed(Speculation(4, 0.7, load_model("llama3.1-8b", use_env=False)), 8.0)
    plain = closed(Speculation(4, 0.0), 8.0)["verify_s"]  # K tokens verified: at least a plain step
    assert head["tpot_s"] < plain / 2 and head["tpot_s"] < big["tpot_s"] < plain
    assert big["draft_s"] > 5 * head["draft_s"]


@pytest.mark.parametrize(("k", "a", "draft"), [(4, 0.0, None), (4, 0.7, None), (2, 0.8, None), (4, 0.7, "llama3.1-8b")])
def test_the_simulator_agrees_with_its_closed_form_in_the_steady_state(k, a, draft):
    """8 clients of 512/256 tokens on one tp-8 replica: the simulated mean TPOT within 5% of the closed form at
    batch 8 (measured: +1.1%, -0.9%, +3.1%, -0.5%)."""
    spec = Speculation(k, a, None if draft is None else load_model(draft, use_env=False))
    run = simulate(*setup(), REQUEST, Load(concurrency=8, ramp_up_s=0.5), requests=200, speculation=spec)
    assert run.to_json()["tpot_s"]["mean"] == pytest.approx(closed(spec, 8.0)["tpot_s"], rel=0.05)
    assert int(run.output_tokens.sum()) == 200 * 256 and np.all(run.finish_s > run.first_token_s)
    assert run.setup["speculation"]["tokens_per_step"] == pytest.approx(expected_tokens(k, a))


def test_a_spread_of_prompt_lengths_costs_the_verify_and_draft_steps_their_mean_attention():
    """The closed form prices a prompt's attention at the request set's mean pairs (``Request.prompt_pairs``), as the
    plain closed forms do, the draft's in the same ratio to its own; at the mean length it is unchanged."""
    model, system = setup()
    spec = Speculation(4, 0.7)
    lengths = (1000.0, 3000.0, 8000.0)  # mean 4,000: n^2 is convex, so the mean pairs are above the mean's
    spread = Request(4000.0, 256.0, input_tokens_quantiles=lengths)

    def priced(pairs):
        return speculative_tpot(
            model, system, spread.precision, spread.kv, spec, batch=64.0, input_tokens=4000.0, output_tokens=256.0,
            cal=default_calibration(), engine=engine_profile(None, system.family), prompt_pairs=pairs,
        )["step_s"]  # fmt: skip

    at_mean = priced(None)
    assert priced(spread.prompt_pairs(model)) > at_mean
    assert priced(Request(4000.0, 256.0).prompt_pairs(model)) == at_mean
