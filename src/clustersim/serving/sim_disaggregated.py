"""The request-level simulator on a disaggregated deployment (``clustersim.serving.disaggregation``).

Requests arrive (Poisson or a trace) at a prefill worker chosen at random; its engine (the same scheduler,
``clustersim.serving.sim_scheduler``) runs their prompts in chunks and makes each one's first token. The KV
cache then goes to a decode worker chosen at random, over the deployment's link; a transfer holds both
workers' links (each sends or receives one at a time, the first ready first); the first token reaches the
user when the transfer is done (the decode worker streams the reply), so **TTFT = queue + prefill + KV
transfer**. The decode worker admits the request with its KV
cache (``kv_arrives``: only the last position runs, a decode token's work) and makes the rest; its steps
carry no prompt chunks but its own recomputations after a preemption. A one-token request ends at its
prefill. A closed loop is not run (its clients would wait on two pools). Both pools admit paged, whatever the
engine's ``kv_admission`` (a reservation of the output cap is not modelled here).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.disaggregation import Deployment
from clustersim.serving.engine import InferenceCalibration, ServingSystem, default_calibration, memory_plan
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.estimate import Request
from clustersim.serving.formats import check_formats
from clustersim.serving.sim_report import SimulationResult, Slo, percentiles
from clustersim.serving.sim_requests import RequestLengthSampler
from clustersim.serving.sim_scheduler import Arrivals, ReplicaLog, SchedulerLimits, run_replica
from clustersim.serving.sim_steps import Steps
from clustersim.serving.simulate import (
    DEFAULT_REQUESTS,
    Load,
    check_run,
    draw_lengths,
    per_request,
    prefix_cache_summary,
    replica_engine,
)
from clustersim.serving.simulate import run_replicas as serve_replicas
from clustersim.workload.transformer import Transformer


def simulate_disaggregated(
    model: Transformer,
    deployment: Deployment,
    request: Request,
    load: Load,
    *,
    requests: int = DEFAULT_REQUESTS,
    sampler: RequestLengthSampler | None = None,
    seed: int = 0,
    prefix_hit_rate: float | None = None,
    max_batch: int | None = None,
    slo: Slo | None = None,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    progress: Callable[[int, int], None] | None = None,
    routing: str = "random",
) -> SimulationResult:
    """Simulate ``requests`` requests on ``deployment``; the result's ``setup["disaggregation"]`` has the pools,
    the KV bytes per request and the transfer times; ``prefix_hit_rate`` as ``simulate``'s (the prefill pool's
    caches); ``routing``: which prefill worker a request goes to (``simulate``'s). Same inputs and ``seed``, same
    result."""
    started = time.perf_counter()
    cal = default_calibration() if cal is None else cal
    prefill, decode = deployment.pools
    profile = engine_profile(engine, prefill.family)
    if load.concurrency is not None:
        raise ClusterSimError(
            "--disaggregate: the simulator runs a disaggregated deployment at --rate or on a --trace, not a closed "
            "loop (--concurrency)",
            field="--concurrency",
        )
    if request.batching is Batching.STATIC:
        raise ClusterSimError(
            "--disaggregate: the pools run continuous batching; drop --batching static", field="--batching"
        )
    hashes = load.trace.prefix_hashes if load.trace is not None and prefix_hit_rate is None else None
    hit = prefix_hit_rate or 0.0
    for pool in deployment.pools:
        check_run(pool, requests, hit, max_batch, None, load, routing)
        check_formats(request.precision, request.kv, pool.system.accelerator, profile.framework)
        _holds_weights(model, pool, request, cal, profile, "prefill" if pool is prefill else "decode")
    rng = np.random.default_rng(seed)
    inputs, outputs = draw_lengths(model, request, load, sampler, rng, requests)
    count = inputs.size
    ones = np.ones(count, dtype=np.int64)
    table, limits = replica_engine(
        model, prefill, request, profile, cal, inputs, ones, prefix_hit_rate=hit, max_batch=max_batch
    )
    halves = _Progress(progress, count)
    logs = serve_replicas(table, limits, inputs, ones, load, prefill.dp, count, rng, halves.first, hashes, routing)
    arrival, prefilled, _, _ = per_request(logs, count)
    wire_s = deployment.transfer_s(inputs.astype(np.float64))
    receiver = rng.integers(0, decode.dp, count) if decode.dp > 1 else np.zeros(count, dtype=np.int64)
    handed = _send(prefilled, wire_s, _prefill_worker(logs, count), receiver, outputs > 1)
    going = np.flatnonzero(outputs > 1)
    first, finish = prefilled.copy(), prefilled.copy()
    first[going] = handed[going]
    preempted = np.zeros(count, dtype=np.int64)
    gaps: list[np.ndarray] = []
    d_logs: list[ReplicaLog] = []
    if going.size:
        d_in, d_out = inputs[going] + 1, outputs[going] - 1
        d_table, d_limits = replica_engine(
            model, decode, request, profile, cal, d_in, d_out, prefix_hit_rate=hit, max_batch=max_batch,
            kv_arrives=True,
        )  # fmt: skip
        d_logs = _decode(d_table, d_limits, d_in, d_out, handed[going], receiver[going], halves.second)
        _, second, finish[going], preempted[going] = per_request(d_logs, going.size)
        gaps = [second - handed[going], *(np.asarray(log.resume_gaps_s) for log in d_logs)]
    wait_s = handed[going] - prefilled[going] - wire_s[going]  # behind its worker's earlier transfers
    wait_s = np.where(wait_s > 1e-9 * (1.0 + handed[going]), wait_s, 0.0)  # none but rounding
    setup = {
        "arrivals": load.kind,
        "rate_per_s": load.rate_per_s,
        "concurrency": None,
        "prefix_cache": prefix_cache_summary(logs, inputs, traced=hashes is not None),
        "routing": routing,
        "disaggregation": deployment.to_json()
        | {
            "kv_bytes_per_request": percentiles(deployment.request_bytes(inputs[going].astype(np.float64))),
            "kv_transfer_s": percentiles(wire_s[going]),
            "kv_link_wait_s": percentiles(wait_s),
        },
    }
    back = np.argsort(arrival, kind="stable")
    return SimulationResult(
        arrival_s=arrival[back],
        first_token_s=first[back],
        finish_s=finish[back],
        input_tokens=inputs[back],
        output_tokens=outputs[back],
        preemptions=preempted[back],
        step_s=np.asarray([s for log in d_logs for s in log.step_s], dtype=np.float64),
        step_tokens=np.asarray([b for log in d_logs for b in log.step_decoding], dtype=np.int64),
        resume_gaps_s=np.concatenate(gaps) if gaps else np.zeros(0),
        steps=sum(log.steps for log in logs + d_logs),
        wall_s=time.perf_counter() - started,
        slo=slo,
        setup=setup,
    )


def _holds_weights(
    model: Transformer,
    pool: ServingSystem,
    request: Request,
    cal: InferenceCalibration,
    profile: EngineProfile,
    name: str,
) -> None:
    """Refuse a pool whose devices cannot hold the weights, naming --disaggregate."""
    try:
        memory_plan(model, pool, request.precision, request.kv, cal, profile)
    except ClusterSimError as exc:
        raise ClusterSimError(
            f"--disaggregate: the {name} pool's workers (tp {pool.tp}) cannot hold the model: {exc}",
            field="--disaggregate",
            value=pool.tp,
        ) from None


def _prefill_worker(logs: list[ReplicaLog], count: int) -> np.ndarray:
    """Which prefill worker (its log's index) served each request."""
    worker = np.zeros(count, dtype=np.int64)
    for k, log in enumerate(logs):
        worker[np.fromiter(log.finish_s.keys(), dtype=np.int64, count=len(log.finish_s))] = k
    return worker


def _send(
    ready_s: np.ndarray, wire_s: np.ndarray, sender: np.ndarray, receiver: np.ndarray, moving: np.ndarray
) -> np.ndarray:
    """When each moving request's KV cache has arrived: a transfer holds its prefill worker's and its decode
    worker's links, so each worker sends (receives) one at a time, the first ready first."""
    arrived = ready_s.copy()
    sending: dict[int, float] = {}
    receiving: dict[int, float] = {}
    order = np.flatnonzero(moving)
    for r in order[np.argsort(ready_s[order], kind="stable")].tolist():
        s, d = int(sender[r]), int(receiver[r])
        start = max(float(ready_s[r]), sending.get(s, 0.0), receiving.get(d, 0.0))
        sending[s] = receiving[d] = arrived[r] = start + float(wire_s[r])
    return arrived


def _decode(
    table: Steps,
    limits: SchedulerLimits,
    inputs: np.ndarray,
    outputs: np.ndarray,
    handed_s: np.ndarray,
    worker: np.ndarray,
    progress: Callable[[int, int], None],
) -> list[ReplicaLog]:
    """Each decode worker's requests (those its transfers brought), served from their handover."""
    count, done = inputs.size, 0

    def finished(n: int) -> None:
        nonlocal done
        done += n
        if done % 100 == 0 or done == count:
            progress(done, count)

    ins, outs, logs = inputs.tolist(), outputs.tolist(), []
    for k in np.unique(worker).tolist():
        order = np.flatnonzero(worker == k)
        logs.append(
            run_replica(table, limits, ins, outs, Arrivals(order.tolist(), handed_s[order].tolist(), None), finished)
        )
    return logs


class _Progress:
    """One ``progress(done, total)`` over both pools: the prefill pool's requests then the decode pool's."""

    def __init__(self, progress: Callable[[int, int], None] | None, count: int) -> None:
        self.progress, self.count = progress, count

    def first(self, done: int, _: int) -> None:
        if self.progress is not None:
            self.progress(done // 2, self.count)

    def second(self, done: int, total: int) -> None:
        if self.progress is not None:
            self.progress(self.count // 2 + done * (self.count - self.count // 2) // max(total, 1), self.count)
