"""The features of a training layout that an interval is widened by, and of a serving deployment that pick its
residuals or widen its interval.

The model's error is not the same for every layout: a pipeline's bubble and stage balance, a ring of
context-parallel attention, expert all-to-alls, FSDP's per-layer gathers and FP8's casts each add
physics the fit pins less well. A residual carries the features of its case's layout, and a
prediction's interval is never narrower than the spread of the left-out cases whose layouts have
every feature its own has (``clustersim.intervals.lookup``), where there are enough of them.
"""

from __future__ import annotations

LAYOUT_FEATURES = ("pipeline", "context", "experts", "sharded", "fp8")
"""pipeline: pp > 1; context: cp > 1; experts: ep > 1; sharded: ZeRO 3 / FSDP; fp8: FP8 (or FP4) GEMMs."""
LOW_PRECISIONS = frozenset({"fp8", "fp4"})


def layout_features(*, pp: int, cp: int, ep: int, zero: int, precision: str) -> tuple[str, ...]:
    """The features of a layout with these degrees, ZeRO stage and GEMM ``precision`` (``fp8``...), in
    ``LAYOUT_FEATURES`` order."""
    low = precision in LOW_PRECISIONS
    present = {"pipeline": pp > 1, "context": cp > 1, "experts": ep > 1, "sharded": zero >= 3, "fp8": low}
    return tuple(name for name in LAYOUT_FEATURES if present[name])


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
