"""What a simulated serving run reports: latency percentiles, throughput, and goodput under SLOs.

Per request: **TTFT** (arrival to first token), **E2E** (arrival to last token) and its mean
**inter-token latency** (``(E2E - TTFT) / (output - 1)``, what vLLM's benchmark calls TPOT). Pooled
**ITL**: every gap between consecutive tokens of any request (a decode step's duration for each token it
makes, and the long gap of a preempted request). Percentiles are numpy's (linear); the pooled ITL's are
weighted by tokens. Throughput counts the run from its first arrival to its last token, as load
generators do. **Goodput**: the requests that meet every SLO given (TTFT, mean ITL, E2E at most the
bound), as a rate over that span and as a fraction of the requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError, UnitError
from clustersim.units import parse_seconds

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
PERCENTS = (50, 90, 99)
SLO_KEYS = {"ttft": "ttft_s", "itl": "itl_s", "tpot": "itl_s", "e2e": "e2e_s"}
SLO_FORMS = "ttft=2s,itl=50ms,e2e=30s (any of them; itl, alias tpot: a request's mean time between its tokens)"


@dataclass(frozen=True)
class Slo:
    """Latency bounds a request must meet to count as good (None: not bounded), seconds."""

    ttft_s: float | None = None
    itl_s: float | None = None
    e2e_s: float | None = None

    def to_json(self) -> dict[str, float]:
        return {name: value for name, value in vars(self).items() if value is not None}


def parse_slo(text: str, field: str = "--slo") -> Slo:
    """``ttft=2s,itl=50ms`` as an ``Slo``; a bad part is a ``ClusterSimError`` naming ``field``, the part and
    the valid forms."""
    found: dict[str, float] = {}
    parts = [part.strip() for part in text.split(",") if part.strip()]
    if not parts:
        raise ClusterSimError(f"{field}: {text!r} gives no bound; use {SLO_FORMS}", field=field, value=text)
    for part in parts:
        match = re.fullmatch(r"([A-Za-z0-9_]+)\s*[=:]\s*(.+)", part)
        key = match.group(1).lower() if match else ""
        if key not in SLO_KEYS or match is None:
            raise ClusterSimError(
                f"{field}: {part!r} is not NAME=DURATION with NAME one of ttft, itl, tpot, e2e; use {SLO_FORMS}",
                field=field,
                value=text,
            )
        try:
            seconds = parse_seconds(match.group(2))
        except UnitError as exc:
            raise ClusterSimError(f"{field}: {key}: {exc}; use {SLO_FORMS}", field=field, value=text) from None
        if not seconds > 0:
            raise ClusterSimError(f"{field}: {key} must be a positive duration, got {part!r}", field=field, value=text)
        name = SLO_KEYS[key]
        if name in found:
            raise ClusterSimError(
                f"{field}: {part!r} bounds {name} twice (itl and tpot are one)", field=field, value=text
            )
        found[name] = seconds
    return Slo(**found)


def percentiles(values: FloatArray, weights: FloatArray | None = None) -> dict[str, float]:
    """p50/p90/p99 and the mean of ``values`` (weighted: each value counts ``weights`` times); 0 when empty."""
    if values.size == 0:
        return {**{f"p{p}": 0.0 for p in PERCENTS}, "mean": 0.0}
    if weights is None:
        found = np.percentile(values, PERCENTS)
        return {**{f"p{p}": float(v) for p, v in zip(PERCENTS, found, strict=True)}, "mean": float(values.mean())}
    order = np.argsort(values, kind="stable")
    sorted_values, sorted_weights = values[order], weights[order]
    cumulative = np.cumsum(sorted_weights)
    total = float(cumulative[-1])
    # the value at rank p% of the tokens (linear between ranks, as numpy does for equal weights)
    ranks = np.asarray(PERCENTS, dtype=np.float64) / 100.0 * (total - 1.0)
    positions = np.concatenate(([0.0], cumulative[:-1]))  # each value spans ranks first..last of its tokens
    ranks_xp = np.column_stack((positions, np.maximum(cumulative - 1.0, positions))).ravel()
    found = np.interp(ranks, ranks_xp, np.repeat(sorted_values, 2))
    mean = float((sorted_values * sorted_weights).sum() / total)
    return {**{f"p{p}": float(v) for p, v in zip(PERCENTS, found, strict=True)}, "mean": mean}


@dataclass(frozen=True)
class SimulationResult:
    """A simulated run: per request (arrival order), per decode step, and what was run."""

    arrival_s: FloatArray
    first_token_s: FloatArray
    finish_s: FloatArray
    input_tokens: IntArray
    output_tokens: IntArray
    preemptions: IntArray
    step_s: FloatArray  # decode steps' durations
    step_tokens: IntArray  # tokens each made (pooled ITL weights)
    resume_gaps_s: FloatArray
    steps: int
    wall_s: float
    slo: Slo | None = None
    setup: dict[str, Any] = field(default_factory=dict)  # model, system, engine, load, seed, ...

    @property
    def ttft_s(self) -> FloatArray:
        return self.first_token_s - self.arrival_s

    @property
    def e2e_s(self) -> FloatArray:
        return self.finish_s - self.arrival_s

    @property
    def request_itl_s(self) -> FloatArray:
        """Each request's mean time between tokens (requests of one token: 0)."""
        gaps = np.maximum(self.output_tokens - 1, 1)
        return np.where(self.output_tokens > 1, (self.finish_s - self.first_token_s) / gaps, 0.0)

    @property
    def duration_s(self) -> float:
        """First arrival to last token."""
        return float(self.finish_s.max() - self.arrival_s.min())

    def good(self) -> npt.NDArray[np.bool_]:
        """Which requests meet every bound of the SLO (all, without one)."""
        ok = np.ones(self.arrival_s.size, dtype=bool)
        if self.slo is None:
            return ok
        for bound, values in ((self.slo.ttft_s, self.ttft_s), (self.slo.itl_s, self.request_itl_s)):
            if bound is not None:
                ok &= values <= bound
        if self.slo.e2e_s is not None:
            ok &= self.e2e_s <= self.slo.e2e_s
        return ok

    def pooled_itl(self) -> dict[str, float]:
        values = np.concatenate((self.step_s, self.resume_gaps_s))
        weights = np.concatenate((self.step_tokens.astype(np.float64), np.ones(self.resume_gaps_s.size)))
        keep = weights > 0
        return percentiles(values[keep], weights[keep])

    def to_json(self) -> dict[str, Any]:
        """The summary, SI units."""
        span = self.duration_s
        count = self.arrival_s.size
        good = self.good()
        return {
            **self.setup,
            "requests": count,
            "input_tokens": {"mean": float(self.input_tokens.mean()), "max": int(self.input_tokens.max())},
            "output_tokens": {"mean": float(self.output_tokens.mean()), "max": int(self.output_tokens.max())},
            "ttft_s": percentiles(self.ttft_s),
            "itl_s": self.pooled_itl(),
            "tpot_s": percentiles(self.request_itl_s[self.output_tokens > 1]),
            "e2e_s": percentiles(self.e2e_s),
            "throughput": {
                "output_tokens_per_s": float(self.output_tokens.sum()) / span,
                "input_tokens_per_s": float(self.input_tokens.sum()) / span,
                "requests_per_s": count / span,
            },
            "slo": None if self.slo is None else self.slo.to_json(),
            "goodput": None
            if self.slo is None
            else {"requests_per_s": float(good.sum()) / span, "fraction": float(good.mean())},
            "preemptions": int(self.preemptions.sum()),
            "preempted_requests": int((self.preemptions > 0).sum()),
            "steps": self.steps,
            "duration_s": span,
            "sim_wall_s": self.wall_s,
        }


GROUPS = ("input_tokens", "output_tokens", "ttft_s", "itl_s", "tpot_s", "e2e_s", "throughput", "goodput")
SUMMED = ("steps", "sim_wall_s")  # work done over all the runs
MEDIANS = ("preemptions", "preempted_requests", "duration_s")


def over_seeds(runs: list[dict[str, Any]], seeds: list[int]) -> dict[str, Any]:
    """Runs of one setup under ``seeds`` (``SimulationResult.to_json``) as one: each figure the median over
    them, ``spread`` its [min, max] (None for one run), steps and wall time summed."""
    first = dict(runs[0])
    first.update(seeds=seeds, spread=None)
    if len(runs) == 1:
        return first
    spread: dict[str, Any] = {}
    for group in GROUPS:
        if first[group] is None:
            continue
        values = {key: [float(run[group][key]) for run in runs] for key in first[group]}
        first[group] = {key: float(np.median(found)) for key, found in values.items()}
        spread[group] = {key: [min(found), max(found)] for key, found in values.items()}
    for key in MEDIANS:
        first[key] = float(np.median([run[key] for run in runs]))
    for key in SUMMED:
        first[key] = sum(run[key] for run in runs)
    if first.get("prefix_cache"):  # replicas draw their requests at random: each seed finds its own share
        shares = [run["prefix_cache"]["cached_share"] for run in runs]
        first["prefix_cache"] = first["prefix_cache"] | {"cached_share": float(np.median(shares))}
    first["spread"] = spread
    return first
