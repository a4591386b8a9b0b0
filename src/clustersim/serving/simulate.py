"""A request-level serving simulator: a deployment's requests one by one, its engine step by step.

Where the closed forms (``clustersim.serving.estimate``, ``.latency``, ``.concurrency``) take mean lengths
and a steady state, this runs the requests themselves: lengths drawn per request from a request set
(``clustersim.serving.sim_requests``), arrivals from a Poisson process at a rate, a closed loop of N
clients each sending its next request when the last is done (as load generators' ``--max-concurrency``
does), or a trace; each of the ``dp`` replicas runs its engine's scheduler (``.sim_scheduler``:
continuous batching with chunked prefill under the engine's token budget and sequence cap, paged KV with
preemption, or static batches) with every step priced by the roofline step model (``.sim_steps``). An
open loop sends each request to a replica at random; a closed loop's clients are spread evenly over them.
The run reports latency percentiles, throughput and goodput (``.sim_report``).

**Pipeline parallel** (``pp`` > 1): as vLLM runs it (one scheduler, a "virtual engine", per micro-batch in
flight, ``pp`` of them keeping the stages busy), each replica is ``pp`` engines, each with its own batch, its
share ``1 / pp`` of the replica's KV cache and the engine's caps, whose every step passes through the ``pp``
stages one after another (``pp`` times a stage's step, each with its send to the next stage); requests go
to them as to replicas. The closed forms' ``batch / pp`` sequences a stage and ``pp`` stage steps a token.

An engine that never mixes prompts and decodes in a step (``mixed_steps`` false: vLLM V0 without chunked
prefill) runs the prompts it can admit in a step of their own, its decoders waiting, and decodes when no prompt
fits. Limits: engines without static-shape buckets (the GPU profiles; the Neuron ones pad to compiled shapes).
The KV cache per replica is the memory plan's (``clustersim.serving.engine.memory_plan``), counted in the engine's
blocks; a windowed layer's smaller holding is not credited, and a hybrid model's request holds its Gated DeltaNet state
as whole blocks beside its tokens', or a slot of the states' own pool (``clustersim.serving.memory.state_room``). A
request whose prompt and output reach the model's context stops there (as an engine stops at its ``max_model_len``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import InferenceCalibration, ServingSystem, default_calibration, memory_plan
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import Request, deployment_profile
from clustersim.serving.first_token import check_lag
from clustersim.serving.first_token import first_token_lag_steps as first_token_lag_steps_of
from clustersim.serving.formats import check_formats
from clustersim.serving.memory import state_room
from clustersim.serving.routing import check_routing, prefill_price, route
from clustersim.serving.sim_report import SimulationResult, Slo
from clustersim.serving.sim_requests import RequestLengthSampler, poisson_arrivals, request_sampler
from clustersim.serving.sim_scheduler import Arrivals, ReplicaLog, SchedulerLimits, run_replica
from clustersim.serving.sim_steps import PipelinedSteps, Steps, step_table
from clustersim.serving.speculative import Speculation, SpeculativeSteps, head_profile, steps_for_outputs
from clustersim.serving.traces import HASH_BLOCK_TOKENS, Trace
from clustersim.workload.transformer import Transformer

DEFAULT_REQUESTS = 2000
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Load:
    """How requests arrive: at ``rate_per_s`` (Poisson), from ``concurrency`` clients in a closed loop
    (their first requests spread evenly over ``ramp_up_s``), or as a ``trace`` says. Exactly one."""

    rate_per_s: float | None = None
    concurrency: int | None = None
    trace: Trace | None = None
    ramp_up_s: float = 0.0

    def __post_init__(self) -> None:
        given = [name for name in ("rate_per_s", "concurrency", "trace") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ClusterSimError(
                f"load: give exactly one of a rate (--rate), a concurrency (--concurrency) or a trace (--trace); "
                f"got {', '.join(given) or 'none'}",
                field="--rate",
            )
        if self.rate_per_s is not None and not (self.rate_per_s > 0 and math.isfinite(self.rate_per_s)):
            raise ClusterSimError(f"--rate: must be positive requests/s, got {self.rate_per_s}", field="--rate")
        if self.concurrency is not None and self.concurrency < 1:
            raise ClusterSimError(
                f"--concurrency: must be at least 1 client, got {self.concurrency}", field="--concurrency"
            )
        if not self.ramp_up_s >= 0:
            raise ClusterSimError(f"ramp_up_s: must be >= 0 s, got {self.ramp_up_s}", field="ramp_up_s")

    @property
    def kind(self) -> str:
        return "poisson" if self.rate_per_s is not None else "closed_loop" if self.concurrency else "trace"


def simulate(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    load: Load,
    *,
    requests: int = DEFAULT_REQUESTS,
    sampler: RequestLengthSampler | None = None,
    seed: int = 0,
    prefix_hit_rate: float | None = None,
    max_batch: int | None = None,
    kv_capacity_tokens: float | None = None,
    slo: Slo | None = None,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    progress: Callable[[int, int], None] | None = None,
    speculation: Speculation | None = None,
    admission: str | None = None,
    first_token_lag_steps: int | None = None,
    routing: str = "random",
) -> SimulationResult:
    """Simulate ``requests`` requests (a trace: its own) on ``system`` served by ``engine``.

    ``sampler`` draws the lengths (default: every request at ``request``'s lengths); ``max_batch`` caps
    the sequences in flight per replica below the engine's cap (static batching: the batch);
    ``kv_capacity_tokens`` replaces the memory plan's KV room per replica (a pipeline's engines share it);
    ``progress(done, total)`` is called as requests finish; ``speculation``: speculative decoding
    (``clustersim.serving.speculative``: a scheduler step is a verify step, a request's output takes
    ``1 + ceil((output - 1) / E)`` of them, each gap between its tokens a step over ``E``);
    ``prefix_hit_rate``: the share of each prompt found in the prefix cache; None: a trace's own, each request's
    leading blocks still in its replica's prefix cache when it arrives (``traces.PrefixCache`` of the replica's KV
    capacity, ``routing.route``), where the trace names its prompt blocks, else 0;
    ``routing``: which replica an open loop's request goes to (``clustersim.serving.routing``: ``random`` or
    ``cache-aware``);
    ``first_token_lag_steps``: the serving stack sends a request's first token with the responses of that many
    steps later (``SchedulerLimits.first_token_lag_steps``; None: the engine's, ``clustersim.serving.first_token``).
    Same inputs and ``seed``, same result.
    """
    if system.attention_dp > 1:  # its groups schedule their own requests: not this scheduler's one queue
        raise ClusterSimError(
            f"attention_dp: the request simulator schedules one queue per replica; attention dp "
            f"{system.attention_dp} (groups scheduling their own requests) is priced by the closed forms only",
            field="attention_dp",
            value=system.attention_dp,
        )
    started = time.perf_counter()
    cal = default_calibration() if cal is None else cal
    profile = deployment_profile(engine, model, system, request)
    hashes = load.trace.prefix_hashes if load.trace is not None and prefix_hit_rate is None else None
    hit = prefix_hit_rate or 0.0
    check_run(system, requests, hit, max_batch, kv_capacity_tokens, load, routing)
    lag = first_token_lag_steps_of(profile) if first_token_lag_steps is None else check_lag(first_token_lag_steps)
    check_formats(request.precision, request.kv, system.system.accelerator, profile.framework)
    rng = np.random.default_rng(seed)
    inputs, outputs = draw_lengths(model, request, load, sampler, rng, requests)
    cap = 0.0 if load.trace is not None else output_cap(request, sampler)
    reserve = reserve_tokens(model, request, admission or profile.kv_admission, inputs, outputs, cap)
    table, limits = replica_engine(
        model, system, request, profile, cal, inputs, outputs,
        prefix_hit_rate=hit, max_batch=max_batch, kv_capacity_tokens=kv_capacity_tokens,
        speculation=speculation, reserve=reserve, first_token_lag_steps=lag,
    )  # fmt: skip
    steps = outputs if speculation is None else steps_for_outputs(outputs, speculation)
    engines = system.dp * system.pp  # a pipelined replica: one engine per micro-batch in flight
    logs = run_replicas(table, limits, inputs, steps, load, engines, inputs.size, rng, progress, hashes, routing)
    result = merge_logs(logs, inputs, outputs, inputs.size, started, slo, load)
    prefix = prefix_cache_summary(logs, inputs, traced=hashes is not None)
    result = replace(result, setup=result.setup | {"prefix_cache": prefix, "routing": routing})
    if speculation is None:
        return result
    gap = speculation.tokens_per_step  # a verify step's tokens arrive together: their mean gap
    setup = result.setup | {"speculation": speculation.to_json()}
    return replace(result, step_s=result.step_s / gap, resume_gaps_s=result.resume_gaps_s, setup=setup)


def draw_lengths(
    model: Transformer,
    request: Request,
    load: Load,
    sampler: RequestLengthSampler | None,
    rng: np.random.Generator,
    requests: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Each request's prompt and output tokens (a trace's own), cut to the model's context unless allowed."""
    sampler = sampler or request_sampler(None, request.input_tokens, request.output_tokens)
    if load.trace is not None:
        inputs, outputs = load.trace.input_tokens.copy(), load.trace.output_tokens.copy()
    else:
        inputs, outputs = sampler.draw(rng, requests)
    context = model.context_tokens
    if context is not None and not request.beyond_context:
        inputs = np.minimum(inputs, context - 1)
        outputs = np.maximum(np.minimum(outputs, context - inputs), 1)
    return inputs, outputs


ADMISSIONS = ("paged", "reserve")


def output_cap(request: Request, sampler: RequestLengthSampler | None) -> float:
    """The output cap a request asks for (``max_tokens``): its set's longest output where that is bounded (the
    benchmark's generation cap: MLPerf Llama 2 70B's 1,024), else 0 (each request asks for its own length)."""
    found = (sampler or request_sampler(None, request.input_tokens, request.output_tokens)).output.max_tokens
    return found if math.isfinite(found) else 0.0


def reserve_tokens(
    model: Transformer, request: Request, admission: str, inputs: np.ndarray, outputs: np.ndarray, cap: float
) -> np.ndarray | None:
    """Per request, the KV tokens a ``reserve`` admission takes (its prompt and the larger of its output and
    ``cap``, within the model's context); None for ``paged``."""
    if admission not in ADMISSIONS:
        raise ClusterSimError(
            f"--admission: {admission!r} is not one of {', '.join(ADMISSIONS)}", field="--admission", value=admission
        )
    if admission == "paged":
        return None
    tokens = inputs + np.maximum(outputs, int(cap))
    context = model.context_tokens
    if context is not None and not request.beyond_context:
        tokens = np.minimum(tokens, np.maximum(context, inputs + outputs))
    return np.asarray(tokens, dtype=np.int64)


def replica_engine(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    profile: EngineProfile,
    cal: InferenceCalibration,
    inputs: np.ndarray,
    outputs: np.ndarray,
    *,
    prefix_hit_rate: float = 0.0,
    max_batch: int | None = None,
    kv_capacity_tokens: float | None = None,
    kv_arrives: bool = False,
    speculation: Speculation | None = None,
    reserve: np.ndarray | None = None,
    first_token_lag_steps: int = 0,
) -> tuple[Steps, SchedulerLimits]:
    """One replica's priced steps and scheduler limits for requests of these lengths (``reserve``: each one's
    KV reservation, ``reserve_tokens``); the longest request, or reservation, must fit its KV cache (else a
    ``ClusterSimError``)."""
    if kv_capacity_tokens is None:
        kv_capacity_tokens = memory_plan(model, system, request.precision, request.kv, cal, profile).kv_capacity_tokens
    kv_capacity_tokens /= system.pp  # each of a pipeline's micro-batch engines holds its share
    # a hybrid's states: a pool of their own (a cap on sequences) or whole blocks of the cache's
    room = state_room(model, request.kv, kv_capacity_tokens, profile.state_pool, system.tp)
    kv_capacity_tokens, state_slots, shared = room
    block = profile.kv_block_tokens
    blocks = int(kv_capacity_tokens // block)
    state = math.ceil(shared / block)
    longest = int((-(-(inputs + outputs) // block)).max()) + state
    if longest > blocks:
        raise ClusterSimError(
            f"kv cache: the longest request ({int((inputs + outputs).max()):,} tokens) needs {longest * block:,} "
            f"tokens of KV cache, more than the {blocks * block:,} a replica holds; use a larger tp, an fp8 KV cache "
            "or shorter requests",
            field="kv_capacity_tokens",
        )
    if reserve is not None and int((-(-reserve // block)).max()) + state > blocks:
        raise ClusterSimError(
            f"--admission reserve: a request's prompt and output cap ({int(reserve.max()):,} tokens) need more KV "
            f"cache than the {blocks * block:,} tokens a replica holds; use --admission paged or a larger tp",
            field="--admission",
            value="reserve",
        )
    static = request.batching is Batching.STATIC
    chip = system.system.accelerator.id
    cap = profile.sequence_cap(chip) if max_batch is None else min(profile.sequence_cap(chip), max_batch)
    if state_slots < cap:  # the states' own pool holds fewer sequences
        if state_slots < 1:
            raise ClusterSimError(
                "kv cache: one sequence's recurrent state needs more than the states' pool of a replica; use a "
                "larger tp or an engine that shares one pool",
                field="kv_capacity_tokens",
            )
        cap = math.floor(state_slots)
    held = () if reserve is None else tuple(reserve.tolist())
    limits = SchedulerLimits(
        profile.token_budget(chip), cap, block, blocks, prefix_hit_rate, static, kv_arrives, held,
        first_token_lag_steps, profile.mixed_steps, profile.scheduler_steps, profile.receive_steps, state_blocks=state,
    )  # fmt: skip
    biggest = int(inputs.max()) * cap if static else profile.token_budget(chip)
    verified = 0 if speculation is None else cap * speculation.draft_tokens  # the drafts the target verifies
    longest_s = float((inputs + outputs).max()) + 2.0
    table = step_table(
        model, system, request.precision, request.kv,
        max_tokens=max(biggest, cap) + verified, max_sequences=cap, max_context=longest_s, cal=cal, engine=profile,
    )  # fmt: skip
    if speculation is None:
        return (PipelinedSteps(table, system.pp) if system.pp > 1 else table), limits
    draft = step_table(
        speculation.drafter(model), system, request.precision, request.kv,
        max_tokens=max(biggest, cap), max_sequences=cap, max_context=longest_s, cal=cal,
        engine=profile if speculation.draft is not None else head_profile(profile),
    )  # fmt: skip
    speculating = SpeculativeSteps(table, draft, speculation)
    return (PipelinedSteps(speculating, system.pp) if system.pp > 1 else speculating), limits


def check_run(
    system: ServingSystem,
    requests: int,
    hit: float,
    max_batch: int | None,
    kv_tokens: float | None,
    load: Load,
    routing: str = "random",
) -> None:
    """Refuse what the simulator cannot run, naming the option."""
    if check_routing(routing) != "random" and load.concurrency is not None:
        raise ClusterSimError(
            f"--routing {routing}: a closed loop's clients each keep to one replica; route an open loop (--rate or "
            "--trace)",
            field="--routing",
            value=routing,
        )
    if load.trace is None and not 1 <= requests <= MAX_REQUESTS:
        raise ClusterSimError(f"--requests: must be 1..{MAX_REQUESTS:,}, got {requests}", field="--requests")
    if not 0.0 <= hit < 1.0:
        raise ClusterSimError(
            f"--prefix-hit: a prefix cache hit rate is a fraction of each prompt in [0, 1), got {hit}",
            field="--prefix-hit",
            value=hit,
        )
    if max_batch is not None and max_batch < 1:
        raise ClusterSimError(f"--batch: must be at least 1 sequence, got {max_batch}", field="--batch")
    if kv_tokens is not None and not kv_tokens > 0:
        raise ClusterSimError(f"kv_capacity_tokens: must be positive, got {kv_tokens}", field="kv_capacity_tokens")


def run_replicas(
    table: Steps,
    limits: SchedulerLimits,
    inputs: np.ndarray,
    outputs: np.ndarray,
    load: Load,
    dp: int,
    count: int,
    rng: np.random.Generator,
    progress: Callable[[int, int], None] | None,
    hashes: tuple[tuple[int, ...], ...] | None = None,
    routing: str = "random",
) -> list[ReplicaLog]:
    """Each of ``dp`` replicas' share of the requests, served: a closed loop's clients spread over the replicas,
    an open loop's requests sent as ``routing`` says (``clustersim.serving.routing``); ``hashes``: each
    request's prompt blocks (a trace's), whose cached prefix its replica's cache gives."""
    cached = None
    if load.concurrency is not None:
        clients = load.concurrency
        client = np.arange(count) % clients  # request k is client k's (mod clients) next one
        replica = client % dp
        starts = np.arange(clients) * load.ramp_up_s / clients
    else:
        times = load.trace.arrival_s if load.trace is not None else poisson_arrivals(rng, load.rate_per_s or 1.0, count)
        capacity_blocks = limits.kv_blocks * limits.block_tokens / HASH_BLOCK_TOKENS
        price = prefill_price(table, limits.token_budget)
        routed = route(routing, times, inputs, dp, rng, hashes=hashes, capacity_blocks=capacity_blocks, prefill_s=price)
        replica = routed.replica
        cached = routed.cached_tokens if hashes is not None else None
    done = 0

    def finished(n: int) -> None:
        nonlocal done
        done += n
        if progress is not None and (done % 100 == 0 or done == count):
            progress(done, count)

    ins, outs = inputs.tolist(), outputs.tolist()
    mine = limits if cached is None else replace(limits, cached_tokens=tuple(cached.tolist()))
    logs = []
    for r in range(dp):
        order = np.flatnonzero(replica == r)
        if order.size == 0:
            continue
        if load.concurrency is not None:
            first = starts[np.arange(load.concurrency) % dp == r][: order.size]
            arrivals = Arrivals(order.tolist(), None, first.tolist())
        else:
            arrivals = Arrivals(order.tolist(), times[order].tolist(), None)
        log = run_replica(table, mine, ins, outs, arrivals, finished)
        prompts = inputs[order]
        found = cached[order] if cached is not None else np.floor(limits.prefix_hit_rate * prompts)
        log.prefix_cached_tokens = int(np.minimum(found, prompts - 1).sum())
        logs.append(log)
    return logs


def prefix_cache_summary(logs: list[ReplicaLog], inputs: np.ndarray, *, traced: bool) -> dict[str, object]:
    """The run's prefix cache as its result reports it: where the hits came from (a trace's block hashes or a
    hit rate) and the share of all prompt tokens found cached."""
    cached = sum(log.prefix_cached_tokens for log in logs)
    return {"source": "trace" if traced else "rate", "cached_share": cached / float(inputs.sum())}


def per_request(logs: list[ReplicaLog], count: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Arrival, first token and finish times and preemptions of requests ``0..count-1``, from the replicas' logs."""
    arrival, first, finish = np.zeros(count), np.zeros(count), np.zeros(count)
    preempted = np.zeros(count, dtype=np.int64)
    for log in logs:
        for target, values in ((arrival, log.arrival_s), (first, log.first_token_s), (finish, log.finish_s)):
            keys = np.fromiter(values.keys(), dtype=np.int64, count=len(values))
            target[keys] = np.fromiter(values.values(), dtype=np.float64, count=len(values))
        for r, n in log.preemptions.items():
            preempted[r] = n
    return arrival, first, finish, preempted


def merge_logs(
    logs: list[ReplicaLog],
    inputs: np.ndarray,
    outputs: np.ndarray,
    count: int,
    started: float,
    slo: Slo | None,
    load: Load,
) -> SimulationResult:
    """The replicas' logs as one run, its requests in arrival order."""
    arrival, first, finish, preempted = per_request(logs, count)
    order = np.argsort(arrival, kind="stable")
    return SimulationResult(
        arrival_s=arrival[order],
        first_token_s=first[order],
        finish_s=finish[order],
        input_tokens=inputs[order],
        output_tokens=outputs[order],
        preemptions=preempted[order],
        step_s=np.asarray([s for log in logs for s in log.step_s], dtype=np.float64),
        step_tokens=np.asarray([b for log in logs for b in log.step_decoding], dtype=np.int64),
        resume_gaps_s=np.asarray([g for log in logs for g in log.resume_gaps_s], dtype=np.float64),
        steps=sum(log.steps for log in logs),
        wall_s=time.perf_counter() - started,
        slo=slo,
        setup={"arrivals": load.kind, "rate_per_s": load.rate_per_s, "concurrency": load.concurrency},
    )
