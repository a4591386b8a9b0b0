"""Speculative decoding as an acceptance-rate input: a draft proposes ``K`` tokens, the target verifies them in
one step and keeps the accepted prefix plus one token of its own.

With each draft token accepted independently with probability ``A``, a target step makes on average
``(1 - A^(K+1)) / (1 - A)`` tokens (Leviathan, Kalman and Matias 2023, "Fast Inference from Transformers via
Speculative Decoding", arXiv 2211.17192, eq. 1; ``K + 1`` at ``A = 1``; 1 at ``A = 0``).

**Pricing** (the roofline step model, ``clustersim.serving.engine.step_times``):

* the target's **verify step** carries ``K + 1`` tokens of each decoding sequence through its GEMMs,
  elementwise work, all-reduces and KV writes, and reads each sequence's KV cache once (as tree/multi-query
  verification kernels do); the ``K`` extra positions' attention FLOPs are left out: at ``8 (K + 1)`` FLOP a
  byte of KV for a GQA-8 model, far below a GPU's ratio of FLOPs to memory bandwidth, they hide under the
  read. Only the decode tokens' logits are counted (one row each), as the step model counts them;
* the **draft**: a separate model (``--draft-model``, e.g. Llama 3.2 1B for Llama 3.1 70B) runs the
  step's prompt chunks once and ``K`` decode steps, each its own launch with its own overheads (its weights'
  memory is not taken from the KV cache); without one, a one-layer **head** of the target's shape (EAGLE,
  Li et al. 2024, arXiv 2401.15077; DeepSeek-V3's MTP module, arXiv 2412.19437), run inside the target's
  launch: ``K`` one-layer steps with no step or per-sequence overhead of their own.

A step's time is the verify step plus the draft's; a decoding sequence advances ``E`` tokens a step on
average, so its time per output token is the step over ``E``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.serving.engine import FloatArray, InferenceCalibration, ServingSystem, step_times
from clustersim.serving.engines import EngineProfile
from clustersim.serving.formats import ServingPrecision
from clustersim.serving.memory import causal_pairs
from clustersim.serving.sim_steps import StepTable
from clustersim.workload.transformer import Transformer

MAX_DRAFT_TOKENS = 16


def expected_tokens(draft_tokens: int, acceptance: float) -> float:
    """Tokens one target step makes on average: ``(1 - A^(K+1)) / (1 - A)`` (``K + 1`` at ``A = 1``)."""
    if acceptance >= 1.0:
        return float(draft_tokens + 1)
    return (1.0 - acceptance ** (draft_tokens + 1)) / (1.0 - acceptance)


@dataclass(frozen=True)
class Speculation:
    """``draft_tokens`` (K) proposed a step, each accepted with probability ``acceptance`` (A); ``draft``: a
    separate draft model, or None for a one-layer head of the target."""

    draft_tokens: int
    acceptance: float
    draft: Transformer | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.draft_tokens <= MAX_DRAFT_TOKENS:
            raise ClusterSimError(
                f"--speculative: draft tokens per step must be 1..{MAX_DRAFT_TOKENS}, got {self.draft_tokens}",
                field="--speculative",
                value=self.draft_tokens,
            )
        if not 0.0 <= self.acceptance <= 1.0:
            raise ClusterSimError(
                f"--acceptance: a draft token's acceptance rate is in [0, 1], got {self.acceptance}",
                field="--acceptance",
                value=self.acceptance,
            )

    @property
    def tokens_per_step(self) -> float:
        return expected_tokens(self.draft_tokens, self.acceptance)

    def drafter(self, model: Transformer) -> Transformer:
        """The model that drafts: the draft model, or a one-layer head of the target's shape."""
        if self.draft is not None:
            return self.draft
        return model.model_copy(
            update={
                "name": f"{model.name} draft head",
                "layers": 1,
                "dense_layers": min(model.dense_layers, 1),
                "window_layers": None,
                "linear_attention": None,  # the head is an attention layer (Qwen3-Next's MTP layer is)
                "mlp_free_layers": 0,
            }
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "draft_tokens": self.draft_tokens,
            "acceptance": self.acceptance,
            "tokens_per_step": self.tokens_per_step,
            "draft": self.draft.name if self.draft is not None else "one-layer head (EAGLE / MTP)",
        }


def head_profile(profile: EngineProfile) -> EngineProfile:
    """The engine as a draft head runs in it: inside the target's launch, no overheads of its own."""
    return profile.model_copy(
        update={"step_overhead_s": 0.0, "sequence_overhead_s": 0.0, "host_sequence_overhead_s": {}}
    )


def speculative_step_s(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    spec: Speculation,
    *,
    decode_sequences: float,
    decode_context_tokens: float,
    prefill_tokens: float,
    prefill_sequences: float,
    prompt_tokens: float,
    cal: InferenceCalibration,
    engine: EngineProfile,
    prompt_pairs: float | None = None,
) -> tuple[float, float]:
    """One speculative step (seconds): the target's verify step and the draft's work, as a pair; a prompt's
    attention at ``prompt_pairs`` of the target (``Request.prompt_pairs``; None: at the mean length), the draft's in
    the same ratio to its own at the mean."""
    k, b, context, n = spec.draft_tokens, decode_sequences, decode_context_tokens, prompt_tokens
    verify = step_times(
        model, system, precision, kv_precision, decode_sequences=b, decode_context_tokens=context,
        prefill_tokens=prefill_tokens + b * k, prefill_sequences=prefill_sequences, prompt_tokens=n, cal=cal,
        engine=engine, prompt_pairs=prompt_pairs,
    ).step_s  # fmt: skip
    drafter = spec.drafter(model)
    profile = engine if spec.draft is not None else head_profile(engine)
    spread = None if prompt_pairs is None else prompt_pairs * causal_pairs(drafter, n) / causal_pairs(model, n)
    first = step_times(
        drafter, system, precision, kv_precision, decode_sequences=b, decode_context_tokens=context,
        prefill_tokens=prefill_tokens, prefill_sequences=prefill_sequences, prompt_tokens=n, cal=cal, engine=profile,
        prompt_pairs=spread,
    ).step_s  # fmt: skip
    more = step_times(
        drafter, system, precision, kv_precision, decode_sequences=b, decode_context_tokens=context,
        prefill_tokens=0.0, prefill_sequences=0.0, prompt_tokens=n, cal=cal, engine=profile,
    ).step_s  # fmt: skip
    return float(verify), float(first + (k - 1) * more)


class SpeculativeSteps:
    """The simulator's step prices (``clustersim.serving.sim_steps.Steps``) for speculative decoding: the
    target's table priced as verify steps plus the draft's table. A scheduler step is one verify step."""

    def __init__(self, target: StepTable, draft: StepTable, spec: Speculation) -> None:
        self.target, self.draft, self.spec = target, draft, spec
        probe = 1024.0
        self.draft_pair_ratio = causal_pairs(draft.model, probe) / causal_pairs(target.model, probe)
        self.lines: dict[int, FloatArray] = {}

    def _verify_s(self, decoding: int, context: float, prefill: float, prompts: int, pairs: float) -> float:
        tokens = decoding * (self.spec.draft_tokens + 1) + prefill
        t = self.target
        return t.rest_s(tokens, decoding + prompts) + t.attention_s(decoding, context, tokens) + t.pair_s * pairs

    def _draft_s(self, decoding: int, context: float, prefill: float, prompts: int, pairs: float) -> float:
        d, k = self.draft, self.spec.draft_tokens
        first = d.step_s(decoding, context, prefill, prompts, pairs * self.draft_pair_ratio)
        return first + (k - 1) * d.step_s(decoding, context, 0.0, 0, 0.0) if decoding else first

    def step_s(self, decoding: int, context: float, prefill_tokens: float, prompts: int, pairs: float) -> float:
        verify = self._verify_s(decoding, context, prefill_tokens, prompts, pairs)
        return verify + self._draft_s(decoding, context, prefill_tokens, prompts, pairs)

    def decode_steps_s(self, decoding: int, contexts: FloatArray) -> FloatArray:
        line = self.lines.get(decoding)
        axis = self.target.context_axis
        if line is None:
            line = np.array([self.step_s(decoding, c, 0.0, 0, 0.0) for c in axis])
            self.lines[decoding] = line
        return np.interp(contexts, axis, line)

    def chunk_pairs(self, start: float, end: float) -> float:
        return self.target.chunk_pairs(start, end)


def steps_for_outputs(outputs: np.ndarray, spec: Speculation) -> np.ndarray:
    """Scheduler steps a request's output takes: its first token (the prefill's), then ``E`` a step."""
    extra = np.ceil((outputs - 1) / spec.tokens_per_step - 1e-9).astype(np.int64)
    return np.asarray(1 + np.maximum(extra, 0), dtype=np.int64)


def speculative_tpot(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    spec: Speculation,
    *,
    batch: float,
    input_tokens: float,
    output_tokens: float,
    cal: InferenceCalibration,
    engine: EngineProfile,
    context_tokens: float | None = None,
    prompt_pairs: float | None = None,
) -> dict[str, float]:
    """The closed form at ``batch`` sequences per replica in the steady state: each step carries the prompts
    of the ``batch x E / output`` sequences that replace the finished ones; TPOT is the step over ``E``;
    decoders at ``context_tokens`` (None: the prompt and half the output; ``Request.decode_context_tokens``)."""
    e, n, o = spec.tokens_per_step, input_tokens, output_tokens
    context = n + o / 2.0 if context_tokens is None else context_tokens
    share = batch * e / max(o, 1.0)
    verify, draft = speculative_step_s(
        model, system, precision, kv_precision, spec, decode_sequences=batch, decode_context_tokens=context,
        prefill_tokens=share * n, prefill_sequences=share, prompt_tokens=n, cal=cal, engine=engine,
        prompt_pairs=prompt_pairs,
    )  # fmt: skip
    step = verify + draft
    return {
        "step_s": step,
        "verify_s": verify,
        "draft_s": draft,
        "tpot_s": step / e,
        "output_tokens_per_s": batch * e / step * system.dp,
        "tokens_per_step": e,
    }


def speculative_closed_form(
    model: Transformer, system: ServingSystem, request: Any, spec: Speculation, load: Any, engine: str | None
) -> dict[str, Any] | None:
    """The closed form beside a simulation with speculative decoding: at ``concurrency`` clients the batch is
    their share per replica; at a rate, the batch Little's law gives (rate per replica x the ``output / E``
    steps a request decodes x the step, solved by iteration); TTFT is one step carrying a whole prompt beside
    that batch. None for a trace; past the engine's sequence cap, the error."""
    from clustersim.serving.engine import default_calibration
    from clustersim.serving.estimate import deployment_profile

    cal, profile = default_calibration(), deployment_profile(engine, model, system, request)
    n, o = request.input_tokens, request.output_tokens
    args = (model, system, request.precision, request.kv, spec)
    pairs = request.prompt_pairs(model)

    def at(batch: float) -> dict[str, float]:
        return speculative_tpot(*args, batch=batch, input_tokens=n, output_tokens=o, cal=cal, engine=profile,
                                context_tokens=request.decode_context_tokens, prompt_pairs=pairs)  # fmt: skip

    if load.concurrency is not None:
        batch, scenario = load.concurrency / system.dp, "concurrency"
    elif load.rate_per_s is not None:
        per_replica, batch, scenario = load.rate_per_s / system.dp, 1.0, "server"
        for _ in range(60):
            batch = max(per_replica * o * at(batch)["tpot_s"], 1e-3)
            cap = profile.sequence_cap(system.system.accelerator.id)
            if batch > cap:
                why = f"{load.rate_per_s:g} requests/s saturates the replicas (over {cap} sequences in flight)"
                return {"scenario": scenario, "error": why}
    else:
        return None
    found = at(batch)
    ttft = sum(
        speculative_step_s(
            *args, decode_sequences=batch, decode_context_tokens=request.decode_context_tokens, prefill_tokens=n,
            prefill_sequences=1.0, prompt_tokens=n, cal=cal, engine=profile, prompt_pairs=pairs,
        )
    )  # fmt: skip
    return {
        "scenario": f"{scenario}, speculative",
        "input_tokens": n,
        "output_tokens": o,
        "ttft_s": ttft,
        "tpot_s": found["tpot_s"],
        "output_tokens_per_s": found["output_tokens_per_s"],
        "request_rate_per_s": found["output_tokens_per_s"] / o,
        "batch": batch,
        "tokens_per_step": found["tokens_per_step"],
    }


def speculative_offline(
    model: Transformer,
    system: ServingSystem,
    request: Any,
    spec: Speculation,
    *,
    batch: int | None = None,
    engine: str | None = None,
) -> dict[str, Any]:
    """The offline closed form with speculative decoding: output tokens/s of the whole system at ``batch``
    sequences a replica, or at the best batch up to the one the KV cache holds (within 0.5% of the peak: the
    smallest, as ``estimate_offline`` picks), with the plain estimate at the same batch beside it."""
    from clustersim.serving.engine import default_calibration
    from clustersim.serving.estimate import Batching, batch_limit, deployment_profile, estimate_offline

    cal, profile = default_calibration(), deployment_profile(engine, model, system, request)
    if system.pp != 1 or request.batching is Batching.STATIC:
        field, why = ("--pp", "one pipeline stage") if system.pp != 1 else ("--batching", "continuous batching")
        raise ClusterSimError(
            f"{field}: the speculative closed form prices {why}; simulate it instead (--simulate with a load)",
            field=field,
        )
    most, _, _ = batch_limit(model, system, request, cal, profile)
    if batch is not None and not 1 <= batch <= most:
        raise ClusterSimError(f"--batch: {batch} is outside 1..{most}, the sequences a replica holds", field="--batch")
    grid = [float(batch)] if batch is not None else np.unique(np.round(np.geomspace(1, most, 40))).tolist()
    lengths = {"input_tokens": request.input_tokens, "output_tokens": request.output_tokens,
               "context_tokens": request.decode_context_tokens}  # fmt: skip
    lengths["prompt_pairs"] = request.prompt_pairs(model)
    found = [
        speculative_tpot(
            model, system, request.precision, request.kv, spec, batch=b, cal=cal, engine=profile, **lengths
        )
        for b in grid
    ]
    rates = [f["output_tokens_per_s"] for f in found]
    best = next(k for k, r in enumerate(rates) if r >= max(rates) * 0.995)
    plain = estimate_offline(model, system, request, batch=int(grid[best]), cal=cal, engine=profile)
    return {
        "scenario": "offline, speculative",
        "batch": grid[best],
        "max_batch": most,
        **found[best],
        "without_speculation": {"tpot_s": plain.tpot_s, "output_tokens_per_s": plain.output_tokens_per_s},
    }


def check_speculation(draft_tokens: int | None, acceptance: float | None) -> None:
    """Both of ``--speculative`` and ``--acceptance``, or neither."""
    if (draft_tokens is None) != (acceptance is None):
        given, missing = ("--speculative", "--acceptance") if acceptance is None else ("--acceptance", "--speculative")
        raise ClusterSimError(
            f"{missing}: {given} needs it (speculative decoding takes the draft tokens a step, --speculative K, "
            "and each one's acceptance rate, --acceptance A)",
            field=missing,
        )
    if acceptance is not None and math.isnan(acceptance):
        raise ClusterSimError("--acceptance: not a number", field="--acceptance")
