"""A serving case's finite run (``workload.requests``), its stated rate, its engine's caps and its KV default."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.memo import IdentityMemo
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.datasets import request_dataset
from clustersim.serving.sim_requests import length_source, request_sampler
from clustersim.validation import finite_runs, inference
from clustersim.validation.cases import as_case
from clustersim.validation.inference import case_deployment, case_estimate, predict_inference_case

CATALOG = load_catalog(use_env=False)


def _case(workload: dict, *, framework: str = "vllm", version: str = "0.11.0", precision: str = "bf16") -> dict:
    """Llama 3.1 8B on one H100, as the load generators' published runs state it."""
    return {
        "id": "x",
        "kind": "inference",
        "source": "test",
        "model": {
            "name": "llama3.1-8b",
            "layers": 32,
            "hidden": 4096,
            "ffn_hidden": 14336,
            "heads": 32,
            "kv_heads": 8,
            "vocab": 128256,
            "ffn_type": "swiglu",
        },
        "system": {"accelerator": "h100-sxm", "devices": 1, "devices_per_node": 8},
        "parallel": {"tp": 1, "dp": 1},
        "precision": precision,
        "workload": {"input_tokens": 1000, "output_tokens": 200, "dataset": "random"} | workload,
        "measured": {"output_tokens_per_s": 1.0},
        "software": {"framework": framework, "version": version},
    }


def _rate(workload: dict, **kwargs: str) -> float:
    return predict_inference_case(_case(workload, **kwargs), "output_tokens_per_s", CATALOG)


def test_a_burst_is_slower_than_the_steady_state_and_approaches_it_as_it_grows():
    steady = _rate({"scenario": "offline"})
    bursts = [_rate({"scenario": "offline", "requests": n}) for n in (64, 512, 4096)]
    assert bursts[0] < bursts[1] < bursts[2] < steady  # the ramp and the drain weigh less in a longer run
    assert bursts[0] < 0.85 * steady and bursts[2] > 0.9 * steady  # measured: 0.82, 0.92, 0.94


def test_a_bursts_mean_ttft_is_its_queue():
    ttft = [
        predict_inference_case(_case({"scenario": "offline", "requests": n}), "ttft_s", CATALOG) for n in (100, 1000)
    ]
    steady = case_estimate(_case({"scenario": "offline"}), CATALOG).ttft_s
    assert ttft[1] > 5 * ttft[0] > 5 * steady  # ten times the requests wait about ten times as long


def test_clients_that_start_together_stay_in_step_below_the_staggered_closed_form():
    """A load generator's clients start at once: at fixed lengths their prompts keep arriving together, so steps
    alternate between prompts and decodes instead of mixing them evenly (measured: 15% below the closed form, whose
    steady state a staggered start reaches, tests/serving/test_simulate.py)."""
    d = case_deployment(_case({"scenario": "concurrency", "batch": 8, "dataset": "fixed"}), CATALOG)
    closed = estimate_concurrency(d.model, d.serving, d.request, 8, engine=d.engine).output_tokens_per_s
    simulated = _rate({"scenario": "concurrency", "batch": 8, "dataset": "fixed", "requests": 2000})
    assert 0.75 * closed < simulated < closed


def test_a_server_run_at_a_stated_rate_is_priced_at_that_rate_not_at_the_highest_meeting_targets():
    at_rate = case_estimate(_case({"scenario": "server", "request_rate_per_s": 2.0}), CATALOG)
    searched = case_estimate(_case({"scenario": "server"}), CATALOG)
    assert at_rate.request_rate_per_s == pytest.approx(2.0)
    assert at_rate.output_tokens_per_s == pytest.approx(2.0 * 200, rel=1e-6)
    assert at_rate.output_tokens_per_s < searched.output_tokens_per_s
    finite = _rate({"scenario": "server", "request_rate_per_s": 2.0, "requests": 400})
    assert finite == pytest.approx(2.0 * 200, rel=0.15)  # a Poisson stream's 400 requests, the last one's tail


def test_requests_are_refused_where_no_finite_run_is_priced():
    with pytest.raises(ClusterSimError, match=r"workload\.requests 50: a finite run is an offline") as caught:
        _rate({"scenario": "server", "requests": 50})
    assert caught.value.field == "workload.requests"
    neuron = _case({"scenario": "offline", "requests": 50, "batch": 4}, framework="transformers-neuronx")
    neuron["system"] = {"accelerator": "trainium1", "devices": 32, "devices_per_node": 32}
    neuron["parallel"] = {"tp": 32, "dp": 1}
    with pytest.raises(ClusterSimError, match=r"^case x: workload\.requests 50: engine 'transformers-neuronx'"):
        predict_inference_case(neuron, "output_tokens_per_s", CATALOG)


def test_the_runs_engine_caps_replace_the_profiles_and_an_unknown_one_is_refused():
    settings = {"max_batch_sequences": 8, "max_tokens_per_step": 2048, "kv_memory_fraction": 0.5}
    engine = case_deployment(_case({"scenario": "offline", "engine_settings": settings}), CATALOG).engine
    assert (engine.sequence_cap("h100-sxm"), engine.token_budget("h100-sxm"), engine.kv_memory_fraction) == (
        8, 2048, 0.5,
    )  # fmt: skip
    capped = case_estimate(_case({"scenario": "offline", "engine_settings": settings}), CATALOG)
    assert capped.batch == 8 < case_estimate(_case({"scenario": "offline"}), CATALOG).batch
    with pytest.raises(ClusterSimError, match="engine_settings") as caught:
        as_case(_case({"scenario": "offline", "engine_settings": {"max_num_seqs": 8}}), "inference")
    assert "max_num_seqs" in str(caught.value)


@pytest.mark.parametrize(
    ("framework", "version", "kv"),
    [("vllm", "0.11.0", Dtype.BF16), ("sglang", "0.5.3", Dtype.BF16), ("tensorrt-llm", "TensorRT-LLM 1.0", Dtype.FP8)],
)
def test_an_unstated_kv_cache_is_the_engines_default_beside_fp8_weights(framework, version, kv):
    d = case_deployment(_case({"scenario": "offline"}, framework=framework, version=version, precision="fp8"), CATALOG)
    assert d.request.kv is kv


def test_a_stated_mean_beside_a_request_set_draws_the_sets_shape_at_that_mean():
    openorca = request_dataset("openorca")
    spread = request_sampler("openorca", 222.0, 300.0, stated=(False, True), stated_means=True)
    fixed = request_sampler("openorca", 222.0, 300.0, stated=(False, True))
    _, outputs = spread.draw(np.random.default_rng(0), 20000)
    assert outputs.mean() == pytest.approx(300, rel=0.03) and outputs.std() > 100 and outputs.max() <= 1024
    assert set(fixed.draw(np.random.default_rng(0), 100)[1]) == {300}  # a length the user gives: every request's
    scaled = length_source(openorca, "input", 400.0, 400.0, stated_is_mean=True)
    assert scaled.kind == "quantiles" and np.mean(scaled.draw(np.random.default_rng(1), 20000)) == pytest.approx(
        400, rel=0.03
    )


def test_a_run_whose_lengths_are_drawn_is_the_median_of_its_draws():
    """ShareGPT's lengths vary: each seed's run ends when its longest requests do; the prediction is the median of
    the runs of ``SEEDS``, and a run whose every length is fixed and sent at once is simulated once."""
    case = as_case(_case({"scenario": "offline", "requests": 200, "dataset": "sharegpt"}))
    d = case_deployment(case, CATALOG)
    runs = []
    for seed in finite_runs.SEEDS:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(finite_runs, "SEEDS", (seed,))
            runs.append(finite_runs.finite_run(d.model, d.serving, d.request, d.engine, d.workload, 200))
    both = finite_runs.finite_run(d.model, d.serving, d.request, d.engine, d.workload, 200)
    rates = sorted(run.output_tokens_per_s for run in runs)
    assert rates[0] < rates[-1]  # the draws differ
    assert both.output_tokens_per_s == rates[len(rates) // 2]
    assert both.ttft_s == float(np.median([run.ttft_s for run in runs]))

    fixed = as_case(_case({"scenario": "offline", "requests": 200}))
    f = case_deployment(fixed, CATALOG)
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        original = finite_runs.simulate
        patch.setattr(finite_runs, "simulate", lambda *a, **k: calls.append(k["seed"]) or original(*a, **k))
        finite_runs.finite_run(f.model, f.serving, f.request, f.engine, f.workload, 200)
    assert calls == [finite_runs.SEEDS[0]]


def test_each_field_of_a_case_reads_one_simulated_run():
    case = _case({"scenario": "offline", "requests": 300, "dataset": "sharegpt"}) | {"id": "remembered"}
    calls = []
    with pytest.MonkeyPatch.context() as patch:
        original = finite_runs.finite_run
        patch.setattr(finite_runs, "_RUNS", IdentityMemo(keep=256))
        patch.setattr(inference, "finite_run", lambda *a: calls.append(1) or original(*a))
        rate = predict_inference_case(case, "output_tokens_per_s", CATALOG)
        ttft = predict_inference_case(case, "ttft_s", CATALOG)
        assert len(calls) == 1 and rate > 0 and ttft > 0
        predict_inference_case(case, "ttft_s", copy.copy(CATALOG))  # another catalog: run again
        assert len(calls) == 2


def test_a_runs_percentiles_are_its_requests_ordered_and_need_a_simulated_run():
    """A finite run gives each figure's median and 99th percentile over its requests (vllm bench serve's and SGLang's
    bench_serving's); a case the closed forms price (no workload.requests) has means only and is refused a
    percentile, naming the field it would need."""
    burst = _case({"scenario": "offline", "requests": 400, "dataset": "sharegpt"})
    figures = {f: predict_inference_case(burst, f, CATALOG) for f in finite_runs.FIGURES}
    assert 0 < figures["ttft_p50_s"] < figures["ttft_p99_s"]
    assert 0 < figures["tpot_p50_s"] < figures["tpot_p99_s"]
    # a burst's TTFT is its queue: every request waits for the prompts ahead of it, so the last one waits about the
    # run's whole prefill, the median about half of it
    assert figures["ttft_p99_s"] > 1.5 * figures["ttft_p50_s"]
    assert figures["ttft_p50_s"] == pytest.approx(figures["ttft_s"], rel=0.3)
    # one client alone: every request's first token is its own prompt's, so the spread is its lengths' only
    alone = _case({"scenario": "concurrency", "batch": 1, "requests": 50, "dataset": "fixed"})
    p50, p99 = (predict_inference_case(alone, f, CATALOG) for f in ("ttft_p50_s", "ttft_p99_s"))
    assert p99 == pytest.approx(p50, rel=0.05)
    with pytest.raises(ClusterSimError, match=r"ttft_p99_s: a percentile .* states no workload\.requests") as caught:
        predict_inference_case(_case({"scenario": "offline"}), "ttft_p99_s", CATALOG)
    assert caught.value.field == "workload.requests"
    with pytest.raises(ClusterSimError, match=r"cannot predict inference field 'ttft_p90_s' \(output_tokens_per_s"):
        predict_inference_case(burst, "ttft_p90_s", CATALOG)
