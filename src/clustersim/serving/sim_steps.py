"""Engine step times for the request-level simulator: the roofline step model, tabulated once per run.

A simulated run takes tens of thousands of engine steps, each with its own mix of decoding sequences,
their context and prompt chunks; one call of :func:`clustersim.serving.engine.step_times` costs about
0.2 ms, but the same call over an array costs well under a microsecond an entry. So the step model is
evaluated once on grids and interpolated, following how its terms depend on the step:

* the GEMMs, elementwise work, tensor-parallel all-reduces and overheads depend only on the step's
  tokens ``T`` (decode tokens + prompt tokens) and its sequences ``L`` (decoding + prompts: logits rows
  and per-sequence costs): a 2-D table over (T, L), bilinear;
* decode attention depends on the decoding sequences ``b``, their mean context and ``T`` (the new
  tokens written): a 3-D table, trilinear (exact where it is linear in each, as when it is memory-bound);
* prefill attention is the step model's per-(query, key)-pair cost times the pairs of the step's prompt
  chunks: a chunk of tokens ``start..end`` of a prompt adds ``causal_pairs(end) - causal_pairs(start)``.

Grids are integers at the low end and geometric above; ``StepTable.max_error`` reports the largest relative
difference from the step model on random steps (under 1% in the tests). Engines that never mix prefill and
decode in one launch, or pad to static-shape buckets (the Neuron profiles), are not tabulated this way.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.serving.eager_launches import eager_floor_s
from clustersim.serving.engine import FloatArray, InferenceCalibration, ServingSystem, step_times
from clustersim.serving.engines import EngineProfile
from clustersim.serving.formats import ServingPrecision
from clustersim.serving.graphs import graph_rows
from clustersim.serving.memory import causal_pairs, stage_share
from clustersim.workload.transformer import Transformer


def axis(top: float, ratio: float, exact_below: int = 32) -> list[float]:
    """Grid points 0..top: every integer up to ``exact_below``, then geometric by ``ratio``, ending at ``top``."""
    top = max(float(top), 1.0)
    points = [float(i) for i in range(min(exact_below, int(top)) + 1)]
    while points[-1] < top:
        points.append(min(max(points[-1] * ratio, points[-1] + 1.0), top))
    return points


def _locate(points: list[float], x: float) -> tuple[int, float]:
    """The cell of ``x`` and its fraction in it (beyond the ends: the end cell, extrapolated)."""
    i = bisect_right(points, x) - 1
    i = min(max(i, 0), len(points) - 2)
    lo = points[i]
    return i, (x - lo) / (points[i + 1] - lo)


class Steps(Protocol):
    """What the scheduler asks of its step prices (a ``StepTable``, or speculative decoding's wrapper)."""

    def step_s(self, decoding: int, context: float, prefill_tokens: float, prompts: int, pairs: float) -> float: ...

    def decode_steps_s(self, decoding: int, contexts: FloatArray) -> FloatArray: ...

    def chunk_pairs(self, start: float, end: float) -> float: ...


@dataclass(frozen=True)
class StepTable:
    """The step model of one replica's stage, tabulated; ``step_s`` prices one step."""

    model: Transformer
    tokens_axis: list[float]  # T, table 1
    sequences_axis: list[float]  # L, table 1
    rest: list[list[float]]  # [T][L]: GEMMs + elementwise + communication + overheads, seconds
    decode_axis: list[float]  # b, table 2
    context_axis: list[float]  # mean decode context, table 2
    written_axis: list[float]  # T, table 2
    attention: FloatArray  # [b, context, T]: decode attention, seconds
    pair_s: float  # prefill attention per (query, key) pair summed over layers (causal_pairs' unit)
    cube: list[list[list[float]]] = field(default_factory=list)  # attention as nested lists (fast scalar reads)
    lines: dict[int, FloatArray] = field(default_factory=dict)  # decode-only steps by decoders, over contexts
    graph_sizes: tuple[int, ...] | None = None  # captured CUDA graphs a decode-only step pads to (serving.graphs)
    eager_floor_s: float = 0.0  # the least time of a step with prompts run eagerly (serving.eager_launches)
    graphed_prompt_tokens: int = 0  # steps with prompts of at most this many tokens replay graphs (no floor)

    def __post_init__(self) -> None:
        if not self.cube:
            self.cube.extend(self.attention.tolist())

    def rest_s(self, tokens: float, sequences: float) -> float:
        """GEMMs, elementwise work, all-reduces and overheads of a step of ``tokens`` and ``sequences``."""
        i, x = _locate(self.tokens_axis, tokens)
        j, y = _locate(self.sequences_axis, sequences)
        row, nxt = self.rest[i], self.rest[i + 1]
        return (1 - x) * ((1 - y) * row[j] + y * row[j + 1]) + x * ((1 - y) * nxt[j] + y * nxt[j + 1])

    def attention_s(self, decoding: float, context: float, tokens: float) -> float:
        """Decode attention of ``decoding`` sequences at a mean ``context`` in a step of ``tokens``."""
        i, x = _locate(self.decode_axis, max(decoding, 0.0))
        j, y = _locate(self.context_axis, context)
        k, z = _locate(self.written_axis, tokens)
        cube = self.cube
        total = 0.0
        for a, wa in ((i, 1 - x), (i + 1, x)):
            plane = cube[a]
            for c, wc in ((j, 1 - y), (j + 1, y)):
                line = plane[c]
                total += wa * wc * ((1 - z) * line[k] + z * line[k + 1])
        return total

    def step_s(self, decoding: int, context: float, prefill_tokens: float, prompts: int, pairs: float) -> float:
        """One step: ``decoding`` sequences at mean ``context`` and ``prefill_tokens`` of ``prompts`` chunks
        whose attention covers ``pairs`` (query, key) pairs."""
        tokens = decoding + prefill_tokens
        if prefill_tokens > 0:
            rest = self.rest_s(tokens, decoding + prompts)
        else:  # a decode step's padding rows (a CUDA graph's) run the GEMMs and the logits
            rows = self.decode_rows(decoding)
            rest = self.rest_s(rows, rows)
        step = rest + self.attention_s(decoding, context, tokens) + self.pair_s * pairs
        if prefill_tokens > 0 and tokens > self.graphed_prompt_tokens:
            return max(step, self.eager_floor_s)
        return step

    def decode_rows(self, decoding: int) -> float:
        """The rows a step of ``decoding`` sequences alone runs through its GEMMs (a CUDA graph's padding)."""
        return float(graph_rows(self.graph_sizes, decoding)) if self.graph_sizes else float(decoding)

    def decode_steps_s(self, decoding: int, contexts: FloatArray) -> FloatArray:
        """Decode-only steps of ``decoding`` sequences at each mean context in ``contexts`` (vectorized)."""
        line = self.lines.get(decoding)
        if line is None:
            i, x = _locate(self.decode_axis, decoding)
            k, z = _locate(self.written_axis, decoding)
            planes = self.attention[i : i + 2, :, k : k + 2]
            mixed = (1 - x) * ((1 - z) * planes[0, :, 0] + z * planes[0, :, 1]) + x * (
                (1 - z) * planes[1, :, 0] + z * planes[1, :, 1]
            )
            rows = self.decode_rows(decoding)
            line = mixed + self.rest_s(rows, rows)
            self.lines[decoding] = line
        return np.interp(contexts, self.context_axis, line)

    def chunk_pairs(self, start: float, end: float) -> float:
        """(query, key) pairs of prompt tokens ``start..end`` attending causally, over the layers."""
        return causal_pairs(self.model, end) - causal_pairs(self.model, start)


class PipelinedSteps:
    """A micro-batch's step through ``pp`` pipeline stages: each stage's step (its layers, and its send to the
    next stage) one after another, ``pp`` times one stage's (``steps`` prices one stage)."""

    def __init__(self, steps: Steps, pp: int) -> None:
        self.steps, self.pp = steps, pp

    def step_s(self, decoding: int, context: float, prefill_tokens: float, prompts: int, pairs: float) -> float:
        return self.pp * self.steps.step_s(decoding, context, prefill_tokens, prompts, pairs)

    def decode_steps_s(self, decoding: int, contexts: FloatArray) -> FloatArray:
        return self.pp * self.steps.decode_steps_s(decoding, contexts)

    def chunk_pairs(self, start: float, end: float) -> float:
        return self.steps.chunk_pairs(start, end)


def step_table(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    *,
    max_tokens: float,
    max_sequences: float,
    max_context: float,
    cal: InferenceCalibration,
    engine: EngineProfile,
) -> StepTable:
    """The step model on ``system`` tabulated up to ``max_tokens`` per step, ``max_sequences`` per step and
    a mean decode context of ``max_context`` tokens; ``ClusterSimError`` for engines it cannot tabulate."""
    if engine.bucket_min_tokens is not None:
        raise ClusterSimError(
            f"engine: the simulator models engines without static-shape buckets (tensorrt-llm, vllm, vllm-v0, "
            f"sglang); {engine.name} pads to compiled buckets",
            field="engine",
            value=engine.name,
        )
    # an engine that never mixes gets steps of one kind from the scheduler, priced alike with or without the flag
    engine = engine.model_copy(update={"mixed_steps": True})
    floor = 0.0  # an eager step's launches, priced apart: the table's cells are steps with prompts, graphed or not
    if engine.eager_launch_s is not None:
        layers = model.layers * stage_share(model, system.pp)
        floor = eager_floor_s(model, layers, precision, system.tp, engine.eager_launch_s)
        engine = engine.model_copy(update={"eager_launch_s": None})
    tokens = axis(max_tokens, 1.04)
    sequences = axis(max_sequences, 1.08)
    t_grid, l_grid = np.meshgrid(tokens, sequences, indexing="ij")
    one = step_times(
        model, system, precision, kv_precision,
        decode_sequences=0.0, decode_context_tokens=0.0,
        prefill_tokens=t_grid, prefill_sequences=l_grid, prompt_tokens=1.0, cal=cal, engine=engine,
    )  # fmt: skip
    rest = one.gemm_s + one.elementwise_s + one.communication_s + one.overhead_s
    decoding = axis(max_sequences, 1.15, exact_below=16)
    contexts = axis(max_context, 1.25, exact_below=8)
    written = axis(max_tokens, 1.2, exact_below=16)
    b, c, t = np.meshgrid(decoding, contexts, written, indexing="ij")
    two = step_times(
        model, system, precision, kv_precision,
        decode_sequences=b, decode_context_tokens=c,
        prefill_tokens=np.maximum(t - b, 0.0), prefill_sequences=0.0, prompt_tokens=1.0, cal=cal, engine=engine,
    )  # fmt: skip
    probe = 1024.0
    prefill = step_times(
        model, system, precision, kv_precision,
        decode_sequences=0.0, decode_context_tokens=0.0,
        prefill_tokens=probe, prefill_sequences=1.0, prompt_tokens=probe, cal=cal, engine=engine,
    )  # fmt: skip
    pair_s = float(prefill.prefill_attention_s) / causal_pairs(model, probe)
    return StepTable(
        model, tokens, sequences, rest.tolist(), decoding, contexts, written,
        np.asarray(two.decode_attention_s, dtype=np.float64), pair_s, graph_sizes=engine.graph_batch_sizes,
        eager_floor_s=floor, graphed_prompt_tokens=engine.graphed_prompt_tokens,
    )  # fmt: skip


def max_error(
    table: StepTable,
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    *,
    cal: InferenceCalibration,
    engine: EngineProfile,
    rng: np.random.Generator,
    samples: int = 200,
) -> float:
    """The largest relative difference between the table and ``step_times`` on random steps within its range
    (whole prompts of one length each, as the step model prices them)."""
    worst = 0.0
    top_b = table.decode_axis[-1]
    for _ in range(samples):
        b = int(rng.integers(0, int(top_b) + 1))
        ctx = float(rng.uniform(1.0, table.context_axis[-1]))
        prompts = int(rng.integers(0, 4))
        room = max(table.tokens_axis[-1] - b, 0.0)
        n = float(rng.integers(1, max(int(room / max(prompts, 1)), 1) + 1)) if prompts else 1.0
        if b + prompts > table.sequences_axis[-1]:
            continue
        exact = step_times(
            model, system, precision, kv_precision,
            decode_sequences=float(b), decode_context_tokens=ctx, prefill_tokens=prompts * n,
            prefill_sequences=float(prompts), prompt_tokens=n, cal=cal, engine=engine,
        ).step_s  # fmt: skip
        ours = table.step_s(b, ctx, prompts * n, prompts, prompts * table.chunk_pairs(0.0, n))
        worst = max(worst, abs(ours / float(exact) - 1.0))
    return worst
