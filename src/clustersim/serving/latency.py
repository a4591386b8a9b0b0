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
every replica count (``_server_curve``). Targets apply to means. A prompt's own time (what the prompts' queue
serves) is what it adds to a step, without an eager step's launch floor, which is the step's; on an engine that runs
prompts in launches of their own, its share of a full launch (as many prompts as the token budget holds) beyond the
launch's fixed costs (its weight reads and overheads, in the step that admits it).

A prompt longer than a step's token budget runs in chunks, and the prompts behind it wait until it is done: an
M/G/1 queue on the prompts' own prefill times (Pollaczek-Khinchine: ``lambda E[S^2] / (2 (1 - rho))``). Where the
mean prompt is over the budget every prompt queues; where it fits, the prompts over the budget do (a request set's
long tail) and the rest share steps (the whole prompts' chained counts). Llama 3.1 405B on eight H200s, vLLM's
8,192-token steps, 9,429-token prompts: TTFT -0.6% and +1.1% of the request simulator's at 0.1 and 0.2
requests/s (-11.5% and -22.6% without the queue). MLPerf's Llama 3.1 405B server runs are chunked (2,048-2,560-token
steps): on B200 and GB200 the queue takes their TTFT from -26% and -21% to +18% and +25% at the model's highest rate,
on H200 from +4% to +66%, where the model's step is already 26-44% too long (its TPOT); its mean only enters the rate
searches (the p99 targets take the slot queue's tail): an M/D/1 tail there put the rate meeting the 6 s p99 target
20% below the measured one (2026-12-02, tried).

A request set's spread of lengths (``Request.input_tokens_quantiles``, ``output_tokens_quantiles``) enters three
ways: a prompt's attention is the mean over its lengths' (it grows with the square of a prompt), the queue's
``E[S^2]`` is over them, and the prompts that came while a request's own prompt waited and ran are served between its
first tokens. That work, ``rho`` times its wait and first step, runs in the next steps while more prompts come (a
share ``rho`` each time), ``(1 - rho^g) / (1 - rho)`` of it within ``g = o - 1`` gaps, at most a step's token budget
a step, less what the budget left in its own last chunk's step ran before its first token; averaged over the outputs
(those of one token have none). And the decoders come in bursts: arrivals that come while prompts run start decoding
together, a branching process whose count has a variance ``1 / (1 - rho)^2`` times its mean where independent
arrivals give 1 (the simulator's steps: 4.6 at ``rho`` 0.46), so one of them sees the mean batch and that many more.
TPOT is that step plus the prompts' work over its gaps. Llama 3.1 8B on one H100 (2026-12-03, against the
simulator's mean over 6,000-12,000 requests; before: the step a decoder sees, every prompt at the mean):

* 2,048-token prompts, 28-token outputs at 4 and 6 requests/s: TPOT -0.3% and -1.0% (-6.5% and -10.5%);
* 1,024 + 256 tokens at 8, 12 and 16 requests/s: TPOT -0.6%, -1.2%, -2.5%;
* Azure's 2023 code trace (outputs: median 13) at 4 requests/s: TPOT -1.4% (-17%), TTFT -3.4% (-13%; whole
  prompts of a spread of lengths lengthen the span an arrival waits out, ``whole_prompts``);
* Mooncake's conversation set (prompts: mean 12,035, p99 85,400) on vLLM at 0.1-0.4 requests/s: TTFT +0.1% to +1.7%
  (-36% to -53%), TPOT -3.8% to +2.7% (-8% to -31%); on TensorRT-LLM's 32,768-token steps, where only the long
  prompts queue: TTFT +1.0% and +2.7%, TPOT -2.3% and +3.8% at 0.2 and 0.4;
* fixed 12,000-token prompts in two chunks at 0.4, 0.8 and 1.2 requests/s: TPOT -3.3%, -7.4%, -12.8% (-4.0%,
  -11.5%, -18.2%): the bursts are larger than the branching estimate (4.6 against 3.4 at 1.2 requests/s).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

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
    deployment_profile,
    make_estimate,
    request_steps,
)
from clustersim.serving.first_token import first_token_lag_steps
from clustersim.serving.memory import causal_pairs
from clustersim.serving.queueing import erlang_c
from clustersim.workload.transformer import Transformer

SPREAD_POINTS = 32  # prompt and output lengths over which a request's time after its first token is averaged


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
    queued: FloatArray = field(default_factory=lambda: np.zeros(1))  # per prompt length: 1 where it queues (_queued)
    own_prompt_s: FloatArray = field(default_factory=lambda: np.zeros(1))  # one prompt more in a step, per batch
    own_attention_s: FloatArray = field(default_factory=lambda: np.zeros(1))  # its attention
    service_shape: tuple[FloatArray, FloatArray] | None = None  # per prompt length: its tokens and pairs / the means
    gaps: FloatArray = field(default_factory=lambda: np.ones(1))  # the gaps between tokens of the outputs (o - 1 > 0)
    budget_prompts: float = math.inf  # mean prompts' worth of tokens in a step's token budget

    def after_first_token_s(
        self, busy: float, wait_s: float, first_s: FloatArray, absorbed_s: FloatArray, step_cap_s: float
    ) -> float:
        """The mean time per gap between tokens that a request's outputs spend on the prompts that came while its own
        prompt waited and ran: that work runs after its first token, in the next steps, and more prompts come while
        it does (a share ``busy`` of the time each time), ``busy (w + F) (1 - busy^g) / (1 - busy)`` over ``g = o - 1``
        gaps, at most ``step_cap_s`` of it a step (a step's token budget). Over the request set's prompts (``F``,
        ``first_s``: its first step beyond a decode step) and outputs, and the wait ``w`` of an M/G/1 queue: none
        with probability ``1 - busy``, else ``wait_s / busy`` on average (``wait_s`` its mean; 0 where prompts
        share steps)."""
        g, own = _representatives(self.gaps)[:, None, None], _representatives(first_s)
        absorbed = _representatives(absorbed_s)[None, :, None]
        waits, odds = np.array([0.0, wait_s / busy if busy > 0 else 0.0]), np.array([1.0 - busy, busy])
        held = own[None, :, None] + waits[None, None, :]
        work = np.maximum(busy * held - absorbed, 0.0) * (1.0 - busy**g) / (1.0 - busy)
        per_gap = np.minimum(work, g * step_cap_s) / g
        return float(np.mean(np.sum(per_gap * odds, axis=2)))


def _representatives(values: FloatArray) -> FloatArray:
    """At most ``SPREAD_POINTS`` of sorted ``values``: the middle one of each of as many equal groups."""
    if values.size <= SPREAD_POINTS:
        return values
    return values[((np.arange(SPREAD_POINTS) + 0.5) * values.size / SPREAD_POINTS).astype(np.int64)]


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
        budget = engine.token_budget(system.system.accelerator.id)
        lag = first_token_lag_steps(engine)
        own, attention = _own_prompt_s(model, system, request, grid, cal, engine)
        shape, gaps = _service_shape(model, request), _gaps(request)
        queued = _queued(request, budget)
        return _ServerCurve(grid, step, first, max_batch, mix.wait_s[:n], seen_step, seen, lag, queued,
                            own, attention, shape, gaps, budget / request.input_tokens)  # fmt: skip

    held = (model, system.system, system.tp_fabric, system.pp_fabric, system.cost, cal, engine)
    shape = (
        system.tp,
        system.pp,
        system.attention_dp,
        system.moe_exchange,
        system.board_power_watts,
        request,
        max_batch,
    )
    return _CURVES.get(held, shape, make)


def _queued(request: Request, budget_tokens: int) -> FloatArray:
    """Per prompt length of the request set (one entry: the mean), 1 where the prompts wait for one another in an
    M/G/1 queue, 0 where the whole-prompt steps' chained counts hold their wait (``whole_prompts``): every prompt
    where the mean prompt is over the step's token budget (the prompts run in chunks, taking the budget in turn);
    else the prompts over the budget, whose chunks hold up the ones behind them."""
    if request.input_tokens > budget_tokens:
        return np.ones(1 if request.input_tokens_quantiles is None else len(request.input_tokens_quantiles))
    if request.input_tokens_quantiles is None:
        return np.zeros(1)
    return (np.asarray(request.input_tokens_quantiles) > budget_tokens).astype(np.float64)


def _own_prompt_s(
    model: Transformer, system: ServingSystem, request: Request, batch: FloatArray, cal: InferenceCalibration | None,
    engine: str | EngineProfile,
) -> tuple[FloatArray, FloatArray]:  # fmt: skip
    """What one prompt adds to a step of one stage with ``batch / pp`` decoders (per entry), and its attention. An
    engine that runs prompts in a launch of their own (``mixed_steps`` false) pays that launch's fixed costs (the
    weights read, the step's overheads) once for the prompts it carries: a prompt's own time is its share of a full
    launch, as many prompts as the token budget holds, beyond one prompt's launch (whose fixed costs are in the step
    that admits it, ``first_step_s``). An eager step's launch floor is the step's, shared by the prompts it carries
    (it too is in ``first_step_s``): a prompt's own time is its device time."""
    profile = engine_profile(engine, system.family).model_copy(update={"eager_launch_s": None})
    full = max(2.0, profile.token_budget(system.system.accelerator.id) / request.input_tokens)  # prompts in a launch
    prompts = np.array([[0.0, 1.0]]) if profile.mixed_steps else np.array([[1.0, full]])
    cal = default_calibration() if cal is None else cal
    parts = request_steps(
        model, system, request, batch[:, None] / system.pp, prompts, request.decode_context_tokens, cal, profile
    )
    added = prompts[0, 1] - prompts[0, 0]
    step, attention = np.diff(parts.step_s, axis=1)[:, 0], np.diff(parts.prefill_attention_s, axis=1)[:, 0]
    return np.maximum(step / added, 0.0), np.maximum(attention / added, 0.0)


def _gaps(request: Request) -> FloatArray:
    """The gaps between tokens (``o - 1``) of the request set's outputs of more than one token (those of one token
    have no time per output token); the mean output's where every output is the mean."""
    points = request.output_tokens_quantiles or (request.output_tokens,)
    gaps = np.maximum(np.rint(np.asarray(points, dtype=np.float64)), 1.0) - 1.0
    gaps = gaps[gaps > 0]
    return gaps if gaps.size else np.ones(1)


def _service_shape(model: Transformer, request: Request) -> tuple[FloatArray, FloatArray] | None:
    """Each prompt length of the request set (``Request.input_tokens_quantiles``) as a multiple of the mean prompt,
    and its attention pairs as a multiple of the mean pairs; None where every prompt is at the mean."""
    pairs = request.prompt_pairs(model)
    if request.input_tokens_quantiles is None or not pairs:
        return None
    lengths = np.asarray(request.input_tokens_quantiles, dtype=np.float64)
    return lengths / request.input_tokens, causal_pairs(model, lengths) / pairs


def _prompt_services(curve: _ServerCurve, service_s: float, attention_s: float) -> FloatArray:
    """A prompt's own prefill time per length of the request set: ``service_s`` at the mean, of which ``attention_s``
    grows with the prompt's pairs and the rest with its tokens (one entry where every prompt is at the mean)."""
    if curve.service_shape is None:
        return np.array([service_s])
    tokens, pairs = curve.service_shape
    attention_s = min(max(attention_s, 0.0), service_s)
    return (service_s - attention_s) * tokens + attention_s * pairs


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
    service = system.pp * float(np.interp(batch, curve.batch, curve.own_prompt_s))  # a prompt's own prefill
    attention = system.pp * float(np.interp(batch, curve.batch, curve.own_attention_s))
    services = _prompt_services(curve, service, attention)
    mean_s = float(np.mean(services))
    busy = rate_per_replica * mean_s  # the share of time the replica spends on prompts
    if busy >= 1.0:
        return float(curve.max_batch), math.inf, math.inf
    # prompts in chunks take the budget in turn: an M/G/1 queue on the prompts' own time (Pollaczek-Khinchine's
    # mean wait, the queued prompts' share of E[S^2])
    ahead = rate_per_replica * float(np.mean(services**2 * curve.queued)) / (2.0 * (1.0 - busy))
    tpot = _time_per_token(curve, system.pp, batch, step, first, busy, ahead, services, service, attention)
    return batch, wait + ahead + admitted + system.pp * first + reported, tpot


def _saturation_per_replica(curve: _ServerCurve, system: ServingSystem, request: Request) -> float:
    """The highest rate (requests/s) one replica serves with finite latency: the least of what its decoders' steps,
    its KV slots and its prompts' own prefill time allow (``_latency``'s three bounds)."""
    low, high = 0.0, float(curve.seen_rate[-1]) / request.output_tokens
    if math.isfinite(_latency(curve, system, request, high * (1.0 - 1e-9))[1]):
        return high
    for _ in range(60):
        mid = 0.5 * (low + high)
        low, high = (mid, high) if math.isfinite(_latency(curve, system, request, mid)[1]) else (low, mid)
    return low


def _time_per_token(
    curve: _ServerCurve,
    pp: int,
    batch: float,
    seen_step: float,
    first: float,
    busy: float,
    wait_s: float,
    services: FloatArray,
    service: float,
    attention: float,
) -> float:
    """TPOT at ``batch``: the step a decoder sees with its batch in bursts, and the prompts that came while its own
    waited and ran, over its gaps (the module docstring); ``services`` each prompt length's own prefill, ``service``
    and ``attention`` the mean prompt's and its attention's (per replica, every stage)."""
    mean_step = float(np.interp(batch, curve.batch, curve.step_s))
    # the decoders come in bursts: one of them sees the mean batch and 1 / (1 - busy)^2 more (Poisson's: 1)
    step = mean_step + (seen_step - mean_step) / (1.0 - busy) ** 2
    # its first step holds its own prompt and those that came over the span before it (chained counts)
    first_s = services + max(pp * (first - mean_step), service) - service
    # a prompt in chunks shares its last step with the prompts behind it: the budget it leaves runs them
    tokens = curve.service_shape[0] if curve.service_shape is not None else np.ones(1)
    left = curve.budget_prompts * np.ceil(tokens / curve.budget_prompts) - tokens  # mean prompts' worth of tokens
    absorbed_s = left * max(service - attention, 0.0) * curve.queued
    cap_s = curve.budget_prompts * float(np.mean(services))  # a step's budget of prompt work
    return pp * step + curve.after_first_token_s(busy, wait_s, first_s, absorbed_s, cap_s)


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
    profile = deployment_profile(engine, model, system, request)
    if not rate_per_s > 0:
        raise ClusterSimError(f"rate: must be positive requests/s, got {rate_per_s}")
    max_batch, _, plan = batch_limit(model, system, request, cal, profile)
    curve = _server_curve(model, system, request, max_batch, cal, profile)
    batch, ttft, tpot = _latency(curve, system, request, rate_per_s / system.dp)
    if math.isinf(ttft):
        limit = _saturation_per_replica(curve, system, request) * system.dp
        raise ClusterSimError(f"rate: {rate_per_s:g} requests/s exceeds the saturation rate of {limit:.3g} requests/s")
    reason = "request rate"
    return make_estimate(
        model, system, request, plan, batch, max_batch, reason, "server", cal, profile, rate_per_s, ttft, tpot_s=tpot
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
    profile = deployment_profile(engine, model, system, request)
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
    low, high = 0.0, float(curve.seen_rate[-1]) / request.output_tokens  # past saturation every latency is infinite
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
    return make_estimate(
        model, system, request, plan, batch, max_batch, reason, "server", cal, profile, rate, ttft, tpot_s=tpot
    )
