"""The concurrency scenario: a closed loop that keeps a fixed number of requests in flight.

Load generators such as AIPerf, genai-perf or vLLM's ``benchmark_serving --max-concurrency`` send a
new request as soon as one finishes, so ``concurrency`` requests are always in flight on the whole
system (spread evenly over its ``dp`` replicas). With continuous batching each request holds a slot
for ``output`` steps: the step that runs its prompt (and makes its first token) and ``output - 1``
decode steps. In the steady state a replica holding ``B`` requests therefore runs, per step,
``B (output - 1) / output`` decoding sequences and the prompts of ``B / output`` new requests, and
makes ``B`` tokens: the output rate is ``B / step`` and the request rate ``B / (output x step)``.

The engine holds at most its batch limit (KV capacity, scheduler caps); requests beyond it wait at
the engine, which adds their wait (Little's law) to the time to first token but no throughput. A new
request's first token comes from a step that carries its prompt beside the ``B - 1`` other requests; a
lone client (``B = 1``) finds its engine idle, so its prompt runs at once and alone.

Prompts are whole, not the fluid share of a step the throughput uses: a replica runs the prompts' work one
after another (prefill is compute-bound: two prompts in one step take about as long as two steps of one), so
a new prompt also waits for those of the other clients ahead of it, an M/D/1 queue
(``clustersim.serving.queueing``). It matters where prompts are long: NVIDIA NIM's Llama 3.3 70B TP2 on two
H100s with 5,000-token prompts measures a TTFT of 0.41, 0.55, 0.69 and 0.83 s at 1, 5, 25 and 50 clients,
where one prompt's own step takes about 0.4 s.
"""

from __future__ import annotations

import math

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.serving.engine import InferenceCalibration, ServingSystem, default_calibration
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import (
    Batching,
    Request,
    ServingEstimate,
    batch_limit,
    deployment_profile,
    make_estimate,
)
from clustersim.serving.queueing import prompt_queue_wait_s
from clustersim.serving.whole_prompts import StepMix, step_mix
from clustersim.workload.transformer import Transformer


def closed_loop_step(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    batch: float,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    *,
    prompting: float | None = None,
) -> StepMix:
    """The steady steps of one stage with ``batch`` requests in flight per replica (``batch / pp`` per stage),
    each in its prompt step or decoding, the prompts of ``prompting`` of them (None: all) whole
    (``clustersim.serving.whole_prompts``); one entry."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    b = batch / system.pp
    n, o = request.input_tokens, request.output_tokens
    decoding = np.asarray([b * (o - 1.0) / o])
    prompts = (batch if prompting is None else prompting) / system.pp / o
    formats = (request.precision, request.kv)
    return step_mix(model, system, (n, o), formats, decoding, prompts, cal, profile,
                    decode_context_tokens=request.decode_context_tokens,
                    prompt_pairs=request.prompt_pairs(model))  # fmt: skip


def estimate_concurrency(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    concurrency: int,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> ServingEstimate:
    """Output tokens/s, TTFT and TPOT of the whole system with ``concurrency`` requests kept in flight."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    if concurrency < 1:
        raise ClusterSimError(f"concurrency: must be at least 1 request in flight, got {concurrency}")
    if request.batching is not Batching.CONTINUOUS:
        raise ClusterSimError("batching: the concurrency scenario is modelled with continuous batching only")
    max_batch, limit, plan = batch_limit(model, system, request, cal, profile)
    wanted = concurrency / system.dp
    batch = min(wanted, float(max_batch))
    mix = closed_loop_step(model, system, request, batch, cal, profile)
    step_s = float(mix.mean.step_s[0])
    rate_per_replica = batch / (request.output_tokens * system.pp * step_s)  # requests/s
    # A new request: the wait for a slot (the requests beyond the engine's limit, by Little's law), the wait for
    # the next scheduling while other requests keep the engine busy (none for a lone client: its engine is idle
    # when the request arrives), then the scheduling step that carries its prompt beside the other requests in
    # flight (batch - 1 of them, decoding or in their own prompt step) through every stage.
    wait = (wanted - batch) / rate_per_replica
    others = max(batch - 1.0, 0.0)
    around = closed_loop_step(model, system, request, others, cal, profile)
    first_s = float(around.admitting.step_s[0])
    # the prompts of the other clients ahead of this one: each takes what it adds to a scheduling step
    alone_s = float(around.scheduling.step_s[0])
    queued = prompt_queue_wait_s(rate_per_replica * others / batch, first_s - alone_s, others)
    ttft = wait + queued + min(others, 1.0) * float(around.wait_s[0]) + system.pp * first_s
    # a request's own prompt is not among the steps between its tokens: the other clients' are (its TPOT)
    seen = closed_loop_step(model, system, request, batch, cal, profile, prompting=max(batch - 1.0, 0.0)).mean
    reason = "concurrency" if math.isclose(batch, wanted) else limit
    return make_estimate(
        model,
        system,
        request,
        plan,
        batch,
        max_batch,
        reason,
        "concurrency",
        cal,
        profile,
        rate_per_replica * system.dp,
        ttft,
        steady=seen,
    )
