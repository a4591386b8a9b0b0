"""Prompts enter steps whole: the closed forms' step is the mean over how many prompts a step carries.

In a steady state each step carries ``b / o`` prompts on average (``b`` sequences in flight, ``o`` output
tokens each), but a prompt runs whole in the step that admits it, so most steps carry none and some one or
more. A step is a roofline, the larger of its GEMMs' compute and weight-read times, convex in its tokens: the
mean of the steps is above the step at the mean share (Jensen), by about a prompt's compute where a decode step
is memory-bound and a step with a prompt compute-bound. Llama 3.1 8B on one H100 with 25 sequences in flight
and 1,024-token prompts: 8.1 ms a step at the mean share, 10.3 ms over whole prompts, and the request
simulator's mean gap between tokens at that load (12 requests/s) 10.0 ms.

The count is Poisson: independent arrivals (a server's), or finishes of many independent requests (a closed
loop's, offline). An engine that schedules every ``scheduler_steps`` N steps (vLLM V0's multi-step) gathers N
steps' prompts onto its scheduling step: Poisson(N b / o) there and none on the other N - 1 (TensorRT-LLM's
attention-DP balancing with sparse arrivals admits prompts so too, every ``adp_balance_steps``:
``EngineProfile.admission_steps``). The step that
admits a request is a scheduling step carrying its prompt beside the others gathered. From ``MEAN_FIELD``
prompts on a scheduling step the count's spread is small beside its mean, and the step is priced at the mean.
A prompt longer than the engine's token budget is still taken whole, as the closed forms take it.

A request arriving at a busy engine waits for the next scheduling: the rest of the span between two (a step,
or N of them). It is likelier to arrive in a long span than a short one, so its mean wait is the span's mean
residual life, ``E[W^2] / 2 E[W]``, not half the mean span (at 12 requests/s on the H100 above: 6.2 ms against
4.1 ms). Over a request set's spread of prompt lengths a span carrying ``k`` prompts varies by ``k`` times one
prompt's variance (``prompt_cv2`` of its cost, the prompts that run whole): Azure's 2023 code trace (prompts: mean
2,048 tokens, median 1,469) at 2 and 4 requests/s, the server's TTFT +1.4% and -3.4% of the simulator's (-2.2% and
-9.4% at the mean length, 2026-12-03), ShareGPT at 10-30 requests/s -4.4% to -3.1% (-4.7% to -4.2%).

Prompts that arrive in time (a server's Poisson stream) are chained: a scheduling step carries those that came
during the span before it, so a long span (one with prompts) is followed by more prompts (``chained_counts``:
the count overdispersed, and the step admitting an arrival carrying those of the long span it likely landed in).
Finishes (a closed loop, offline) come per step and stay Poisson. A prompt over the engine's token budget runs
in chunks that later prompts queue behind (``clustersim.serving.latency``'s M/G/1 queue), and is not chained. On
the H100 above the server's TTFT went from 0.7-12.9% short of the simulator's at 4-16 requests/s to 0.7-2.4% (the
middle half of 4,000 requests, two seeds), its TPOT 1.2-4.2% short as before.

Against the request simulator in a steady state (one H100, Llama 3.1 8B, 1,024 + 256 tokens, Poisson arrivals at
4, 8, 12 and 16 requests/s, the middle half of 4,000 requests): the mean gap between tokens 7.84, 9.54, 12.30 and
17.81 ms against 7.94, 9.78, 12.80 and 19.22 simulated (at the mean share: 7.09, 7.56, 8.11 and 14.11).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np
import numpy.typing as npt

from clustersim.serving.engine import FloatArray, InferenceCalibration, ServingSystem, StepTimes, step_times
from clustersim.serving.engines import EngineProfile
from clustersim.serving.formats import ServingPrecision
from clustersim.workload.transformer import Transformer

MEAN_FIELD = 40.0  # prompts on a scheduling step from which the step is priced at the mean count
TAIL_SDS = 6.0  # Poisson counts priced up to the mean plus this many standard deviations and TAIL_PAD
TAIL_PAD = 2.0
NARROW = 4.0  # the counts of the narrow group (0 to 2 and the tail): a mean share under about 0.1
MAX_FEEDBACK = 0.95  # of a span on the next step's count (chained_counts): its variance at most ~10x the mean


@dataclass(frozen=True)
class StepMix:
    """The steps of one stage over the prompts they carry, one entry per batch: ``mean`` every step's mean,
    ``wait_s`` an arrival's mean wait for the next scheduling, ``scheduling`` a scheduling step's mean and
    ``admitting`` that of a scheduling step that also admits one more request (its first token's step)."""

    mean: StepTimes
    wait_s: FloatArray
    scheduling: StepTimes
    admitting: StepTimes


def prompt_counts(prompts_per_step: FloatArray, every: int, width: int | None = None) -> tuple[FloatArray, FloatArray]:
    """(counts, weights), each of shape (entries, K): the prompts a scheduling step carries and how often, for
    steady means ``prompts_per_step`` (one per entry) on an engine scheduling every ``every`` steps; each entry's
    weights sum to 1 and its mean count is ``every`` times its mean (the last column is the Poisson tail at its
    own mean), and count 0 is always the first column; ``width`` columns (None: as many as the widest needs)."""
    gathered = np.asarray(prompts_per_step, dtype=np.float64).reshape(-1) * every
    spread = gathered < MEAN_FIELD
    if width is None:
        width = int(max(_widths(gathered).max(), 2))
    k = np.arange(width, dtype=np.float64)
    pmf = _poisson_lumped(gathered[:, None], k)
    counts = np.broadcast_to(k, pmf.shape).copy()
    # the last column is the tail, from its count on, at the tail's mean count: the mean stays the Poisson's
    counts[:, -1] = _tail_count(pmf, gathered)
    pmf[~spread] = 0.0  # concentrated: the mean count, always, in the tail's column
    pmf[~spread, -1] = 1.0
    counts[~spread, -1] = gathered[~spread]
    return counts, pmf


def _widths(gathered: FloatArray) -> FloatArray:
    """The counts each entry needs: up to its mean and TAIL_SDS deviations and TAIL_PAD (2 at the mean field)."""
    return np.where(gathered < MEAN_FIELD, np.ceil(gathered + TAIL_SDS * np.sqrt(gathered) + TAIL_PAD), 2.0)


def chained_counts(gathered: FloatArray, span_s: FloatArray) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """Prompts arriving in time (Poisson): a scheduling step carries those that arrived during the span before it,
    so a long span is followed by a step with more prompts, itself longer. ``gathered`` (entries,) the mean count a
    scheduling step carries, ``span_s`` (entries, K) the span after a scheduling step with 0 to K - 1 prompts.
    Returns the stationary distribution of the count, (entries, K), the counts from K - 1 on lumped into the last,
    and that tail's mean count (entries,); and the same of the step admitting an arrival, (entries, K + 1) over 0 to
    K, the arrival's prompt included: the arrival lands in a span in proportion to its length, and its step
    carries it and the others that came then.

    The count N of a step is Poisson(rate W) over the span W before it: its mean stays ``gathered`` (Little's law
    sets the rate) and its variance is ``gathered + rate^2 Var(W)``. With W about linear in N (slope ``c``, the
    span's least-squares slope over the Poisson counts) that is ``gathered / (1 - (rate c)^2)``: a negative
    binomial of that mean and variance stands for the chain's stationary distribution (against the chain iterated
    to its fixed point, within 0.1 ms a step on Llama 3.1 8B at 4-16 requests/s)."""
    width = span_s.shape[1]
    k = np.arange(width, dtype=np.float64)
    poisson = _poisson_lumped(gathered[:, None], k)
    mean_span = np.sum(poisson * span_s, axis=1)
    slope = np.sum(poisson * (k - gathered[:, None]) * span_s, axis=1) / np.maximum(gathered, 1e-12)
    feedback = np.minimum(np.maximum(gathered / mean_span * slope, 0.0), MAX_FEEDBACK)
    pmf = _negative_binomial_lumped(gathered, gathered / (1.0 - feedback**2), k)
    span = np.sum(pmf * span_s, axis=1)  # the spans' mean, the tail's at its last count (a tail of ~1e-6)
    rate = gathered / span  # arrivals per second
    moves = _poisson_lumped((rate[:, None] * span_s)[:, :, None], k)  # (entries, from, to)
    landed = pmf * span_s / span[:, None]
    admitting = np.zeros((len(gathered), width + 1))
    admitting[:, 1:] = np.einsum("ej,ejk->ek", landed, moves)
    admitted = 1.0 + rate * np.sum(landed * span_s, axis=1)  # the admitting step's mean count
    return pmf, _tail_count(pmf, gathered), admitting, _tail_count(admitting, admitted)


def _tail_count(pmf: FloatArray, mean: FloatArray) -> FloatArray:
    """The mean count of the last column of ``pmf`` (the counts from its own on), the distribution's ``mean`` given."""
    last = pmf.shape[1] - 1
    below = np.sum(pmf[:, :-1] * np.arange(last), axis=1)
    tail = np.maximum((mean - below) / np.maximum(pmf[:, -1], 1e-300), last)
    return np.asarray(np.where(pmf[:, -1] > 1e-12, tail, last), dtype=np.float64)


def _negative_binomial_lumped(mean: FloatArray, variance: FloatArray, k: FloatArray) -> FloatArray:
    """Probabilities of the counts ``k`` (0, 1, ...) with ``mean`` and ``variance`` (entries,): negative binomial
    (Poisson where the variance is the mean), the last count holding it and above."""
    mean = np.maximum(mean, 1e-300)
    excess = np.maximum(variance - mean, 1e-12 * mean)
    failure = excess / (mean + excess)  # 1 - p
    shape = mean * mean / excess  # r: mean = r (1 - p) / p
    steps = (k[None, :] - 1.0 + shape[:, None]) / np.maximum(k, 1.0) * failure[:, None]
    steps[:, 0] = np.exp(-shape * np.log1p(excess / mean))  # p^r, e^-mean where the excess vanishes
    pmf = np.cumprod(steps, axis=-1)
    pmf[:, -1] = np.maximum(1.0 - pmf[:, :-1].sum(axis=-1), 0.0)
    return np.asarray(pmf, dtype=np.float64)


def _poisson_lumped(mean: FloatArray, k: FloatArray) -> FloatArray:
    """Poisson probabilities of the counts ``k`` (0, 1, ...) at ``mean`` (broadcast), the last holding it and above."""
    mean = np.asarray(mean, dtype=np.float64)
    steps = np.broadcast_to(mean, (*mean.shape[:-1], len(k))) / np.maximum(k, 1.0)  # p(k) = p(k - 1) mean / k
    steps[..., 0] = np.exp(-mean[..., 0])
    pmf = np.cumprod(steps, axis=-1)
    pmf[..., -1] = np.maximum(1.0 - pmf[..., :-1].sum(axis=-1), 0.0)
    return np.asarray(pmf, dtype=np.float64)


def step_mix(
    model: Transformer,
    system: ServingSystem,
    lengths: tuple[float, float],
    formats: tuple[ServingPrecision, ServingPrecision],
    decode_sequences: FloatArray,
    prompts_per_step: FloatArray | float,
    cal: InferenceCalibration,
    engine: EngineProfile,
    arrivals_in_time: bool = False,
    *,
    decode_context_tokens: float | None = None,
    prompt_pairs: float | None = None,
    prompt_cv2: float = 0.0,
) -> StepMix:
    """The steps of one stage (one entry per ``decode_sequences``) over the whole prompts they carry
    (``prompt_counts``); ``lengths`` the mean (prompt, output) tokens, ``formats`` the weights' and the KV
    cache's; decoders at the mean context (prompt and half the output). A mean is of each part's times, each
    part's GEMMs bound on their own. The entries are priced in two groups by the counts they need (the many with
    a small share need few; the rest as many as the widest), each group's steps once, at the counts 0 to K - 1
    and the tail's mean and one past it: a scheduling step's counts are 0 to K - 2 and the tail, the admitting
    step's one more. ``arrivals_in_time`` (a server's Poisson arrivals): the counts of ``chained_counts`` where a
    prompt fits the engine's token budget, where the closed loop's finishes (offline, concurrency) come per step,
    independent of how long the last one took. Decoders are at ``decode_context_tokens`` (None: the prompt and
    half the output); a prompt's attention at ``prompt_pairs`` (``Request.prompt_pairs``; None: at the mean length)."""
    n, o = lengths
    context = n + o / 2.0 if decode_context_tokens is None else decode_context_tokens
    every = engine.admission_steps(system.attention_dp)
    # a prompt over the step's token budget runs in chunks, and the prompts that came meanwhile queue behind it
    # rather than join its step: the chain stands where a step takes whole prompts
    in_time = arrivals_in_time and n <= engine.token_budget(system.system.accelerator.id)
    decoding = np.asarray(decode_sequences, dtype=np.float64).reshape(-1)
    share = np.broadcast_to(np.asarray(prompts_per_step, dtype=np.float64), decoding.shape)
    need = _widths(share * every)
    need = np.where(need <= NARROW, NARROW, need.max())  # two groups: few counts, and as many as the widest needs
    views: dict[str, list[tuple[npt.NDArray[np.intp], StepTimes]]] = {"mean": [], "scheduling": [], "admitting": []}
    wait = np.empty(decoding.shape)
    for width in np.unique(need).astype(int):
        where = np.flatnonzero(need == width)
        counts, pmf = prompt_counts(share[where], every, width)
        chained = in_time & (share[where] * every < MEAN_FIELD)  # counts spread in time, chained
        counts[chained, -1] = width - 1.0  # there the last column is the count K - 1, its tail lumped in
        integers = np.broadcast_to(np.arange(width, dtype=np.float64), counts.shape)
        carried = np.concatenate((integers, counts[:, -1:], counts[:, -1:] + 1.0), axis=1)  # K + 2 columns
        parts = step_times(
            model, system, *formats, decode_sequences=decoding[where, None], decode_context_tokens=context,
            prefill_tokens=carried * n, prefill_sequences=carried, prompt_tokens=n, cal=cal, engine=engine,
            prompt_pairs=prompt_pairs,
        )  # fmt: skip
        span = parts.step_s + (every - 1) * parts.step_s[:, :1]  # a scheduling step and the decode steps after it
        scheduling = np.zeros(carried.shape)
        scheduling[:, : width - 1], scheduling[:, width] = pmf[:, :-1], pmf[:, -1]
        admitting = np.zeros(carried.shape)
        admitting[:, 1:width], admitting[:, width + 1] = pmf[:, :-1], pmf[:, -1]
        if chained.any():
            on_counts = np.concatenate((span[chained, : width - 1], span[chained, width : width + 1]), axis=1)
            stationary, tail, admits, admits_tail = chained_counts(share[where][chained] * every, on_counts)
            # a lumped tail at its mean count: the line through the steps at K - 1 and K carried past them
            beyond, admits_beyond = tail - (width - 1.0), admits_tail - width
            scheduling[chained] = 0.0
            scheduling[chained, : width - 1] = stationary[:, :-1]
            scheduling[chained, width] = stationary[:, -1] * (1.0 - beyond)
            scheduling[chained, width + 1] = stationary[:, -1] * beyond
            admitting[chained] = 0.0
            admitting[chained, 1:width] = admits[:, 1:width]
            admitting[chained, width - 1] -= admits[:, width] * admits_beyond
            admitting[chained, width + 1] = admits[:, width] * (1.0 + admits_beyond)
        steady = scheduling / every  # the scheduling step's prompts on one step of ``every``, none on the others
        steady[:, 0] += 1.0 - 1.0 / every
        means = _means(parts, [steady, scheduling, admitting])
        for name, mean in zip(("mean", "scheduling", "admitting"), means, strict=True):
            views[name].append((where, mean))
        # a span carrying k prompts of spread lengths varies by k times one prompt's variance (prompt_cv2 of its cost)
        one = np.maximum(span[:, 1:2] - span[:, :1], 0.0)
        spread = carried * prompt_cv2 * one**2
        wait[where] = np.sum(scheduling * (span**2 + spread), axis=1) / (2.0 * np.sum(scheduling * span, axis=1))
    entries = len(decoding)
    mean, at_scheduling, at_admitting = (_scatter(views[name], entries) for name in ("mean", "scheduling", "admitting"))
    return StepMix(mean, wait, at_scheduling, at_admitting)


def _means(parts: StepTimes, views: list[FloatArray]) -> list[StepTimes]:
    """The weighted means over the last axis, one per weights in ``views``, each part's GEMMs bound on their own:
    as two launches, the parts whose GEMMs read weights longer than they compute and the rest (a sum keeps each
    side's bound)."""
    if parts.launches:
        per_launch = [_means(launch, views) for launch in parts.launches]
        return [StepTimes.in_sequence([means[v] for means in per_launch]) for v in range(len(views))]
    shape = np.broadcast_shapes(*(np.shape(getattr(parts, name)) for name in _TIMES))
    times = np.stack([np.broadcast_to(getattr(parts, name), shape) for name in _TIMES])  # (fields, entries, K)
    reading = times[_TIMES.index("gemm_memory_s")] >= times[_TIMES.index("gemm_compute_s")]
    sides = np.stack(
        [w for weights in views for w in (np.where(reading, weights, 0.0), np.where(reading, 0.0, weights))]
    )
    summed = np.einsum("fek,sek->sfe", times, sides)  # (2 x views, fields, entries)
    launches = [StepTimes(**dict(zip(_TIMES, side, strict=True))) for side in summed]
    return [StepTimes.in_sequence(launches[2 * v : 2 * v + 2]) for v in range(len(views))]


_TIMES = [f.name for f in fields(StepTimes) if f.name != "launches"]


def _scatter(pieces: list[tuple[npt.NDArray[np.intp], StepTimes]], entries: int) -> StepTimes:
    """One StepTimes over ``entries`` from pieces of it (their entries' indices), each with the same launches."""
    values = {name: np.empty(entries) for name in _TIMES}
    for where, piece in pieces:
        for name in _TIMES:
            values[name][where] = getattr(piece, name)
    launches = tuple(
        _scatter([(where, piece.launches[j]) for where, piece in pieces], entries)
        for j in range(len(pieces[0][1].launches))
    )
    return StepTimes(**values, launches=launches)
