"""Serving estimates: the largest batch that fits, offline throughput, and latency at a request rate.

* **Continuous (in-flight) batching**, offline: in the steady state ``B`` sequences decode while the prompts of
  the ones that replace them go through the same steps, ``B x input / output`` prompt tokens per step; the output
  rate is ``B / step``. ``B``: the best batch the KV cache (whole lengths in paged blocks) and the engine allow.
* **Static batching**: a batch is prefilled together and decodes to the end before the next starts.
* **Server**: see ``clustersim.serving.latency``. ``dp`` replicas multiply throughput; with ``pp`` stages ``B / pp``
  sequences are in each stage and a token takes ``pp`` stage steps.
"""

from __future__ import annotations

import functools
import itertools
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from clustersim.catalog.schema import Dtype
from clustersim.choices import Batching as Batching  # re-exported: defined with the light enums
from clustersim.errors import ClusterSimError
from clustersim.model_split import check_model_split
from clustersim.serving.attention_dp import check_attention_dp
from clustersim.serving.bench_sizing import sized_engine
from clustersim.serving.deployment_notes import deployment_notes
from clustersim.serving.engine import (
    FloatArray,
    InferenceCalibration,
    MemoryPlan,
    ServingSystem,
    StepTimes,
    default_calibration,
    memory_plan,
    reserved_tokens,
    step_times,
)
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.formats import ServingPrecision, check_formats, default_kv, kv_default_note
from clustersim.serving.fused_experts import check_fused_experts
from clustersim.serving.memory import causal_pairs, sequences_held, weights_note
from clustersim.serving.serving_system import MoeExchange
from clustersim.serving.whole_prompts import StepMix, step_mix
from clustersim.workload.transformer import Transformer

GRID_POINTS = 96


@functools.lru_cache(maxsize=64)
def _mean_pairs(model: Transformer, lengths: tuple[float, ...]) -> float:
    """The mean causal pairs of prompts of ``lengths`` (a plan asks for the same request's over and over)."""
    return float(np.mean(causal_pairs(model, np.asarray(lengths, dtype=np.float64))))


def _check_quantiles(name: str, points: tuple[float, ...] | None, mean_tokens: float) -> None:
    """``ClusterSimError`` unless ``points`` (None: none) are rising positive lengths whose mean is ``mean_tokens``."""
    if points is None:
        return
    if not points or min(points) <= 0 or any(b < a for a, b in itertools.pairwise(points)):
        raise ClusterSimError(
            f"{name}: lengths at rising quantiles, each positive, got {len(points)} from {min(points, default=0):g}"
        )
    if not math.isclose(sum(points) / len(points), mean_tokens, rel_tol=1e-6):
        raise ClusterSimError(f"{name}: their mean {sum(points) / len(points):g} is not the mean {mean_tokens:g}")


@dataclass(frozen=True)
class Request:
    """What is served: mean prompt and output lengths (tokens), precisions and batching."""

    input_tokens: float
    output_tokens: float
    precision: ServingPrecision = Dtype.BF16
    kv_precision: ServingPrecision | None = None  # default: the weights' precision (fp8 for 4-bit weights)
    batching: Batching = Batching.CONTINUOUS
    beyond_context: bool = False  # price prompts + outputs beyond the model's context anyway (notes say so)
    # the mean output of the requests in flight, E[o^2] / E[o] over the request set (a longer request stays longer);
    # None: every request's output is the mean (``clustersim.serving.sim_requests.in_flight_output_tokens``)
    output_tokens_in_flight: float | None = None
    # the prompts' lengths at evenly spaced quantiles of the request set, their mean ``input_tokens``
    # (``clustersim.serving.sim_requests.length_quantiles``); None: every prompt at the mean
    input_tokens_quantiles: tuple[float, ...] | None = None
    output_tokens_quantiles: tuple[float, ...] | None = None  # the outputs' likewise

    def __post_init__(self) -> None:
        if not self.input_tokens >= 1:
            raise ClusterSimError(f"input: must be at least 1 token, got {self.input_tokens}")
        if not self.output_tokens >= 1:
            raise ClusterSimError(f"output: must be at least 1 token, got {self.output_tokens}")
        if self.output_tokens_in_flight is not None and not self.output_tokens_in_flight >= self.output_tokens:
            raise ClusterSimError(
                f"output_tokens_in_flight: {self.output_tokens_in_flight} is below the mean output "
                f"{self.output_tokens} (it is E[o^2] / E[o], at least E[o])"
            )
        _check_quantiles("input_tokens_quantiles", self.input_tokens_quantiles, self.input_tokens)
        _check_quantiles("output_tokens_quantiles", self.output_tokens_quantiles, self.output_tokens)

    @property
    def decode_context_tokens(self) -> float:
        """The mean context of a decoding sequence: its prompt and half its output, the output of the requests
        in flight (a longer request is in flight longer, so over a request set they average E[o^2] / E[o])."""
        output = self.output_tokens if self.output_tokens_in_flight is None else self.output_tokens_in_flight
        return self.input_tokens + output / 2.0

    def prompt_cv2(self, budget_tokens: float) -> float:
        """The relative variance of the prompts that run whole in a step, ``E[(n - E[n])^2; n <= budget] / E[n]^2``
        over the request set (0 where all are the mean, or the mean is over the step's ``budget_tokens``: those
        prompts run in chunks and queue, ``clustersim.serving.latency``)."""
        if self.input_tokens_quantiles is None or self.input_tokens > budget_tokens:
            return 0.0
        n = np.asarray(self.input_tokens_quantiles, dtype=np.float64)
        return float(np.mean(np.where(n <= budget_tokens, n / self.input_tokens - 1.0, 0.0) ** 2))

    def prompt_pairs(self, model: Transformer) -> float | None:
        """The mean (query, key) pairs of a prompt's causal attention over the layers, ``E[n^2] / 2`` on full layers
        (a prompt's attention grows with its square, so a spread of lengths costs more than prompts at the mean);
        None where every prompt is at the mean."""
        if self.input_tokens_quantiles is None:
            return None
        return _mean_pairs(model, self.input_tokens_quantiles)

    @property
    def kv(self) -> ServingPrecision:
        """Precision of the KV cache: as given, else the weights' (fp8 beside 4-bit weights)."""
        return self.kv_precision or default_kv(self.precision)

    def notes(self, model: Transformer) -> tuple[str, ...]:
        """What the estimate of this request on ``model`` must say: a length beyond its context priced as
        asked, weights at a quantized checkpoint's width, an fp8 KV cache taken beside 4-bit weights;
        ``ClusterSimError`` for a length beyond the context not asked for."""
        n, o = self.input_tokens, self.output_tokens
        what = f"input_tokens + output_tokens (--input + --output), {n:,.0f} + {o:,.0f},"
        found = (
            model.check_context(n + o, what, beyond_context=self.beyond_context),
            weights_note(model, self.precision),
            kv_default_note(self.precision, self.kv_precision),
        )
        return tuple(note for note in found if note is not None)


@dataclass(frozen=True)
class ServingEstimate:
    """One serving configuration: batch and why, memory per device, step terms, throughput, latency. ``batch``
    counts sequences in flight per replica; step terms are one stage's step, seconds."""

    model: str
    system: str
    device: str
    tp: int
    pp: int
    dp: int
    precision: str
    kv_precision: str
    batching: str
    engine: str
    scenario: str
    input_tokens: float
    output_tokens: float
    decode_context_tokens: float  # a decoder's mean context (Request.decode_context_tokens; static: n + o / 2)
    batch: int
    max_batch: int
    batch_limited_by: str
    weights_bytes_per_device: float
    kv_bytes_per_token_per_device: float
    kv_capacity_tokens_per_device: float
    step_s: float
    gemm_compute_s: float
    gemm_memory_s: float
    decode_attention_s: float
    prefill_attention_s: float
    elementwise_s: float
    communication_s: float
    overhead_s: float
    memory_bound_share: float
    output_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    request_rate_per_s: float
    notes: tuple[str, ...] = ()  # a length beyond the context priced as asked, quantized weights
    attention_dp: int = 1  # attention data-parallel groups of a replica (ServingSystem.attention_dp)
    moe_exchange: MoeExchange = "gather"  # how its ranks' tokens reach the experts (ServingSystem.moe_exchange)
    nodes: int = 1  # instances the replicas fill (a replica wider than one spans several)

    @property
    def output_tokens_per_s_per_device(self) -> float:
        """System output rate per device."""
        return self.output_tokens_per_s / (self.tp * self.pp * self.attention_dp * self.dp)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, SI units."""
        data = asdict(self)
        data["output_tokens_per_s_per_device"] = self.output_tokens_per_s_per_device
        return data


def deployment_profile(
    engine: str | EngineProfile | None, model: Transformer, system: ServingSystem, request: Request
) -> EngineProfile:
    """The profile of ``engine`` on ``system`` with the caps its benchmark gives this deployment
    (``clustersim.serving.bench_sizing``; a profile of fixed caps as it is)."""
    longest = max(request.input_tokens_quantiles or (request.input_tokens,))
    lengths = (request.input_tokens, request.output_tokens, longest)
    return sized_engine(engine, model, system, request.precision, request.kv, lengths)


# ---- batch limits ---------------------------------------------------------------------------------


def batch_limit(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> tuple[int, str, MemoryPlan]:
    """The largest batch per replica, what limits it (``capacity`` or ``scheduler``), and the memory plan."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    request.notes(model)  # a length beyond the model's context is refused unless asked for
    check_model_split(model, tp=system.tp, pp=system.pp, uneven_stages=True)
    check_attention_dp(model, system, profile)
    check_formats(request.precision, request.kv, system.system.accelerator, profile.framework)
    check_fused_experts(model, system, request.precision, profile)
    plan = memory_plan(model, system, request.precision, request.kv, cal, profile)
    per_sequence = reserved_tokens(request.input_tokens, request.output_tokens, profile, model)
    groups = system.attention_dp  # each attention group caches and schedules its own sequences
    held = sequences_held(model, request.kv, plan.kv_capacity_tokens, per_sequence, profile.state_pool, system.tp)
    by_capacity = held * groups
    if by_capacity < 1:
        raise ClusterSimError(
            f"input/output: one sequence of {request.input_tokens:g} + {request.output_tokens:g} tokens needs "
            f"{per_sequence * plan.kv_bytes_per_token / 2**30:.2f} GiB of KV cache per device, but only "
            f"{plan.kv_budget_bytes / 2**30:.2f} GiB is left on {system.device_name} after the weights; "
            f"use a larger tp or pp, an fp8 KV cache, or shorter sequences"
        )
    tokens_per_sequence = 1.0 + request.input_tokens / request.output_tokens
    chip = system.system.accelerator.id
    by_tokens = math.floor(profile.token_budget(chip) / tokens_per_sequence) * system.pp * groups
    by_scheduler = max(min(profile.sequence_cap(chip) * groups, by_tokens), 1)
    if by_capacity <= by_scheduler:
        return by_capacity, "capacity", plan
    return by_scheduler, "scheduler", plan


# ---- steps ----------------------------------------------------------------------------------------


def continuous_step(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    batch: FloatArray | float,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    arrivals_in_time: bool = False,
    seen_by_a_decoder: bool | FloatArray = False,
) -> StepMix:
    """The steady steps of one stage with ``batch / pp`` decoding sequences (one entry per batch) and their
    share of prompts, whole (``clustersim.serving.whole_prompts``): the mean step, an arrival's wait and the
    step that admits it; ``arrivals_in_time``: prompts arrive in time (a server's Poisson stream), not as
    requests finish; ``seen_by_a_decoder``: the steps as one decoding request sees them, itself and the others in
    flight decoding, the prompts as many (``clustersim.serving.latency``); per entry where an array."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    b = np.asarray(batch, dtype=np.float64).reshape(-1) / system.pp
    lengths, formats = (request.input_tokens, request.output_tokens), (request.precision, request.kv)
    decoders = b + np.asarray(seen_by_a_decoder, dtype=np.float64)
    return step_mix(model, system, lengths, formats, decoders, b / request.output_tokens, cal, profile,
                    arrivals_in_time, decode_context_tokens=request.decode_context_tokens,
                    prompt_pairs=request.prompt_pairs(model),
                    prompt_cv2=request.prompt_cv2(profile.token_budget(system.system.accelerator.id)))  # fmt: skip


def request_steps(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    decoders: FloatArray | float,
    prompts: FloatArray | float,
    context_tokens: float,
    cal: InferenceCalibration,
    engine: EngineProfile,
) -> StepTimes:
    """One stage's steps of ``decoders`` decoding sequences at ``context_tokens`` and ``prompts`` whole prompts of
    ``request`` (their attention over the request set's lengths, ``Request.prompt_pairs``); arrays broadcast."""
    n = request.input_tokens
    return step_times(
        model, system, request.precision, request.kv, decode_sequences=decoders, decode_context_tokens=context_tokens,
        prefill_tokens=np.multiply(prompts, n), prefill_sequences=prompts, prompt_tokens=n, cal=cal, engine=engine,
        prompt_pairs=request.prompt_pairs(model),
    )  # fmt: skip


def _static_steps(
    model: Transformer, system: ServingSystem, request: Request, batch: FloatArray, cal: InferenceCalibration,
    engine: EngineProfile,
) -> tuple[StepTimes, StepTimes]:  # fmt: skip
    b = batch / system.pp
    context = request.input_tokens + request.output_tokens / 2.0  # no decode in the prefill: for the prompts' bucket
    prefill = request_steps(model, system, request, 0.0 * b, b, context, cal, engine)
    decode = request_steps(model, system, request, b, 0.0, context, cal, engine)
    return prefill, decode


def throughput_per_replica(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    batch: FloatArray,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> FloatArray:
    """Output tokens/s of one replica at each batch (sequences in flight)."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    if request.batching is Batching.STATIC:
        prefill, decode = _static_steps(model, system, request, batch, cal, profile)
        o = request.output_tokens
        return np.asarray(batch / system.pp * o / (prefill.step_s + o * decode.step_s), dtype=np.float64)
    step = continuous_step(model, system, request, batch, cal, engine=profile).mean
    return np.asarray(batch / system.pp / step.step_s)


@functools.lru_cache(maxsize=256)
def _grid(max_batch: int) -> FloatArray:
    """Batches 1..max_batch, geometric, whole sequences (cached: callers must not modify it)."""
    return np.unique(np.round(np.geomspace(1, max_batch, GRID_POINTS)))


# ---- estimates ------------------------------------------------------------------------------------


def estimate_offline(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    *,
    batch: int | None = None,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> ServingEstimate:
    """Output tokens/s of the whole system on ``engine`` (default: TensorRT-LLM) at ``batch`` sequences
    per replica, or at the best batch that fits."""
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    max_batch, limit, plan = batch_limit(model, system, request, cal, profile)
    if batch is not None:
        if batch < 1 or batch > max_batch:
            raise ClusterSimError(
                f"batch: {batch} is outside 1..{max_batch}, the sequences per replica that fit ({limit}-limited)"
            )
        chosen, reason = batch, "requested"
    else:
        grid = _grid(max_batch)
        rates = throughput_per_replica(model, system, request, grid, cal, profile)
        best = int(np.argmax(rates))
        # Within 0.5% of the peak counts as the peak: prefer the smaller batch (lower latency).
        best = int(np.flatnonzero(rates >= rates[best] * 0.995)[0])
        chosen = int(grid[best])
        reason = limit if chosen == max_batch else "throughput peak"
    return make_estimate(model, system, request, plan, float(chosen), max_batch, reason, "offline", cal, profile)


def make_estimate(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    plan: MemoryPlan,
    batch: float,
    max_batch: int,
    reason: str,
    scenario: str,
    cal: InferenceCalibration,
    engine: EngineProfile,
    rate_per_s: float | None = None,
    ttft_s: float | None = None,
    steady: StepTimes | None = None,
    tpot_s: float | None = None,
) -> ServingEstimate:
    """The estimate at ``batch`` sequences per replica; a server scenario passes its rate, TTFT and TPOT (its step
    is the one a decoding request sees: itself and the others in flight, ``continuous_step``); a closed loop its
    rate, TTFT and ``steady`` step (one entry). ``tpot_s`` None: the step's."""
    o = request.output_tokens
    static = steady is None and request.batching is Batching.STATIC
    if steady is not None:
        step = steady
        step_s = float(step.step_s[0])
        first = float("nan")  # the caller's ttft_s
        per_replica = batch / system.pp / step_s
    elif static:
        prefill, step = _static_steps(model, system, request, np.asarray([batch]), cal, engine)
        first = float(prefill.step_s[0]) * system.pp
        step_s = float(step.step_s[0])
        per_replica = batch / system.pp * o / (float(prefill.step_s[0]) + o * step_s)
    else:
        # The steady step, and the step that admits one more request (its first token's).
        server = scenario == "server"
        mix = continuous_step(model, system, request, batch, cal, engine, server, seen_by_a_decoder=server)
        step, step_s = mix.mean, float(mix.mean.step_s[0])
        first = float(mix.admitting.step_s[0]) * system.pp + float(mix.wait_s[0])
        per_replica = batch / system.pp / step_s
    return ServingEstimate(
        model=model.name,
        system=system.name,
        device=system.device_name,
        tp=system.tp,
        pp=system.pp,
        dp=system.dp,
        attention_dp=system.attention_dp,
        moe_exchange=system.moe_exchange,
        nodes=system.system.num_nodes,
        precision=request.precision.value,
        kv_precision=request.kv.value,
        batching=request.batching.value,
        engine=engine.name,
        scenario=scenario,
        input_tokens=request.input_tokens,
        output_tokens=o,
        decode_context_tokens=request.input_tokens + o / 2.0 if static else request.decode_context_tokens,
        batch=round(batch),
        max_batch=max_batch,
        batch_limited_by=reason,
        weights_bytes_per_device=plan.weights_bytes,
        kv_bytes_per_token_per_device=plan.kv_bytes_per_token,
        kv_capacity_tokens_per_device=plan.kv_capacity_tokens,
        step_s=step_s,
        gemm_compute_s=float(step.gemm_compute_s[0]),
        gemm_memory_s=float(step.gemm_memory_s[0]),
        decode_attention_s=float(step.decode_attention_s[0]),
        prefill_attention_s=float(step.prefill_attention_s[0]),
        elementwise_s=float(step.elementwise_s[0]),
        communication_s=float(step.communication_s[0]),
        overhead_s=float(step.overhead_s[0]),
        memory_bound_share=float(step.memory_bound_s[0]) / step_s,
        output_tokens_per_s=(per_replica * system.dp if rate_per_s is None else rate_per_s * o),
        ttft_s=first if ttft_s is None else ttft_s,
        tpot_s=step_s * system.pp if tpot_s is None else tpot_s,
        request_rate_per_s=(per_replica * system.dp / o if rate_per_s is None else rate_per_s),
        notes=request.notes(model) + deployment_notes(model, system, request, cal, engine, plan.kv_capacity_tokens),
    )


# ---- comparison -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Comparison:
    """Two systems on one workload, and the gain split into a same-batch part and a batch part."""

    first: ServingEstimate
    second: ServingEstimate
    ratio: float
    same_batch_ratio: float
    batch_ratio: float
    reasons: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "first": self.first.to_json(),
            "second": self.second.to_json(),
            "ratio": self.ratio,
            "same_batch_ratio": self.same_batch_ratio,
            "batch_ratio": self.batch_ratio,
            "reasons": list(self.reasons),
        }


def compare_offline(
    model: Transformer,
    first: ServingSystem,
    second: ServingSystem,
    request: Request,
    *,
    batch: int | None = None,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> Comparison:
    """Offline throughput on two systems; why the second is faster or slower (bandwidth vs batch). Each
    system runs ``engine`` (refused where it does not run), or without one its family's default engine."""
    cal = default_calibration() if cal is None else cal
    profile_a, profile_b = (engine_profile(engine, system.family) for system in (first, second))
    a = estimate_offline(model, first, request, batch=batch, cal=cal, engine=profile_a)
    b = estimate_offline(model, second, request, batch=batch, cal=cal, engine=profile_b)
    same = estimate_offline(model, second, request, batch=min(a.batch, b.max_batch), cal=cal, engine=profile_b)
    ratio = b.output_tokens_per_s / a.output_tokens_per_s
    same_ratio = same.output_tokens_per_s / a.output_tokens_per_s
    peak = second.peak_flop_per_s(request.precision) / first.peak_flop_per_s(request.precision)
    hbm_a, hbm_b = first.system.memory_bandwidth_bytes_per_s, second.system.memory_bandwidth_bytes_per_s
    reasons = (
        f"at the same batch ({same.batch}): {same_ratio:.2f}x, from {hbm_b / 1e12:.2f} "
        f"vs {hbm_a / 1e12:.2f} TB/s HBM ({hbm_b / hbm_a:.2f}x) and "
        f"{peak:.2f}x dense {request.precision.value} peak; memory-bound share {a.memory_bound_share:.0%} vs "
        f"{same.memory_bound_share:.0%}",
        f"batch: {a.batch} ({a.batch_limited_by}, KV room {a.kv_capacity_tokens_per_device:,.0f} tokens/device) vs "
        f"{b.batch} ({b.batch_limited_by}, {b.kv_capacity_tokens_per_device:,.0f}): {ratio / same_ratio:.2f}x more",
        f"replicas: {a.dp} x tp{a.tp} pp{a.pp} vs {b.dp} x tp{b.tp} pp{b.pp}",
    )
    return Comparison(a, b, ratio, same_ratio, ratio / same_ratio, reasons)
