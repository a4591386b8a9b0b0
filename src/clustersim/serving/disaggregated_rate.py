"""The server scenario on a disaggregated deployment, in closed form: the highest request rate both pools keep
within their latency targets, and the latency there.

The two pools (``clustersim.serving.disaggregation``) work apart, so each has its own rate:

* **Prefill.** Its workers run the prompts and make each first token: a server of one-token requests, priced by the
  aggregated closed forms (``latency.max_rate``: the steps' prompts whole or chunked, the queue for the token
  budget, the TTFT percentile) against the TTFT target less the KV cache's transfer; TPOT does not bind.
* **Decode.** A request's KV cache arrives and it decodes its other ``o - 1`` tokens; no prompt runs in these steps.
  At ``B`` sequences a worker a step takes ``s(B)`` (``estimate.request_steps``: decoders only, at their mean
  context), and Little's law gives the worker's rate, ``B / ((o - 1) s(B))``. A decoding request sees ``s(B + 1)``:
  the batch and itself. Its TPOT is the mean over its own steps, hundreds of them, so a percentile target is held at
  that mean. The largest ``B`` whose ``s(B + 1)`` meets the TPOT target sets the pool's rate, at most the sequences
  the KV cache holds (each reserved as the engine reserves them), the engine's sequence cap and its token budget (one
  token a sequence).

The deployment serves the smaller rate; TTFT is the prefill pool's mean at that rate plus the transfer, TPOT the
decode step a request sees there. DistServe (Zhong et al., OSDI 2024, arXiv 2401.09670, section 3) sizes the two
pools the same way: each pool's goodput under its own latency target, the deployment's the smaller.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.serving.engine import FloatArray, InferenceCalibration, ServingSystem, default_calibration, memory_plan
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import Request, deployment_profile, request_steps
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.memory import reserved_tokens, sequences_held
from clustersim.workload.transformer import Transformer

GRID_POINTS = 256  # decode batches priced per pool, geometric from one sequence to the cap


@dataclass(frozen=True)
class DisaggregatedRate:
    """A disaggregated deployment at the highest rate meeting its targets (rates: requests/s, whole deployment)."""

    rate_per_s: float
    prefill_rate_per_s: float
    decode_rate_per_s: float
    bound: str  # the pool whose rate binds: "prefill" or "decode"
    output_tokens_per_s: float
    ttft_s: float  # mean: the prefill pool's TTFT plus the transfer
    tpot_s: float  # the decode step a request sees at the rate
    transfer_s: float
    decode_batch: float  # sequences in flight per decode worker at the rate
    decode_max_batch: int
    decode_limited_by: str  # what caps the decode batch: "tpot target", "capacity", "scheduler" or "token budget"

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class DisaggregatedLatency:
    """A disaggregated deployment at a request rate (whole deployment): the means a request sees."""

    rate_per_s: float
    ttft_s: float  # the prefill pool's TTFT plus the transfer
    tpot_s: float  # the decode step a request sees
    decode_batch: float  # sequences in flight per decode worker
    output_tokens_per_s: float

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class _DecodeCurve:
    """One decode worker's steps over its batch (a request's own seat included: ``seen_s``)."""

    batch: FloatArray
    step_s: FloatArray
    seen_s: FloatArray
    cap: int
    limited_by: str

    def rate_per_worker(self, decode_tokens: float) -> FloatArray:
        """Requests/s a worker finishes at each batch (Little's law), made non-decreasing in the batch."""
        return np.maximum.accumulate(np.asarray(self.batch / (decode_tokens * self.step_s), dtype=np.float64))


def _decode_curve(
    model: Transformer,
    pool: ServingSystem,
    request: Request,
    cal: InferenceCalibration,
    decode_engine: str | EngineProfile | None,
) -> _DecodeCurve:
    """The decode worker's steps from one sequence to its cap (KV capacity, sequence cap, token budget)."""
    engine = deployment_profile(decode_engine, model, pool, request)
    plan = memory_plan(model, pool, request.precision, request.kv, cal, engine)
    per_sequence = reserved_tokens(request.input_tokens, request.output_tokens, engine, model)
    groups, chip = pool.attention_dp, pool.system.accelerator.id
    held = sequences_held(model, request.kv, plan.kv_capacity_tokens, per_sequence, engine.state_pool, pool.tp)
    caps = {
        "capacity": held * groups,
        "scheduler": engine.sequence_cap(chip) * groups,
        "token budget": engine.token_budget(chip) * groups,
    }
    limited_by = min(caps, key=lambda k: caps[k])
    cap = caps[limited_by]
    if cap < 1:
        raise ClusterSimError(
            f"decode pool: one sequence of {request.input_tokens:g} + {request.output_tokens:g} tokens does not fit "
            f"the KV cache of a tp {pool.tp} worker on {pool.device_name}; give the decode pool a larger tp",
            field="--disaggregate",
        )
    batch = np.unique(np.concatenate((np.geomspace(1.0, cap, GRID_POINTS), [float(cap)])))
    both = np.concatenate((batch, batch + 1.0))
    steps = request_steps(model, pool, request, both, 0.0, request.decode_context_tokens, cal, engine).step_s
    n = batch.size
    return _DecodeCurve(batch, np.asarray(steps[:n]), np.asarray(steps[n:]), cap, limited_by)


def _decode_at(curve: _DecodeCurve, per_worker: FloatArray, rate_per_worker: float) -> tuple[float, float]:
    """The batch whose Little's-law rate is ``rate_per_worker`` and the step a request sees there."""
    batch = float(np.interp(rate_per_worker, per_worker, curve.batch))
    return batch, float(np.interp(batch, curve.batch, curve.seen_s))


def _one_token(request: Request) -> Request:
    """What the prefill pool serves of ``request``: its prompt and first token."""
    return replace(request, output_tokens=1.0, output_tokens_in_flight=None, output_tokens_quantiles=None)


def disaggregated_server(
    model: Transformer,
    prefill: ServingSystem,
    decode: ServingSystem,
    request: Request,
    rate_per_s: float,
    *,
    transfer_s: float,
    prefill_engine: str | EngineProfile | None = None,
    decode_engine: str | EngineProfile | None = None,
    cal: InferenceCalibration | None = None,
) -> DisaggregatedLatency:
    """The mean TTFT and TPOT of ``request`` at ``rate_per_s`` requests/s on the two pools (the module's closed
    form); a rate past either pool's saturation is refused in one line."""
    cal = default_calibration() if cal is None else cal
    curve = _decode_curve(model, decode, request, cal, decode_engine) if request.output_tokens > 1 else None
    return _at_rate(model, prefill, decode, request, rate_per_s, transfer_s, prefill_engine, curve, cal)


def _at_rate(
    model: Transformer,
    prefill: ServingSystem,
    decode: ServingSystem,
    request: Request,
    rate_per_s: float,
    transfer_s: float,
    prefill_engine: str | EngineProfile | None,
    curve: _DecodeCurve | None,
    cal: InferenceCalibration,
) -> DisaggregatedLatency:
    """``disaggregated_server`` on a decode worker's curve made once (None: one-token requests never decode)."""
    if not rate_per_s > 0:
        raise ClusterSimError(f"rate: must be positive requests/s, got {rate_per_s}", field="rate", value=rate_per_s)
    try:
        first = estimate_server(model, prefill, _one_token(request), rate_per_s, cal=cal, engine=prefill_engine)
    except ClusterSimError as exc:
        raise ClusterSimError(f"prefill pool: {exc}", field=exc.field, value=exc.value) from None
    batch, tpot = 0.0, 0.0
    if curve is not None:
        per_worker = curve.rate_per_worker(request.output_tokens - 1.0)
        if rate_per_s / decode.dp > per_worker[-1] * (1.0 + 1e-9):
            raise ClusterSimError(
                f"rate: {rate_per_s:g} requests/s exceeds the decode pool's saturation rate of "
                f"{per_worker[-1] * decode.dp:.3g} requests/s ({curve.cap} sequences a worker, its "
                f"{curve.limited_by})",
                field="rate",
                value=rate_per_s,
            )
        batch, tpot = _decode_at(curve, per_worker, rate_per_s / decode.dp)
    return DisaggregatedLatency(rate_per_s, first.ttft_s + transfer_s, tpot, batch, rate_per_s * request.output_tokens)


def disaggregated_max_rate(
    model: Transformer,
    prefill: ServingSystem,
    decode: ServingSystem,
    request: Request,
    *,
    transfer_s: float,
    ttft_target_s: float,
    tpot_target_s: float,
    prefill_engine: str | EngineProfile | None = None,
    decode_engine: str | EngineProfile | None = None,
    cal: InferenceCalibration | None = None,
    percentile: float | None = None,
) -> DisaggregatedRate:
    """The highest rate ``prefill`` and ``decode`` (each pool's workers its ``dp``) serve ``request`` within the
    targets, ``transfer_s`` the KV cache's move between them (``Deployment.transfer_s``); ``percentile`` applies to
    the prefill pool's TTFT (the decode pool's TPOT is each request's mean over its steps); each pool on its engine."""
    cal = default_calibration() if cal is None else cal
    if not ttft_target_s > transfer_s:
        raise ClusterSimError(
            f"ttft_target_s: {ttft_target_s:g} s leaves nothing for the prompt after the KV transfer's "
            f"{transfer_s:.3g} s",
            field="ttft_target_s",
            value=ttft_target_s,
        )
    one_token = _one_token(request)
    first = max_rate(
        model, prefill, one_token, ttft_target_s=ttft_target_s - transfer_s, tpot_target_s=math.inf, cal=cal,
        engine=prefill_engine, percentile=percentile,
    )  # fmt: skip
    prefill_rate = first.request_rate_per_s
    decode_tokens = request.output_tokens - 1.0
    curve = _decode_curve(model, decode, request, cal, decode_engine)
    meets = curve.seen_s <= tpot_target_s
    if not meets.any():
        raise ClusterSimError(
            f"tpot_target_s: a decode worker's lone sequence takes {curve.seen_s[0]:.3g} s a token, over the target "
            f"{tpot_target_s:g} s; give the decode pool a larger tp",
            field="tpot_target_s",
            value=tpot_target_s,
        )
    top = int(np.flatnonzero(meets)[-1])
    limited_by = curve.limited_by if top == curve.batch.size - 1 else "tpot target"
    per_worker = curve.rate_per_worker(max(decode_tokens, 1.0))
    decode_rate = math.inf if decode_tokens <= 0 else float(per_worker[top]) * decode.dp
    rate = min(prefill_rate, decode_rate)
    at = _at_rate(
        model, prefill, decode, request, rate, transfer_s, prefill_engine, curve if decode_tokens > 0 else None, cal
    )
    return DisaggregatedRate(
        rate_per_s=rate,
        prefill_rate_per_s=prefill_rate,
        decode_rate_per_s=decode_rate,
        bound="prefill" if prefill_rate <= decode_rate else "decode",
        output_tokens_per_s=at.output_tokens_per_s,
        ttft_s=at.ttft_s,
        tpot_s=at.tpot_s,
        transfer_s=transfer_s,
        decode_batch=at.decode_batch,
        decode_max_batch=curve.cap,
        decode_limited_by=limited_by,
    )
