"""Latency of a published server run through the request-level simulator, the way MLPerf's server scenario
is run: the submitter raises the Poisson rate as far as the p99 TTFT and p99 TPOT still meet their targets,
and the log reports the mean TTFT and TPOT at that rate (MLPerf Inference v4.0/v5.0 Llama 2 70B server:
TTFT <= 2 s, TPOT <= 200 ms at the 99th percentile,
https://github.com/mlcommons/inference/blob/master/language/llama2-70b/README.md).

``server_latency`` searches that rate on one replica (a Poisson stream sent to ``dp`` replicas at random
is ``dp`` Poisson streams at ``rate / dp``), scores the requests of the steady middle half (by arrival) of a
seeded run, and returns the means there; ``simulated_latency_predictor`` scores a case's ``ttft_s`` /
``tpot_s`` with it where the case is a server case on an engine the simulator runs (the GPU profiles), else
with the closed forms (``predict_inference_case``). It is not the packaged predictor: on the five MLPerf
server cases (seeds 0-2) TPOT MAPE v4.0 24.6% -> 3.1-5.9%, v5.0 42.0% -> 2.7-5.6%, TTFT v4.0 27.1% ->
23.8-30.4%, v5.0 30.3% -> 20.0-21.4% (2026-12-02, with the v4.0 configs' KV fraction 0.90; at 0.95 the
closed forms' v4.0 TPOT and TTFT were 21.9% and 26.0%, the simulated 3.2-5.1% and 23.1-34.5%: the seeds
move the TTFT more than the KV fraction does), and a deployment's search costs about 5 s of CPU
(``validate_cases(paths, catalog, simulated_latency_predictors())`` scores it). The MLPerf cases run on the
MLPerf harness's TensorRT-LLM profiles (``tensorrt-llm-mlperf-v4`` / ``-v5``: max_util, paged KV admission,
each round's per-system token budget and batch cap: v4.0 16,384 tokens, 1,024 sequences on H100 and 896 on
H200; v5.0 B200 3,584 and 2,048); with trtllm-bench's caps instead (32,768 and 4,096) TPOT was v4.0
8.0-9.9%, v5.0 13.6-17.6%, TTFT v4.0 31.5-33.3%, v5.0 15.6-32.2%. Reserving each request's KV at admission
(TensorRT-LLM's own default) moved TTFT v4.0 to 13.6-26.8%, v5.0 to 38.5-45.9% (before the caps).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from clustersim.catalog.registry import Catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import Case, as_case
from clustersim.validation.inference import (
    SERVER_PERCENTILE,
    SERVER_TPOT_TARGET_S,
    SERVER_TTFT_TARGET_S,
    CaseDeployment,
    case_deployment,
    case_estimate,
    predict_inference_case,
)
from clustersim.validation.run import Predictor, default_predictors

SEARCH_REQUESTS = 4000  # per run: ~4 mean request lifetimes of a saturated Llama 2 70B replica
SEARCH_STEPS = 7  # halvings of the rate bracket [cf / 2, 2 cf]: 1/2**7 of it (~2% of the rate)
SEED = 0


@dataclass(frozen=True)
class ServerLatency:
    """Per replica: the highest rate found meeting the targets and the steady means and p99s there."""

    rate_per_replica_s: float
    ttft_mean_s: float
    ttft_p99_s: float
    tpot_mean_s: float
    tpot_p99_s: float


_CACHE: dict[str, ServerLatency] = {}


def _replica_key(case: Case) -> str:
    """What a replica's search depends on: the case less its id, text, measurements and ``dp``."""
    data = case.model_dump(mode="json", exclude={"id", "source", "notes", "measured"})
    if data.get("parallel"):
        data["parallel"]["dp"] = 1
    return json.dumps(data, sort_keys=True)


def steady_means(deployment: CaseDeployment, rate_per_replica_s: float, requests: int) -> ServerLatency:
    """One replica under Poisson arrivals at ``rate_per_replica_s``: TTFT and per-request TPOT (mean and p99)
    of the requests arriving in the middle half of the run (the ramp-up and drain left out)."""
    workload = deployment.workload
    request = replace(deployment.request, batching=Batching.CONTINUOUS)
    stated = (workload.input_tokens is not None, workload.output_tokens is not None)
    sampler = request_sampler(workload.dataset, request.input_tokens, request.output_tokens, stated=stated)
    one = replace(deployment.serving, dp=1)
    run = simulate(
        deployment.model, one, request, Load(rate_per_s=rate_per_replica_s), requests=requests, sampler=sampler,
        seed=SEED, engine=deployment.engine,
    )  # fmt: skip
    middle = slice(requests // 4, 3 * requests // 4)
    ttft, tpot = run.ttft_s[middle], run.request_itl_s[middle]
    q = 100 * SERVER_PERCENTILE
    return ServerLatency(
        rate_per_replica_s, float(ttft.mean()), float(np.percentile(ttft, q)), float(tpot.mean()),
        float(np.percentile(tpot, q)),
    )  # fmt: skip


def server_latency(
    case: Case | Mapping[str, Any],
    catalog: Catalog,
    *,
    requests: int = SEARCH_REQUESTS,
    steps: int = SEARCH_STEPS,
) -> ServerLatency:
    """The steady latency of a server case's replica at the highest simulated rate whose p99 TTFT and p99
    TPOT meet the case's targets (default MLPerf's), searched by halving ``[cf / 2, 2 cf]`` ``steps`` times
    around the closed forms' rate ``cf``; cached per replica deployment and search."""
    case = as_case(case, "inference")
    workload = case.workload
    if workload is None or workload.scenario != "server":
        raise ClusterSimError(f"case {case.id}: the simulated server latency needs a server case", field="scenario")
    key = f"{_replica_key(case)}|{requests}|{steps}"
    if key in _CACHE:
        return _CACHE[key]
    deployment = case_deployment(case, catalog)
    ttft_target = workload.ttft_target_s or SERVER_TTFT_TARGET_S
    tpot_target = workload.tpot_target_s or SERVER_TPOT_TARGET_S
    closed = case_estimate(case, catalog).request_rate_per_s / deployment.serving.dp
    low, high = 0.5 * closed, 2.0 * closed
    best: ServerLatency | None = None
    for _ in range(steps):
        mid = 0.5 * (low + high)
        found = steady_means(deployment, mid, requests)
        if found.ttft_p99_s <= ttft_target and found.tpot_p99_s <= tpot_target:
            low, best = mid, found
        else:
            high = mid
    result = best or steady_means(deployment, low, requests)
    _CACHE[key] = result
    return result


def simulates_latency(case: Case | Mapping[str, Any], catalog: Catalog) -> bool:
    """Whether ``simulated_latency_predictor`` simulates the case: a server case whose engine the simulator
    runs (engines that mix prompt chunks and decode tokens in one step; it refuses the Neuron ones)."""
    case = as_case(case, "inference")
    if case.workload is None or case.workload.scenario != "server":
        return False
    engine = case_deployment(case, catalog).engine
    return engine.mixed_steps and engine.bucket_min_tokens is None  # what ``sim_steps.step_table`` tabulates


def simulated_latency_predictor(case: Case, field: str, catalog: Catalog) -> float:
    """``predict_inference_case``, except a simulated server case's ``ttft_s`` / ``tpot_s``: the steady means
    at the simulated highest rate meeting its targets (``server_latency``)."""
    if field not in ("ttft_s", "tpot_s") or not simulates_latency(case, catalog):
        return predict_inference_case(case, field, catalog)
    found = server_latency(case, catalog)
    return found.ttft_mean_s if field == "ttft_s" else found.tpot_mean_s


def simulated_latency_predictors() -> dict[str, Predictor]:
    """The packaged predictors with ``simulated_latency_predictor`` for inference cases (``validate_cases``'s
    ``predictors``): the same throughput scores, the simulated server latencies."""
    return default_predictors() | {"inference": simulated_latency_predictor}
