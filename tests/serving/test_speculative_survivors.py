"""Speculative decoding's prices, pinned where mutation testing found them loose (``benchmarks/mutation.py``
group ``speculative``): the simulator's verify and draft steps as sums of their tables' cells, the closed form's
steps as the step model's on the named engine and calibration, the head's engine, the rate and replicas of the
closed forms, and the refusals' fields."""

import functools

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import default_calibration, serving_system_for_instance, step_times
from clustersim.serving.engines import engine_profile
from clustersim.serving.estimate import Batching, Request, batch_limit, deployment_profile, estimate_offline
from clustersim.serving.memory import causal_pairs
from clustersim.serving.sim_steps import step_table
from clustersim.serving.simulate import Load
from clustersim.serving.speculative import (
    Speculation,
    SpeculativeSteps,
    check_speculation,
    head_profile,
    speculative_closed_form,
    speculative_offline,
    speculative_step_s,
    speculative_tpot,
)
from clustersim.workload.zoo import load_model
from tests.serving.test_serving_queues_survivors import _twice_as_slow

SPEC = Speculation(4, 0.7)


@functools.cache
def llama70b():
    return load_model("llama3.1-70b", use_env=False)


@functools.cache
def p5(dp: int = 1):
    return serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=8 // dp, dp=dp)


@functools.cache
def tables(draft: str | None = None):
    """The target's and the drafter's step tables on one tp-8 replica (SGLang: overheads of its own)."""
    model, system = llama70b(), p5()
    spec = Speculation(4, 0.7, None if draft is None else load_model(draft, use_env=False))
    engine = engine_profile("sglang", system.family).model_copy(update={"eager_launch_s": None})
    cal, request = default_calibration(), Request(512, 256)
    build = functools.partial(
        step_table, system=system, precision=request.precision, kv_precision=request.kv, max_tokens=8192,
        max_sequences=64, max_context=4096, cal=cal,
    )  # fmt: skip
    target = build(model, engine=engine)
    drafter = build(spec.drafter(model), engine=engine if spec.draft is not None else head_profile(engine))
    return target, drafter, spec


# ---- the simulator's steps ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("draft", [None, "llama3.1-8b"])
def test_a_verify_step_carries_k_plus_one_tokens_of_each_decoder_and_the_prompts(draft):
    target, drafter, spec = tables(draft)
    steps = SpeculativeSteps(target, drafter, spec)
    decoding, context, prefill, prompts, pairs = 8, 900.0, 300.0, 2, 40_000.0
    tokens = decoding * 5 + prefill
    verify = target.rest_s(tokens, decoding + prompts) + target.attention_s(decoding, context, tokens)
    verify += target.pair_s * pairs
    ratio = causal_pairs(drafter.model, 1024.0) / causal_pairs(target.model, 1024.0)
    first = drafter.step_s(decoding, context, prefill, prompts, pairs * ratio)
    more = drafter.step_s(decoding, context, 0.0, 0, 0.0)
    assert steps.step_s(decoding, context, prefill, prompts, pairs) == pytest.approx(verify + first + 3 * more, 1e-12)
    assert (draft is None) == (ratio < 0.05)  # a one-layer head: 1/80 of the target's pairs


def test_a_step_without_decoders_drafts_only_the_prompts():
    target, drafter, spec = tables()
    steps = SpeculativeSteps(target, drafter, spec)
    ratio = causal_pairs(drafter.model, 1024.0) / causal_pairs(target.model, 1024.0)
    verify = target.rest_s(300.0, 2) + target.attention_s(0, 900.0, 300.0) + target.pair_s * 40_000.0
    draft = drafter.step_s(0, 900.0, 300.0, 2, 40_000.0 * ratio)
    assert steps.step_s(0, 900.0, 300.0, 2, 40_000.0) == pytest.approx(verify + draft, rel=1e-12)


def test_decode_steps_are_the_step_price_along_the_context_axis_for_each_batch():
    target, drafter, spec = tables()
    steps = SpeculativeSteps(target, drafter, spec)
    contexts = np.array([100.0, 700.0, 2500.0])
    for decoding in (8, 32, 8):  # the second 8 reads the line the first one kept
        line = [steps.step_s(decoding, c, 0.0, 0, 0.0) for c in target.context_axis]
        assert np.allclose(steps.decode_steps_s(decoding, contexts), np.interp(contexts, target.context_axis, line))
    assert set(steps.lines) == {8, 32}
    assert steps.decode_steps_s(32, contexts)[0] > steps.decode_steps_s(8, contexts)[0]


# ---- the closed form's steps ----------------------------------------------------------------------------------------


def test_the_head_runs_inside_the_targets_launch_without_overheads_of_its_own():
    engine = engine_profile("tensorrt-llm", "blackwell")
    assert engine.step_overhead_s is None or engine.host_sequence_overhead_s  # the GB200 host's cost is stated
    head = head_profile(engine.model_copy(update={"step_overhead_s": 1e-3, "sequence_overhead_s": 1e-5}))
    assert head.step_overhead_s == 0.0 and head.sequence_overhead_s == 0.0 and head.host_sequence_overhead_s == {}
    assert head.name == engine.name and head.kv_block_tokens == engine.kv_block_tokens


@pytest.mark.parametrize("draft", [None, "llama3.1-8b"])
def test_a_speculative_step_is_the_step_models_verify_and_drafts_on_its_engine_and_calibration(draft):
    """On SGLang (its own overheads) and a calibration twice as slow, with a spread of prompt lengths: the verify
    step is the step model's with the ``b K`` drafts as prompt tokens; the drafts one prompt step of the drafter
    (a head: on the engine without its overheads) at its share of the pairs, and ``K - 1`` decode steps."""
    model, system = llama70b(), p5()
    spec = Speculation(3, 0.8, None if draft is None else load_model(draft, use_env=False))
    engine = engine_profile("sglang", system.family).model_copy(update={"eager_launch_s": None})  # no floor
    cal, request = _twice_as_slow(default_calibration()), Request(512, 256)
    pairs = 3.0 * causal_pairs(model, 512)
    common = {"cal": cal, "prompt_tokens": 512, "decode_sequences": 16, "decode_context_tokens": 700}
    verify, drafts = speculative_step_s(
        model, system, request.precision, request.kv, spec, prefill_tokens=512, prefill_sequences=1, engine=engine,
        prompt_pairs=pairs, **common,
    )  # fmt: skip
    expected = step_times(
        model, system, request.precision, request.kv, prefill_tokens=512 + 16 * 3, prefill_sequences=1,
        engine=engine, prompt_pairs=pairs, **common,
    ).step_s  # fmt: skip
    assert verify == pytest.approx(float(expected), rel=1e-12)
    drafter = spec.drafter(model)
    profile = engine if draft is not None else head_profile(engine)
    share = pairs * causal_pairs(drafter, 512) / causal_pairs(model, 512)
    first = step_times(
        drafter, system, request.precision, request.kv, prefill_tokens=512, prefill_sequences=1, engine=profile,
        prompt_pairs=share, **common,
    ).step_s  # fmt: skip
    more = step_times(
        drafter, system, request.precision, request.kv, prefill_tokens=0, prefill_sequences=0, engine=profile, **common
    ).step_s  # fmt: skip
    assert drafts == pytest.approx(float(first + 2 * more), rel=1e-12)
    fast = speculative_step_s(
        model, system, request.precision, request.kv, spec, prefill_tokens=512, prefill_sequences=1, engine=engine,
        prompt_pairs=pairs, **(common | {"cal": default_calibration()}),
    )  # fmt: skip
    assert drafts > fast[1] and verify > fast[0]
    at_mean = speculative_step_s(
        model, system, request.precision, request.kv, spec, prefill_tokens=512, prefill_sequences=1, engine=engine,
        **common,
    )  # fmt: skip
    assert verify > at_mean[0] and drafts > at_mean[1]  # three times the mean's pairs: a longer prompt attention


def test_the_steady_state_carries_the_prompts_of_the_finished_sequences_at_the_mean_context():
    model, system = llama70b(), p5()
    request, engine, cal = Request(512, 256), engine_profile(None, system.family), default_calibration()
    args = (model, system, request.precision, request.kv, SPEC)
    found = speculative_tpot(*args, batch=16, input_tokens=512, output_tokens=256, cal=cal, engine=engine)
    e = SPEC.tokens_per_step
    share = 16 * e / 256
    verify, draft = speculative_step_s(
        *args, decode_sequences=16, decode_context_tokens=512 + 128, prefill_tokens=share * 512,
        prefill_sequences=share, prompt_tokens=512, cal=cal, engine=engine,
    )  # fmt: skip
    assert found["step_s"] == pytest.approx(verify + draft, rel=1e-12) and found["tpot_s"] == found["step_s"] / e
    longer = speculative_tpot(
        *args, batch=16, input_tokens=512, output_tokens=256, cal=cal, engine=engine, context_tokens=4000
    )
    assert longer["step_s"] > found["step_s"]  # a stated decode context replaces the default's
    one_token = speculative_tpot(*args, batch=16, input_tokens=512, output_tokens=1, cal=cal, engine=engine)
    whole = speculative_step_s(
        *args, decode_sequences=16, decode_context_tokens=512.5, prefill_tokens=16 * e * 512, prefill_sequences=16 * e,
        prompt_tokens=512, cal=cal, engine=engine,
    )  # fmt: skip
    assert one_token["step_s"] == pytest.approx(sum(whole), rel=1e-12)  # a 1-token output: every sequence replaced
    slower = _twice_as_slow(cal)  # the tp-8 all-reduces are the network's: the step takes 1.65-1.8x as long
    slow = speculative_tpot(*args, batch=16, input_tokens=512, output_tokens=256, cal=slower, engine=engine)
    priced = speculative_step_s(
        *args, decode_sequences=16, decode_context_tokens=512 + 128, prefill_tokens=share * 512,
        prefill_sequences=share, prompt_tokens=512, cal=slower, engine=engine,
    )  # fmt: skip
    assert slow["step_s"] == pytest.approx(sum(priced), rel=1e-12) and slow["step_s"] > 1.5 * found["step_s"]


def test_the_system_rate_counts_every_replica():
    model, request, cal = llama70b(), Request(512, 256), default_calibration()
    one, two = p5(1), p5(2)

    def rate(system):
        engine = engine_profile(None, system.family)
        return speculative_tpot(
            model, system, request.precision, request.kv, SPEC, batch=8, input_tokens=512, output_tokens=256,
            cal=cal, engine=engine,
        )  # fmt: skip

    assert two.dp == 2 and rate(two)["output_tokens_per_s"] == pytest.approx(
        2 * 8 * SPEC.tokens_per_step / rate(two)["step_s"], rel=1e-12
    )
    assert rate(one)["output_tokens_per_s"] == pytest.approx(8 * SPEC.tokens_per_step / rate(one)["step_s"])


# ---- the closed forms beside a simulation ------------------------------------------------------------------------


def _tpot_at(model, system, request, batch, engine):
    profile = deployment_profile(engine, model, system, request)
    return speculative_tpot(
        model, system, request.precision, request.kv, SPEC, batch=batch, input_tokens=request.input_tokens,
        output_tokens=request.output_tokens, cal=default_calibration(), engine=profile,
        context_tokens=request.decode_context_tokens, prompt_pairs=request.prompt_pairs(model),
    )  # fmt: skip


def test_clients_split_over_the_replicas_on_the_named_engine():
    model, system = llama70b(), p5(2)
    request = Request(2000, 256, input_tokens_quantiles=(500.0, 1500.0, 4000.0))
    found = speculative_closed_form(model, system, request, SPEC, Load(concurrency=32), "sglang")
    assert found is not None and found["batch"] == 16 and found["scenario"] == "concurrency, speculative"
    expected = _tpot_at(model, system, request, 16.0, "sglang")
    assert found["tpot_s"] == pytest.approx(expected["tpot_s"], rel=1e-12)
    assert found["tokens_per_step"] == SPEC.tokens_per_step
    profile = deployment_profile("sglang", model, system, request)
    ttft = speculative_step_s(
        model, system, request.precision, request.kv, SPEC, decode_sequences=16.0,
        decode_context_tokens=request.decode_context_tokens, prefill_tokens=2000, prefill_sequences=1.0,
        prompt_tokens=2000, cal=default_calibration(), engine=profile, prompt_pairs=request.prompt_pairs(model),
    )  # fmt: skip
    assert found["ttft_s"] == pytest.approx(sum(ttft), rel=1e-12)
    other = speculative_closed_form(model, system, request, SPEC, Load(concurrency=32), "tensorrt-llm")
    assert other is not None and other["tpot_s"] != pytest.approx(found["tpot_s"], rel=1e-3)


def test_a_rate_holds_the_batch_littles_law_gives_per_replica():
    model, system, request = llama70b(), p5(2), Request(512, 256)
    found = speculative_closed_form(model, system, request, SPEC, Load(rate_per_s=6.0), None)
    assert found is not None and found["scenario"] == "server, speculative"
    batch = found["batch"]
    assert batch == pytest.approx(3.0 * 256 * _tpot_at(model, system, request, batch, None)["tpot_s"], rel=1e-6)
    assert 1.0 < batch < 64


def test_a_low_rate_holds_less_than_one_sequence():
    model, system, request = llama70b(), p5(2), Request(512, 256)
    found = speculative_closed_form(model, system, request, SPEC, Load(rate_per_s=0.02), None)
    assert found is not None and found["batch"] < 0.1
    assert found["batch"] == pytest.approx(
        0.01 * 256 * _tpot_at(model, system, request, found["batch"], None)["tpot_s"], rel=1e-6
    )


def test_a_rate_past_the_sequence_cap_is_said_to_saturate():
    model, system, request = llama70b(), p5(2), Request(512, 256)
    cap = deployment_profile(None, model, system, request).sequence_cap(system.system.accelerator.id)
    found = speculative_closed_form(model, system, request, SPEC, Load(rate_per_s=5000.0), None)
    assert found == {
        "scenario": "server",
        "error": f"5000 requests/s saturates the replicas (over {cap} sequences in flight)",
    }


# ---- the offline closed form and the refusals ------------------------------------------------------------------------


def test_offline_at_a_stated_batch_compares_with_the_plain_estimate_at_that_batch_on_the_engine():
    model, system = llama70b(), p5()
    request = Request(512, 256, input_tokens_quantiles=(100.0, 336.0, 1100.0))
    found = speculative_offline(model, system, request, SPEC, batch=4, engine="sglang")
    profile = deployment_profile("sglang", model, system, request)
    plain = estimate_offline(model, system, request, batch=4, cal=default_calibration(), engine=profile)
    assert found["batch"] == 4 and found["without_speculation"] == {
        "tpot_s": plain.tpot_s,
        "output_tokens_per_s": plain.output_tokens_per_s,
    }
    assert found["tpot_s"] == pytest.approx(_tpot_at(model, system, request, 4.0, "sglang")["tpot_s"], rel=1e-12)
    most, _, _ = batch_limit(model, system, request, default_calibration(), profile)
    assert found["max_batch"] == most
    assert (
        most
        != batch_limit(model, system, request, default_calibration(), deployment_profile(None, model, system, request))[
            0
        ]
    )


def test_offline_takes_a_batch_of_one_up_to_the_most_a_replica_holds_and_refuses_beyond():
    model, system, request = llama70b(), p5(), Request(512, 256)
    most = speculative_offline(model, system, request, SPEC, batch=1)["max_batch"]
    assert speculative_offline(model, system, request, SPEC, batch=most)["batch"] == most
    assert speculative_offline(model, system, request, SPEC, batch=1)["batch"] == 1
    for bad in (0, most + 1):
        with pytest.raises(ClusterSimError) as caught:
            speculative_offline(model, system, request, SPEC, batch=bad)
        assert caught.value.field == "--batch"
        assert str(caught.value) == f"--batch: {bad} is outside 1..{most}, the sequences a replica holds"


@pytest.mark.parametrize(
    ("pp", "batching", "field", "why"),
    [
        (2, Batching.CONTINUOUS, "--pp", "one pipeline stage"),
        (1, Batching.STATIC, "--batching", "continuous batching"),
        (2, Batching.STATIC, "--pp", "one pipeline stage"),
    ],
)
def test_offline_refuses_a_pipeline_or_static_batches_by_name(pp, batching, field, why):
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=4, pp=pp)
    request = Request(512, 256, batching=batching)
    with pytest.raises(ClusterSimError) as caught:
        speculative_offline(llama70b(), system, request, SPEC)
    assert caught.value.field == field
    assert str(caught.value) == (
        f"{field}: the speculative closed form prices {why}; simulate it instead (--simulate with a load)"
    )


def test_the_drafting_head_is_one_attention_layer_of_the_target():
    deepseek = load_model("deepseek-v3", use_env=False)
    head = Speculation(2, 0.8).drafter(deepseek)
    assert (head.name, head.layers, head.dense_layers) == ("deepseek-v3 draft head", 1, 1)
    assert head.window_layers is None and head.linear_attention is None and head.mlp_free_layers == 0
    hybrid = load_model("nemotron-h-8b", use_env=False)
    assert hybrid.mlp_free_layers and Speculation(2, 0.8).drafter(hybrid).mlp_free_layers == 0
    windowed = load_model("gpt-oss-120b", use_env=False)
    assert windowed.window_layers and Speculation(2, 0.8).drafter(windowed).window_layers is None


@pytest.mark.parametrize(("k", "a", "field", "value"), [(0, 0.5, "--speculative", 0), (4, -0.1, "--acceptance", -0.1)])
def test_a_bad_speculation_names_its_field_and_value(k, a, field, value):
    with pytest.raises(ClusterSimError) as caught:
        Speculation(k, a)
    assert (caught.value.field, caught.value.value) == (field, value)
    expected = (
        "--speculative: draft tokens per step must be 1..16, got 0"
        if field == "--speculative"
        else "--acceptance: a draft token's acceptance rate is in [0, 1], got -0.1"
    )
    assert str(caught.value) == expected


def test_the_ranges_hold_their_ends():
    assert Speculation(1, 0.0).tokens_per_step == 1.0
    assert Speculation(16, 1.0).tokens_per_step == 17.0


def test_one_of_the_pair_alone_and_a_nan_acceptance_are_refused_by_field():
    for given, missing in (((4, None), "--acceptance"), ((None, 0.5), "--speculative")):
        with pytest.raises(ClusterSimError) as caught:
            check_speculation(*given)
        assert caught.value.field == missing
        other = "--speculative" if missing == "--acceptance" else "--acceptance"
        assert str(caught.value) == (
            f"{missing}: {other} needs it (speculative decoding takes the draft tokens a step, --speculative K, "
            "and each one's acceptance rate, --acceptance A)"
        )
    with pytest.raises(ClusterSimError) as caught:
        check_speculation(4, float("nan"))
    assert caught.value.field == "--acceptance" and str(caught.value) == "--acceptance: not a number"
