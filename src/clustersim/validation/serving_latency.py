"""Latency of a published server run through the request-level simulator, the way MLPerf's server scenario
is run: the submitter raises the Poisson rate as far as the p99 TTFT and p99 TPOT still meet their targets,
and the log reports the mean TTFT and TPOT at that rate (MLPerf Inference v4.0/v5.0 Llama 2 70B server:
TTFT <= 2 s, TPOT <= 200 ms at the 99th percentile,
https://github.com/mlcommons/inference/blob/master/language/llama2-70b/README.md).

``server_latency`` searches that rate on one replica (a Poisson stream sent to ``dp`` replicas at random
is ``dp`` Poisson streams at ``rate / dp``), each rate run once per seed of ``SEEDS`` (16,000 requests each),
scores the requests of each run's steady middle half (by arrival) pooled, and returns the means there;
``simulated_latency_predictor`` scores a case's ``ttft_s`` / ``tpot_s`` with it where the case is a server
case on an engine the simulator runs (the GPU profiles), else with the closed forms
(``predict_inference_case``). It is not the packaged predictor: a deployment's search costs about 10 s of CPU
(``validate_cases(paths, catalog, simulated_latency_predictors())`` scores it).

The run's length and the seeds (2026-12-02, on the five MLPerf server cases): with one 4,000-request run the
B200 replica's highest rate was 53-58 requests/s (seeds 0-2) and fell with the run's length to 47-48 (8,000) and
44.6-45.6 (16,000-32,000), where the published runs sit (44.3 and 45.1 per replica; the closed forms' 44.4): a
short run ends before the queue of a rate past the edge has grown. The v4.0 rates were the same at every length
(H200 12.5-12.8). Near the edge the mean TTFT is steep in the rate, so one run's mean moved by a third with its
seed (v4.0 H100 TTFT -38% to +10% over seeds 0-3 at 16,000 requests); before the v4.0 first-token lag (below)
three pooled runs gave TTFT MAPE v4.0 32.8% (seeds 0-2) and 34.9% (3-5), v5.0 18.2% and 16.1%; TPOT v4.0 3.3%
and 5.0%, v5.0 3.0% and 11.6% (closed forms: TTFT 27.1% and 30.3%, TPOT 24.6% and 42.0%; the single 4,000
request runs gave TTFT v4.0 23.8-30.4% and v5.0 20.0-21.4%, by the luck of the seed). The published v5.0 pair is
itself that steep: the 1- and 8-GPU B200 runs, at 44.3 and 45.1 requests/s per replica of the same engine,
measure a mean TTFT of 0.365 and 0.526 s.

What the v4.0 harness sets and what the simulator does with it (the MLPerf harness's TensorRT-LLM profiles,
``tensorrt-llm-mlperf-v4`` / ``-v5``): the batch scheduler policy MAX_UTILIZATION (main_llm.cc's
``trtllm_batch_sched_policy`` default ``max_util``; the Server configs set none): paged admission on the blocks
a request holds, the latest paused when they run out, as simulated; 16,384 tokens a step (builder.py's
``max_num_tokens`` default, not set by the configs), prompts of at most 1,024 tokens (``--max_input_len=1024``)
and no chunked context (no ``--use_paged_context_fmha``, no chunking flag in the harness): a prompt runs whole
in the step that admits it, as simulated; the sequence caps (gpu_batch_size 896 on H200, 1,024 on H100 TP2) and
the KV share (kvcache_free_gpu_mem_frac 0.90), as simulated; the batch manager's loop reads new requests at the
start of each iteration and sends each response (a streamed token) at its end ("The worker thread invokes
GetInferenceRequestsCallback at the start of each loop iteration ... It invokes SendResponseCallback at the end
of each iteration", NVIDIA/TensorRT-LLM docs/source/batch_manager.md @27712aa7; its two micro-batches,
enableTrtOverlap, are off: main_llm.cc ``enable_trt_overlap`` false), as simulated; the configs'
``server_target_qps`` (H200x8 91.5, H100 TP2x4 17.8 x 4; mlcommons/inference_results_v4.0
closed/NVIDIA/configs/llama2-70b/Server/__init__.py @8121a811) is the load the published runs carry, not a
setting of the engine. The simulated v4.0 TTFT was 1.7-1.8 of its own mean TPOT where the logs measure 2.5-2.8
(simulated at the configs' own rates, 11.3 and 17.6 requests/s per replica, the TPOT is 43-66% below the logs',
so the gap is not the rate); the v4.1 logs of the same harness on the same systems measure 1.6-1.8, so the extra
iteration is the v4.0 TensorRT-LLM build's, and its profile reports a first token one step late
(``clustersim.serving.first_token``, the evidence there). MAPE, seeds 0-2 / 3-5 (2026-12-02): v4.0 TTFT 32.8 /
34.9% without the lag, 10.1 / 7.2% with it; TPOT 3.3 / 5.0% and 1.7 / 6.5%; v5.0 (no lag) unchanged. The closed
forms carry the same lag (``clustersim.serving.latency``): v4.0 TTFT 27.1% -> 2.5%, TPOT 24.6% -> 25.5%; their
rate, the centre of the search's bracket, moves by 0.2%, which alone moves a v4.0 row's simulated TTFT by up to
10 points (H200-CTS +7.2% -> +17.2% at seeds 0-2): near the highest rate the means are that steep.
Not modelled: the harness's hops between the LoadGen process and each TensorRT-LLM group (requests, first
tokens and responses over MPI, main_llm.cc; milliseconds against 120-165 ms steps), and how each harness spreads
requests over its replicas (the simulator sends each to one at random; v4.0's H100 LoadGen rank sends each to
the group with the fewest in flight, traffic_distribution_policy 2, and its single-process H200 run keeps one
request queue that every GPU's batch manager drains at its loop's start, LLMServer's constructor).
The MLPerf cases run the harness's profiles: with trtllm-bench's caps (32,768 tokens, 4,096 sequences) TPOT was
v4.0 8.0-9.9%, v5.0 13.6-17.6%, TTFT v4.0 31.5-33.3%, v5.0 15.6-32.2%; reserving each request's KV at admission
(TensorRT-LLM's own default) moved TTFT v4.0 to 13.6-26.8%, v5.0 to 38.5-45.9% (one 4,000-request run per seed,
before the caps).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import as_completed
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from clustersim.catalog.registry import Catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.processes import spawned_pool
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import Case, as_case
from clustersim.validation.disaggregated_cases import disaggregation
from clustersim.validation.finite_runs import simulates, workload_sampler
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

SEARCH_REQUESTS = 16000  # per run: at 4,000 the v5.0 B200 edge was 53-58 requests/s, at 16,000-32,000 44.6-45.6
SEARCH_STEPS = 7  # halvings of the rate bracket [cf / 2, 2 cf]: 1/2**7 of it (~2% of the rate)
SEEDS = (0, 1, 2)  # runs pooled per rate (48,000 requests): p99s from 24,000 steady requests


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


def _search_key(case: Case, requests: int, steps: int, seeds: tuple[int, ...]) -> str:
    """The cache key of one replica's search: the replica and the search's length."""
    return f"{_replica_key(case)}|{requests}|{steps}|{seeds}"


def steady_means(
    deployment: CaseDeployment, rate_per_replica_s: float, requests: int, seeds: tuple[int, ...] = SEEDS
) -> ServerLatency:
    """One replica under Poisson arrivals at ``rate_per_replica_s``, one run per seed: TTFT and per-request
    TPOT (mean and p99) of the requests arriving in the middle half of each run (the ramp-up and drain left
    out), pooled over the runs."""
    if not seeds:
        raise ClusterSimError("seeds: give at least one seed", field="seeds", value=seeds)
    workload = deployment.workload
    request = replace(deployment.request, batching=Batching.CONTINUOUS)
    sampler = workload_sampler(workload, request.input_tokens, request.output_tokens)
    one = replace(deployment.serving, dp=1)
    middle = slice(requests // 4, 3 * requests // 4)
    ttfts, tpots = [], []
    for seed in seeds:
        run = simulate(
            deployment.model, one, request, Load(rate_per_s=rate_per_replica_s), requests=requests, sampler=sampler,
            seed=seed, engine=deployment.engine,
        )  # fmt: skip
        ttfts.append(run.ttft_s[middle])
        tpots.append(run.request_itl_s[middle])
    ttft, tpot = np.concatenate(ttfts), np.concatenate(tpots)
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
    seeds: tuple[int, ...] = SEEDS,
) -> ServerLatency:
    """The steady latency of a server case's replica at the highest simulated rate whose p99 TTFT and p99
    TPOT meet the case's targets (default MLPerf's), searched by halving ``[cf / 2, 2 cf]`` ``steps`` times
    around the closed forms' rate ``cf``; cached per replica deployment and search."""
    case = as_case(case, "inference")
    workload = case.workload
    if workload is None or workload.scenario != "server":
        raise ClusterSimError(f"case {case.id}: the simulated server latency needs a server case", field="scenario")
    key = _search_key(case, requests, steps, seeds)
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
        found = steady_means(deployment, mid, requests, seeds)
        if found.ttft_p99_s <= ttft_target and found.tpot_p99_s <= tpot_target:
            low, best = mid, found
        else:
            high = mid
    result = best or steady_means(deployment, low, requests, seeds)
    _CACHE[key] = result
    return result


def search_server_latencies(
    cases: Sequence[Case],
    catalog: Catalog,
    *,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
    requests: int = SEARCH_REQUESTS,
    steps: int = SEARCH_STEPS,
    seeds: tuple[int, ...] = SEEDS,
) -> int:
    """Run ``server_latency``'s search (``requests``, ``steps``, ``seeds`` as there) for every case the simulator
    scores (``simulates_latency``), each distinct replica once, on ``workers`` spawned processes (1: here, one after
    another), into the cache the predictor reads; ``progress(done, total)`` after each. The searches are independent
    and seeded, so the answers are those of one process. Returns how many searches ran."""
    if workers < 1:
        raise ClusterSimError(f"workers: {workers} is not a count of processes; give 1 or more", field="workers")
    pending: dict[str, Case] = {}
    for case in cases:
        if _searchable(case, catalog):
            key = _search_key(case, requests, steps, seeds)
            if key not in _CACHE:
                pending.setdefault(key, case)
    total = len(pending)
    if workers == 1 or total < 2:
        for done, case in enumerate(pending.values(), start=1):
            with contextlib.suppress(ClusterSimError):  # the scoring reports the case's error
                server_latency(case, catalog, requests=requests, steps=steps, seeds=seeds)
            if progress is not None:
                progress(done, total)
        return total
    with spawned_pool(min(workers, total)) as pool:
        futures = {
            pool.submit(server_latency, case, catalog, requests=requests, steps=steps, seeds=seeds): key
            for key, case in pending.items()
        }
        for done, future in enumerate(as_completed(futures), start=1):
            with contextlib.suppress(ClusterSimError):  # the scoring reports the case's error
                _CACHE[futures[future]] = future.result()
            if progress is not None:
                progress(done, total)
    return total


def _searchable(case: Case, catalog: Catalog) -> bool:
    """An inference case the simulator scores (one it cannot read is the scoring's to report)."""
    try:
        return case.kind == "inference" and simulates_latency(case, catalog)
    except ClusterSimError:
        return False


def simulates_latency(case: Case | Mapping[str, Any], catalog: Catalog) -> bool:
    """Whether ``simulated_latency_predictor`` simulates the case: a server case, not disaggregated (its closed form
    scores it), whose engine the simulator
    runs (engines without static-shape buckets; it refuses the Neuron ones) on a deployment it schedules (one
    queue a replica: not attention data parallel, whose groups the closed forms price)."""
    case = as_case(case, "inference")
    if case.workload is None or case.workload.scenario != "server" or disaggregation(case) is not None:
        return False
    deployment = case_deployment(case, catalog)
    return simulates(deployment.engine) and deployment.serving.attention_dp == 1


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
