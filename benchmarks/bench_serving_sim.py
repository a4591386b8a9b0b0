"""Speed of the request-level serving simulator: 10,000 ShareGPT requests at 60 requests/s.

Issue 24's target is "well under 10 s on this machine" (2 cores). Llama 3.1 8B on one p5.48xlarge at tp 1
(8 replicas, vLLM's profile), Poisson arrivals, lengths drawn from ``sharegpt``; the wall time counts
everything ``simulate`` does (drawing the requests, tabulating the step model, the replicas' runs, the
result). Prints the median over a few runs (one process), and a 64-client closed loop beside it; then the same
Poisson load disaggregated (4 prefill + 4 decode workers, ``serving.sim_disaggregated``) and with speculative
decoding (K 4, acceptance 0.7, a one-layer draft head), and with TensorRT-LLM's KV reservation
(``admission="reserve"``). Last, Mooncake's conversation trace (12,031 requests over an hour, prompts of 12,035
tokens on average, ``tests/data/mooncake``) replayed with its prefix cache, its requests routed at random and by
``routing="cache-aware"`` (the router's own pass over the requests included). Run:
``python benchmarks/bench_serving_sim.py``.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import load_catalog
from clustersim.serving.disaggregation import Pools, deploy
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request
from clustersim.serving.sim_disaggregated import simulate_disaggregated
from clustersim.serving.sim_report import SimulationResult
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.serving.speculative import Speculation
from clustersim.serving.traces import read_trace
from clustersim.workload.zoo import load_model

REQUESTS = 10_000
RUNS = 5
MOONCAKE = Path(__file__).resolve().parents[1] / "tests" / "data" / "mooncake" / "conversation_trace.jsonl.gz"
REPLAYED = 12_031  # the trace's requests


def main() -> None:
    model = load_model("llama3.1-8b", use_env=False)
    system = serving_system_for_instance(load_catalog(use_env=False), "p5.48xlarge", tp=1)
    request = Request(229.7, 203.1)
    sampler = request_sampler("sharegpt", 229.7, 203.1)
    pools = deploy(load_catalog(use_env=False), "p5.48xlarge", Pools(4, 4), 1, model, request.kv)
    poisson = Load(rate_per_s=60.0)
    common = {"requests": REQUESTS, "sampler": sampler, "engine": "vllm"}
    runs = (
        ("Poisson, 60 requests/s", lambda seed: simulate(model, system, request, poisson, seed=seed, **common)),
        ("closed loop, 64 clients", lambda seed: simulate(model, system, request, Load(concurrency=64), seed=seed,
                                                         **common)),
        ("Poisson, disaggregated 4:4", lambda seed: simulate_disaggregated(model, pools, request, poisson, seed=seed,
                                                                           **common)),
        ("Poisson, speculative K4 A0.7", lambda seed: simulate(model, system, request, poisson, seed=seed,
                                                              speculation=Speculation(4, 0.7), **common)),
        ("Poisson, reserving KV (GUARANTEED_NO_EVICT)", lambda seed: simulate(model, system, request, poisson,
                                                                             seed=seed, admission="reserve", **common)),
    )  # fmt: skip
    for label, run in runs:
        walls, summary = timed(run, RUNS)
        print(
            f"{REQUESTS:,} sharegpt requests, {label}, {model.name} on {system.dp} x tp{system.tp} "
            f"{system.device_name}: {walls}; {RUNS} seeds), "
            f"{summary['steps']:,} engine steps, {summary['throughput']['output_tokens_per_s']:,.0f} output tokens/s"
        )
    trace = Load(trace=read_trace(MOONCAKE))
    for routing in ("random", "cache-aware"):
        replay = functools.partial(simulate, model, system, Request(12035, 343), trace, routing=routing)
        walls, summary = timed(lambda _, run=replay: run(), 3)
        print(
            f"Mooncake conversation trace, {REPLAYED:,} requests, routing {routing}, {model.name} "
            f"on {system.dp} x tp{system.tp} {system.device_name}: {walls}; 3 runs), {summary['steps']:,} engine "
            f"steps, {summary['prefix_cache']['cached_share']:.1%} of prompt tokens cached, mean TTFT "
            f"{summary['ttft_s']['mean']:.3f} s"
        )


def timed(run: Callable[[int], SimulationResult], times: int) -> tuple[str, dict[str, Any]]:
    """``run(seed)`` for seeds ``0..times-1``: its wall times as "median M s (min A, max B" and its last result."""
    walls, result = [], None
    for seed in range(times):
        start = time.perf_counter()
        result = run(seed)
        walls.append(time.perf_counter() - start)
    assert result is not None
    spread = f"median {statistics.median(walls):.2f} s (min {min(walls):.2f}, max {max(walls):.2f}"
    return spread, result.to_json()


if __name__ == "__main__":
    main()
