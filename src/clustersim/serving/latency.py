"""The server scenario: latency at a request rate, and the highest rate that meets latency targets.

At ``rate`` requests/s the decoding batch is the one whose output rate matches it (Little's law); TPOT is the
step a decoding request sees: the batch in flight and itself (the decoders of independent arrivals are Poisson
about their mean, so one of them sees one more than the mean; at a low rate a lone request still reads its own
context's KV every step, which the mean batch, a fraction of one, leaves out: 16,000-token prompts on one H100,
6.7 ms a token at the mean batch against 7.37 for a lone client). TTFT is the wait for a free slot (an M/D/c
queue with one slot per sequence the KV cache holds, ``clustersim.serving.queueing``), the rest of the step in
progress, the step that carries the prompt (both over the whole prompts the steps carry,
``clustersim.serving.whole_prompts``), and the steps a stack waits before it sends the first token
(``clustersim.serving.first_token``; none for most). A replica's curve of steps over its batch is made once for
every replica count (``_server_curve``). Targets apply to means.

A prompt longer than a step's token budget runs in chunks, and the prompts behind it wait until it is done: an
M/D/1 queue on a prompt's own prefill time (its step less the decode step). Llama 3.1 405B on eight H200s, vLLM's
8,192-token steps, 9,429-token prompts: TTFT -0.6% and +1.1% of the request simulator's at 0.1 and 0.2
requests/s (-11.5% and -22.6% without the queue). Shorter prompts share steps (the whole prompts' chained
counts). MLPerf's Llama 3.1 405B server runs are chunked (2,048-2,560-token steps): on B200 and GB200 the queue
takes their TTFT from -26% and -21% to +9% and +15% at the model's highest rate, on H200 from +4% to +54%, where
the model's step is already 26-32% too long (its TPOT); its mean only enters the rate searches (the p99 targets
take the slot queue's tail), which move by 1%: an M/D/1 tail there put the rate meeting the 6 s p99 target 20%
below the measured one (2026-12-02, tried).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.memo import IdentityMemo
from clustersim.serving.engine import FloatArray, InferenceCalibration, ServingSystem, default_calibration
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.estimate import (
    GRID_POINTS,
    Batching,
    Request,
    ServingEstimate,
    batch_limit,
    continuous_step,
    make_estimate,
)
from clustersim.serving.first_token import first_token_lag_steps
from clustersim.serving.queueing import erlang_c
from clustersim.workload.transformer import Transformer


@dataclass(frozen=True)
class _ServerCurve:
    """Steady-state step times over a grid of decoding batches (one replica), for interpolation."""

    batch: FloatArray
    step_s: FloatArray
    first_step_s: FloatArray
    max_batch: int
    wait_s: FloatArray  # an arrival's wait for the next scheduling (``clustersim.serving.whole_prompts``)
    seen_step_s: FloatArray  # the step a decoding request sees: the batch and itself (``continuous_step``)
    seen_rate: FloatArray  # output tokens/s of a replica whose requests decode at ``seen_step_s``
    first_token_lag_steps: int = 0  # the engine's (``clustersim.serving.first_token``)
    chunked: bool = False  # a prompt is longer than a step's token budget: it runs in chunks (``_latency``)


_CURVES: IdentityMemo[_ServerCurve] = IdentityMemo(keep=64)


def _server_curve(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    max_batch: int,
    cal: InferenceCalibration,
    engine: EngineProfile,
) -> _ServerCurve:
    """The steps over a grid of batches of one replica, made once: the same model, devices, layout, fabrics,
    request, calibration and engine give the same curve whatever the replicas (a plan's node counts differ only
    in them)."""

    def make() -> _ServerCurve:
        if request.batching is not Batching.CONTINUOUS:
            raise ClusterSimError("batching: the server scenario is modelled with continuous batching only")
        grid = np.unique(np.concatenate((np.geomspace(1e-3, max_batch, 4 * GRID_POINTS), [float(max_batch)])))
        n = grid.size  # the mean batch's steps and, in the same call, those a decoder sees (itself in them)
        both, own_seat = np.concatenate((grid, grid)), np.repeat([0.0, 1.0], n)
        mix = continuous_step(model, system, request, both, cal, engine, True, seen_by_a_decoder=own_seat)
        step, first, seen_step = mix.mean.step_s[:n], mix.admitting.step_s[:n], mix.mean.step_s[n:]
        seen = np.maximum.accumulate(grid / system.pp / seen_step)
        chunked = request.input_tokens > engine.token_budget(system.system.accelerator.id)
        lag = first_token_lag_steps(engine)
        return _ServerCurve(grid, step, first, max_batch, mix.wait_s[:n], seen_step, seen, lag, chunked)

    held = (model, system.system, system.tp_fabric, system.pp_fabric, system.cost, cal, engine)
    return _CURVES.get(held, (system.tp, system.pp, system.board_power_watts, request, max_batch), make)


def _latency(
    curve: _ServerCurve,
    system: ServingSystem,
    request: Request,
    rate_per_replica: float,
    percentile: float | None = None,
) -> tuple[float, float, float]:
    """(batch, TTFT, TPOT) at ``rate_per_replica`` requests/s, mean or at ``percentile`` (TTFT: the wait's
    tail); infinite latencies past saturation."""
    demand = rate_per_replica * request.output_tokens
    if demand >= curve.seen_rate[-1]:
        return float(curve.max_batch), math.inf, math.inf
    batch = float(np.interp(demand, curve.seen_rate, curve.batch))
    step = float(np.interp(batch, curve.batch, curve.seen_step_s))
    first = float(np.interp(batch, curve.batch, curve.first_step_s))
    holding_s = request.output_tokens * system.pp * float(curve.step_s[-1])  # a slot's time per request
    load = rate_per_replica * holding_s
    servers = curve.max_batch
    if load >= servers:  # every slot always busy: the queue grows without bound
        return float(curve.max_batch), math.inf, math.inf
    waits = erlang_c(servers, load)
    scale = 0.5 * holding_s / (servers - load)  # M/D/c: about half of M/M/c
    if percentile is None:
        wait = waits * scale
    else:  # P(wait > t) = C exp(-t / scale): the quantile, 0 when fewer than 1 - p arrivals wait at all
        wait = scale * math.log(waits / (1.0 - percentile)) if waits > 1.0 - percentile else 0.0
    reported = curve.first_token_lag_steps * system.pp * step  # the steps before the first token is sent
    admitted = float(np.interp(batch, curve.batch, curve.wait_s))  # to the scheduling that admits it
    ahead = 0.0
    if curve.chunked:  # prompts in chunks take the budget in turn: an M/D/1 queue on the prompts' own time
        service = system.pp * max(first - float(np.interp(batch, curve.batch, curve.step_s)), 0.0)
        busy = rate_per_replica * service
        if busy >= 1.0:
            return float(curve.max_batch), math.inf, math.inf
        ahead = rate_per_replica * service**2 / (2.0 * (1.0 - busy))
    return batch, wait + ahead + admitted + system.pp * first + reported, system.pp * step


def estimate_server(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    rate_per_s: float,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> ServingEstimate:
    """TTFT, TPOT and the batch at ``rate_per_s`` requests/s for the whole system (``dp`` replicas share it)."""
    cal = default_calibration() if cal is None else cal
    profile = engine_profile(engine, system.family)
    if not rate_per_s > 0:
        raise ClusterSimError(f"rate: must be positive requests/s, got {rate_per_s}")
    max_batch, _, plan = batch_limit(model, system, request, cal, profile)
    curve = _server_curve(model, system, request, max_batch, cal, profile)
    batch, ttft, _ = _latency(curve, system, request, rate_per_s / system.dp)
    if math.isinf(ttft):
        limit = float(curve.seen_rate[-1]) * system.dp / request.output_tokens
        raise ClusterSimError(f"rate: {rate_per_s:g} requests/s exceeds the saturation rate of {limit:.3g} requests/s")
    reason = "request rate"
    return make_estimate(
        model, system, request, plan, batch, max_batch, reason, "server", cal, profile, rate_per_s, ttft
    )


def max_rate(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    *,
    ttft_target_s: float,
    tpot_target_s: float,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    percentile: float | None = None,
) -> ServingEstimate:
    """The server estimate at the highest request rate whose TTFT and TPOT meet the targets: as means, or
    at ``percentile`` (e.g. 0.99, as MLPerf's server scenario applies them). The estimate's TTFT is the
    mean."""
    cal = default_calibration() if cal is None else cal
    if percentile is not None and not 0.0 < percentile < 1.0:
        raise ClusterSimError(f"percentile: must be between 0 and 1 (e.g. 0.99), got {percentile}")
    profile = engine_profile(engine, system.family)
    max_batch, _, plan = batch_limit(model, system, request, cal, profile)
    curve = _server_curve(model, system, request, max_batch, cal, profile)
    _, ttft0, tpot0 = _latency(curve, system, request, 0.0, percentile)
    if ttft0 > ttft_target_s or tpot0 > tpot_target_s:
        raise ClusterSimError(
            f"latency targets: even unloaded, TTFT is {ttft0:.3g} s (target {ttft_target_s:g}) and TPOT "
            f"{tpot0:.3g} s (target {tpot_target_s:g}); relax the targets or use more devices per replica",
            # the target missed (TTFT's where both are)
            field="ttft_target_s" if ttft0 > ttft_target_s else "tpot_target_s",
            value=ttft_target_s if ttft0 > ttft_target_s else tpot_target_s,
        )
    low, high = 0.0, float(curve.seen_rate[-1]) / request.output_tokens
    for _ in range(60):
        mid = 0.5 * (low + high)
        _, ttft, tpot = _latency(curve, system, request, mid, percentile)
        low, high = (mid, high) if ttft <= ttft_target_s and tpot <= tpot_target_s else (low, mid)
    batch, ttft, tpot = _latency(curve, system, request, low)
    at_high = _latency(curve, system, request, high, percentile)
    reason = "tpot target" if at_high[2] > tpot_target_s else "ttft target"
    bound_tpot = _latency(curve, system, request, low, percentile)[2]  # as the search judged it
    if not math.isfinite(ttft_target_s) and bound_tpot < tpot_target_s * (1 - 1e-3):  # TPOT never binds
        raise ClusterSimError(
            f"ttft_target_s: the TPOT target ({tpot_target_s:g} s) holds up to the rate that saturates the replicas, "
            "where the queue and the TTFT grow without bound; give a TTFT target too (--ttft-target)",
            field="ttft_target_s",
            value=ttft_target_s,
        )
    rate = low * system.dp
    return make_estimate(model, system, request, plan, batch, max_batch, reason, "server", cal, profile, rate, ttft)
