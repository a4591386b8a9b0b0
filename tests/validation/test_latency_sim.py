"""The simulated server latency (``validation.serving_latency``): the search meets the MLPerf targets it is
given, one replica stands for ``dp`` of them, and cases the simulator cannot run keep the closed forms."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engines import ENV_VAR
from clustersim.validation.cases import Case, default_paths, read_all
from clustersim.validation.inference import (
    SERVER_TPOT_TARGET_S,
    SERVER_TTFT_TARGET_S,
    case_deployment,
    case_estimate,
    predict_inference_case,
)
from clustersim.validation.serving_latency import (
    server_latency,
    simulated_latency_predictor,
    simulates_latency,
    steady_means,
)

REQUESTS, STEPS = 800, 3  # a short search: the invariants hold for any length


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog()


@pytest.fixture(scope="module")
def cases() -> dict[str, Case]:
    return {case.id: case for case in read_all(default_paths("inference.jsonl")) if case.kind == "inference"}


def test_search_meets_the_targets_at_p99(catalog: Catalog, cases: dict[str, Case]) -> None:
    case = cases["mlperf40_llama2-70b_8xh200_server"]
    found = server_latency(case, catalog, requests=REQUESTS, steps=STEPS)
    closed_rate = case_estimate(case, catalog).request_rate_per_s / 8
    assert 0.5 * closed_rate <= found.rate_per_replica_s <= 2.0 * closed_rate
    assert found.ttft_p99_s <= SERVER_TTFT_TARGET_S and found.tpot_p99_s <= SERVER_TPOT_TARGET_S
    assert 0 < found.ttft_mean_s <= found.ttft_p99_s and 0 < found.tpot_mean_s <= found.tpot_p99_s


def test_more_load_slows_each_token(catalog: Catalog, cases: dict[str, Case]) -> None:
    deployment = case_deployment(cases["mlperf40_llama2-70b_8xh200_server"], catalog)
    light, heavy = (steady_means(deployment, rate, REQUESTS) for rate in (2.0, 12.0))
    assert heavy.tpot_mean_s > light.tpot_mean_s and heavy.ttft_mean_s > light.ttft_mean_s


def test_one_replica_stands_for_dp(catalog: Catalog, cases: dict[str, Case]) -> None:
    one, eight = cases["mlperf50_llama2-70b_1xb200_server"], cases["mlperf50_llama2-70b_8xb200_server"]
    assert one.parallel is not None and eight.parallel is not None and one.parallel.dp != eight.parallel.dp
    assert server_latency(one, catalog, requests=REQUESTS, steps=STEPS) == server_latency(
        eight, catalog, requests=REQUESTS, steps=STEPS
    )


def test_neuron_and_closed_loop_cases_keep_the_closed_forms(catalog: Catalog, cases: dict[str, Case]) -> None:
    neuron = cases["neuron218_trn1_llama2-70b_tp32_bs4_in1024_out1024"]
    assert not simulates_latency(neuron, catalog)
    for field in ("ttft_s", "tpot_s", "output_tokens_per_s"):
        assert simulated_latency_predictor(neuron, field, catalog) == predict_inference_case(neuron, field, catalog)
    with pytest.raises(ClusterSimError, match="server case"):
        server_latency(neuron, catalog)


def test_attention_dp_server_cases_keep_the_closed_forms(catalog: Catalog, cases: dict[str, Case]) -> None:
    """The simulator schedules one queue a replica: an attention-DP server run's latency is the closed forms', not
    dropped from the scores."""
    grouped = cases["mlperf51_deepseek-r1_8xb200_server"]
    assert not simulates_latency(grouped, catalog)
    for field in ("ttft_s", "tpot_s"):
        assert simulated_latency_predictor(grouped, field, catalog) == predict_inference_case(grouped, field, catalog)


def test_seeds_pool_their_steady_requests(catalog: Catalog, cases: dict[str, Case]) -> None:
    deployment = case_deployment(cases["mlperf40_llama2-70b_8xh200_server"], catalog)
    each = [steady_means(deployment, 10.0, REQUESTS, (seed,)) for seed in (0, 1)]
    pooled = steady_means(deployment, 10.0, REQUESTS, (0, 1))
    assert pooled.ttft_mean_s == pytest.approx(sum(one.ttft_mean_s for one in each) / 2, rel=1e-12)
    assert pooled.tpot_mean_s == pytest.approx(sum(one.tpot_mean_s for one in each) / 2, rel=1e-12)
    assert min(one.ttft_p99_s for one in each) <= pooled.ttft_p99_s <= max(one.ttft_p99_s for one in each)
    assert each[0] != each[1]  # the seeds draw different runs
    with pytest.raises(ClusterSimError, match="seeds: give at least one seed"):
        steady_means(deployment, 10.0, REQUESTS, ())


def test_the_v4_harness_reports_first_tokens_a_step_late(
    catalog: Catalog, cases: dict[str, Case], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The v4.0 cases' engine (tensorrt-llm-mlperf-v4) sends a first token one step after the one computing it
    (``clustersim.serving.first_token``): the simulated TTFT grows by about a TPOT, the TPOT stays."""
    deployment = case_deployment(cases["mlperf40_llama2-70b_8xh200_server"], catalog)
    late = steady_means(deployment, 10.0, REQUESTS)
    engines = tmp_path / "engines.toml"  # the same engine reporting first tokens at once
    engines.write_text('[tensorrt-llm-mlperf-v4]\nfirst_token_lag_steps = 0\nsource = "test"\n', encoding="utf-8")
    monkeypatch.setenv(ENV_VAR, str(engines))
    prompt = steady_means(case_deployment(cases["mlperf40_llama2-70b_8xh200_server"], catalog), 10.0, REQUESTS)
    assert late.tpot_mean_s == pytest.approx(prompt.tpot_mean_s, rel=0.05)
    assert 0.5 * prompt.tpot_mean_s < late.ttft_mean_s - prompt.ttft_mean_s < 2.0 * prompt.tpot_mean_s


def test_searches_on_worker_processes_give_what_one_process_gives(catalog: Catalog, cases: dict[str, Case]) -> None:
    """``search_server_latencies`` runs each distinct replica's search once, on spawned workers, and they answer
    as this process does (seeded runs); cases the simulator does not score are not searched."""
    from clustersim.validation import serving_latency

    chosen = [cases[i] for i in ("mlperf40_llama2-70b_8xh200_server", "mlperf40_llama2-70b_dgx-h100_8xh100_server")]
    offline = cases["mlperf40_llama2-70b_8xh200_offline"]
    search = {"requests": REQUESTS, "steps": 2, "seeds": (0,)}
    serial = [server_latency(case, catalog, **search) for case in chosen]
    serving_latency._CACHE.clear()
    ran = serving_latency.search_server_latencies([*chosen, offline, chosen[0]], catalog, workers=2, **search)
    assert ran == 2  # the offline case is not searched, the repeated one once
    assert [server_latency(case, catalog, **search) for case in chosen] == serial  # read back from the cache
    assert serving_latency.search_server_latencies(chosen, catalog, workers=2, **search) == 0  # all cached
    with pytest.raises(ClusterSimError, match="workers"):
        serving_latency.search_server_latencies(chosen, catalog, workers=0)
