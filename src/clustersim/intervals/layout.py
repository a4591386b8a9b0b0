"""The features of a training layout that an interval is widened by, and of a serving deployment that pick its
residuals or widen its interval.

The model's error is not the same for every layout: a pipeline's bubble and stage balance, a ring of
context-parallel attention, expert all-to-alls, FSDP's per-layer gathers and FP8's casts each add
physics the fit pins less well, and so does a long sequence, whose attention core (a kernel whose achieved rate
differs by release and stack far more than a GEMM's) takes a growing share of the step. A residual carries the
features of its case's layout, and a prediction's interval is never narrower than the spread of the left-out cases
whose layouts have every feature its own has (``clustersim.intervals.lookup``), where there are enough of them.
"""

from __future__ import annotations

from enum import Enum
from typing import Protocol

LAYOUT_FEATURES = ("pipeline", "context", "experts", "sharded", "fp8", "long_sequence")
"""pipeline: pp > 1; context: cp > 1; experts: ep > 1; sharded: ZeRO 3 / FSDP; fp8: FP8 (or FP4) GEMMs;
long_sequence: sequences of ``LONG_SEQUENCE_TOKENS`` or more."""
LOW_PRECISIONS = frozenset({"fp8", "fp4"})
LONG_SEQUENCE_TOKENS = 16384
"""From 16K tokens a sequence's causal attention is about a quarter of a Llama 3 8B step's FLOPs (two fifths at 32K)
and the published runs' errors spread with the attention kernel's release and stack: left out, the 33 training runs
of 16K tokens or more were 13.1% off, the other 546 8.5% (2026-12-07: Megatron-MoE-ModelZoo's 2025-11 Qwen3-235B H100
runs 11-44% too slow, NeMo 25.04's B200 runs 7-20% too fast, torchtitan's and llm-foundry's H100 runs both ways), and
intervals sized without the feature covered 23 of the 33 at 80% (24 with it: their errors lean one way per source,
so a source's runs, left out, are sized by the other sources' spread). With llm-foundry's 42 other long runs (the same
day) the group is 75 runs, 13.0% off left out (llm-foundry's 45 at 13.2%, their A100 runs 13-15% too fast at the
``fsdp`` profile's priors)."""


def layout_features(*, pp: int, cp: int, ep: int, zero: int, precision: str, seq_len: int) -> tuple[str, ...]:
    """The features of a layout with these degrees, ZeRO stage and GEMM ``precision`` (``fp8``...) for sequences of
    ``seq_len`` tokens, in ``LAYOUT_FEATURES`` order."""
    low = precision in LOW_PRECISIONS
    present = {
        "pipeline": pp > 1, "context": cp > 1, "experts": ep > 1, "sharded": zero >= 3, "fp8": low,
        "long_sequence": seq_len >= LONG_SEQUENCE_TOKENS,
    }  # fmt: skip
    return tuple(name for name in LAYOUT_FEATURES if present[name])


class _Degrees(Protocol):
    @property
    def pp(self) -> int: ...
    @property
    def cp(self) -> int: ...
    @property
    def ep(self) -> int: ...
    @property
    def zero(self) -> int: ...


class _Job(Protocol):
    @property
    def precision(self) -> Enum: ...
    @property
    def seq_len(self) -> int: ...


def job_features(layout: _Degrees, job: _Job) -> tuple[str, ...]:
    """``layout_features`` of a training ``layout`` (``clustersim.execution.Layout``) running ``job``
    (``clustersim.training.job.TrainingJob``: its GEMM precision and sequence length)."""
    return layout_features(
        pp=layout.pp, cp=layout.cp, ep=layout.ep, zero=layout.zero, precision=str(job.precision.value),
        seq_len=job.seq_len,
    )  # fmt: skip


ATTENTION_DP = "attention_dp"
"""A serving deployment's feature: groups of ranks sharing a MoE model's experts (``clustersim.serving.attention_dp``),
priced by another mechanism than tensor parallelism: its residuals size only such deployments' intervals."""


def serving_features(attention_dp: int, *, experts: bool) -> tuple[str, ...]:
    """The features of a serving deployment with ``attention_dp`` groups a replica, of a MoE model (``experts``)
    or a dense one: ``experts`` widens its interval to the spread of the MoE deployments' left-out runs (19.5% off
    at the median, the dense ones 6.1%, 2026-12-03), ``attention_dp`` picks its residuals (``SELECTING``)."""
    return tuple(name for name, on in (("experts", experts), (ATTENTION_DP, attention_dp > 1)) if on)


SELECTING = frozenset({ATTENTION_DP})
"""The serving features that pick a deployment's residuals (the others widen its interval, as a layout's do)."""
