"""Explain a measured step against the prediction: which term, moved how far, would close the gap.

For every lever (``diagnose.levers``) the factor its parameter needs for the estimate to equal the
measurement (``solve.factor_for``), whether that factor lies in the parameter's plausible range, and the
step's slope in the parameter (``solve.sensitivity``). Plausible ranges, each with its source:

- the bandwidth of a parallel dimension's collectives across the scale-out network, which differs from
  cluster to cluster (the network efficiency is a stated prior, and what ``clustersim calibrate`` fits
  per cluster): the range that fit lets it take (``bounds.network_efficiency``), up to line rate; inside
  a scale-up domain (NVLink, the chip's): the collective model's own error (left-out busbw residuals);
- a constant fitted once per chip family (a compute fraction, the optimizer's fixed cost) and the terms
  without a parameter (recompute, the bubble): the model's own error, the prediction interval's spread of
  left-out residuals of similar published training runs (``clustersim.intervals``), a fraction capped at
  the peak and the fixed cost within the training fit's range (``bounds.step_s``).

Candidates rank by the share of its plausible range a lever must use (0: none, 1: the edge); a lever that
cannot close the gap alone, or only outside its range, ranks last.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from clustersim.diagnose.inputs import StepInputs
from clustersim.diagnose.levers import COMM_TERMS, Kind, Lever, levers_for
from clustersim.diagnose.solve import MIN_FACTOR, Sensitivity, factor_for, sensitivity
from clustersim.errors import ClusterSimError
from clustersim.intervals import Spread, spread_for
from clustersim.intervals.layout import job_features


@dataclass(frozen=True)
class Bounds:
    """The ranges the shipped fits let a constant take (``clustersim.validation``'s fit bounds)."""

    network_efficiency: tuple[float, float]
    step_s: tuple[float, float]
    source: str


@dataclass(frozen=True)
class FactorRange:
    """The factors a lever's parameter may plausibly take, and where the range comes from."""

    low: float
    high: float
    source: str

    def share(self, factor: float) -> float:
        """How much of the range, in its direction from 1, ``factor`` uses (above 1: outside it)."""
        if factor == 1.0:
            return 0.0
        edge = self.high if factor > 1 else self.low
        if (edge - 1.0) * (factor - 1.0) <= 0:  # the range does not reach that side of 1
            return math.inf
        return math.log(factor) / math.log(edge)

    def to_json(self) -> dict[str, Any]:
        return {"low": self.low, "high": self.high, "source": self.source}


@dataclass(frozen=True)
class Candidate:
    """One lever's answer: the factor it needs, whether that is plausible, and the slope behind it."""

    term: str
    lever: str
    terms: tuple[str, ...]
    kind: Kind
    parameter: str
    seconds: float  # the step's seconds that scale with the parameter: |d step / d ln parameter|
    factor_needed: float | None  # None: it cannot close the gap alone (added seconds for data loading)
    needed_s: float  # the change of the step the gap asks of it
    plausible_range: FactorRange | None
    model_error_range: FactorRange | None
    share_of_range: float | None
    plausible: bool | None  # None: no range is known (a term the model does not price)
    sensitivity: Sensitivity
    hint: str

    def line(self) -> str:
        """The candidate in one sentence."""
        if self.kind is Kind.ADDED:
            if self.needed_s <= 0:
                return f"{self.term}: a wait the model does not price cannot make the step shorter"
            return f"{self.term}: {self.needed_s:.3g} s per step of waiting for data would close it; {self.hint}"
        if self.factor_needed is None:
            what = "even at its limit" if self.kind is Kind.RATE else "even at none of it"
            return f"{self.term}: cannot close the gap alone ({what}); {self.seconds:.3g} s of the step"
        words = f"needs {self.factor_needed:.2f}x the {self.parameter}"
        if self.plausible_range is not None:
            r = self.plausible_range
            verdict = "inside" if self.plausible else "outside"
            words += f", {verdict} its plausible {r.low:.2f}-{r.high:.2f}x"
        return f"{self.term}: {words}; {self.hint}"

    def to_json(self) -> dict[str, Any]:
        return {
            "term": self.term,
            "lever": self.lever,
            "terms": list(self.terms),
            "kind": self.kind.value,
            "parameter": self.parameter,
            "seconds": self.seconds,
            "factor_needed": self.factor_needed,
            "needed_s": self.needed_s,
            "plausible_range": None if self.plausible_range is None else self.plausible_range.to_json(),
            "model_error_range": None if self.model_error_range is None else self.model_error_range.to_json(),
            "share_of_range": self.share_of_range
            if self.share_of_range is None or math.isfinite(self.share_of_range)
            else None,
            "plausible": self.plausible,
            "sensitivity": self.sensitivity.to_json(),
            "hint": self.hint,
        }


@dataclass(frozen=True)
class Explanation:
    """A measured step set against the prediction, with the ranked candidates."""

    predicted_step_s: float
    measured_step_s: float
    interval: tuple[float, float] | None  # the prediction's interval at ``level``
    level: float
    interval_basis: str
    candidates: tuple[Candidate, ...]

    @property
    def gap(self) -> float:
        """measured / predicted - 1."""
        return self.measured_step_s / self.predicted_step_s - 1.0

    @property
    def within_interval(self) -> bool | None:
        if self.interval is None:
            return None
        return self.interval[0] <= self.measured_step_s <= self.interval[1]

    def summary(self) -> str:
        """What the comparison says, in one sentence."""
        how = "slower" if self.gap > 0 else "faster"
        head = (
            f"measured {self.measured_step_s:.4g} s per step is {abs(self.gap):.1%} {how} than the predicted "
            f"{self.predicted_step_s:.4g} s"
        )
        likely = [c.term for c in self.candidates if c.plausible][:3]
        if self.within_interval:
            low, high = self.interval or (0.0, 0.0)
            real = f"; were it real: {', '.join(likely)}" if likely else ""
            return (
                f"{head}, inside the prediction's {self.level:.0%} interval {low:.4g}-{high:.4g} s: the model's own "
                f"uncertainty explains it{real}"
            )
        if not likely:
            return (
                f"{head}; no single term explains it within its plausible range: several may share it, or the job's "
                "inputs (layout, batch, sequence length, precision, framework) differ from the run's"
            )
        verb = "likeliest causes" if self.gap > 0 else "likely over-priced"
        return f"{head}; {verb}: {', '.join(likely)}"

    def to_json(self) -> dict[str, Any]:
        return {
            "predicted_step_s": self.predicted_step_s,
            "measured_step_s": self.measured_step_s,
            "gap": self.gap,
            "gap_s": self.measured_step_s - self.predicted_step_s,
            "interval": None
            if self.interval is None
            else {"low_s": self.interval[0], "high_s": self.interval[1], "level": self.level,
                  "basis": self.interval_basis},
            "within_interval": self.within_interval,
            "summary": self.summary(),
            "candidates": [c.to_json() for c in self.candidates],
        }  # fmt: skip


def _spread(kind: str, inputs: StepInputs, level: float, framework: str | None) -> Spread | None:
    """The left-out residuals' spread for ``kind``: a training step's widened by its layout's features, as ``train``
    sizes the same step's interval (``clustersim.intervals.layout``)."""
    chip = inputs.system.accelerator
    features = job_features(inputs.layout, inputs.job) if kind == "training" else ()
    return spread_for(
        kind, accelerator=chip.id, family=chip.family, framework=framework, devices=inputs.system.num_devices,
        level=level, layout=features,
    )  # fmt: skip


def _error_range(spread: Spread | None, kind: Kind) -> FactorRange | None:
    """The factors the model's own error allows: a rate's on the inverse of the duration's spread."""
    if spread is None:
        return None
    low, high = (math.exp(-spread.q_hi), math.exp(-spread.q_lo)) if kind is Kind.RATE else (
        math.exp(spread.q_lo), math.exp(spread.q_hi))  # fmt: skip
    where = f"the model's own error: left-out residuals ({spread.basis}) at {spread.level:.0%}"
    return FactorRange(low, high, where)


def _ranges(
    lever: Lever, bounds: Bounds, training: Spread | None, collective: Spread | None
) -> tuple[FactorRange | None, FactorRange | None]:
    """The lever's plausible range and the model's own error on it (where they differ)."""
    if lever.key in COMM_TERMS and not lever.network:  # NVLink inside a node: the chip's, known to the model's error
        error = _error_range(collective, Kind.RATE)
        return (
            None if error is None else FactorRange(error.low, min(error.high, 1.0 / lever.value), error.source)
        ), error
    if lever.key in COMM_TERMS:
        low = bounds.network_efficiency[0]
        where = (
            f"achieved fraction of line rate {low:g}-1 (the range clustersim calibrate fits a cluster's "
            f"collectives in, {bounds.source}), {lever.value:g} in force"
        )
        return FactorRange(low / lever.value, 1.0 / lever.value, where), _error_range(collective, Kind.RATE)
    if lever.kind is Kind.ADDED:
        return None, None
    error = _error_range(training, lever.kind)
    if error is None:
        return None, None
    if lever.key == "optimizer":  # within the range the training fit lets step_s take
        low, high = bounds.step_s
        where = f"{error.source}, within step_s {low:g}-{high:g} s (the training fit's range, {bounds.source})"
        return FactorRange(max(error.low, low / lever.value), min(error.high, high / lever.value), where), None
    if lever.kind is Kind.RATE:  # a fraction of a peak reaches 1 at most
        return FactorRange(error.low, min(error.high, 1.0 / lever.value), error.source), None
    return error, None


def _candidate(lever: Lever, base: dict[str, float], measured_s: float, ranges: tuple[Any, Any]) -> Candidate:
    base_s = float(sum(base.values()))

    def step_at(factor: float) -> float:
        return lever.step_s(base, factor)

    plausible_range, error_range = ranges
    if lever.kind is Kind.ADDED:
        needed = measured_s - base_s
        slope = Sensitivity(lever.parameter, 0.0, base_s, base_s, 1.0, 0.0)
        return Candidate(
            lever.label, lever.key, lever.terms, lever.kind, lever.parameter, 0.0, None, needed, None, None, None,
            None if needed > 0 else False, slope, lever.hint,
        )  # fmt: skip
    slope = sensitivity(step_at, base_s, lever.parameter, lever.value)
    seconds = abs(slope.elasticity) * base_s  # |d step / d ln parameter|: the seconds that scale with it
    factor = factor_for(step_at, measured_s, MIN_FACTOR, lever.max_factor)
    share = None if factor is None or plausible_range is None else plausible_range.share(factor)
    plausible = False if factor is None else (None if share is None else share <= 1.0)
    return Candidate(
        lever.label, lever.key, lever.terms, lever.kind, lever.parameter, seconds, factor, measured_s - base_s,
        plausible_range, error_range, share, plausible, slope, lever.hint,
    )  # fmt: skip


def _rank(candidate: Candidate) -> tuple[int, float]:
    order = {True: 0, None: 1, False: 2}[candidate.plausible]
    share = candidate.share_of_range
    return order, math.inf if share is None else share


def explain_step(inputs: StepInputs, measured_step_s: float, *, bounds: Bounds, level: float) -> Explanation:
    """Set ``measured_step_s`` against the estimate of ``inputs`` and rank the levers that could close the gap
    (see the module docstring); ``level`` is the prediction interval's."""
    if not (math.isfinite(measured_step_s) and measured_step_s > 0):
        raise ClusterSimError(
            f"measured step: {measured_step_s!r} s is not a positive time", field="measured_step_s",
            value=measured_step_s,
        )  # fmt: skip
    base = inputs.terms_s()
    predicted = float(sum(base.values()))
    training = _spread("training", inputs, level, inputs.software.name)
    collective = _spread("collective", inputs, level, None)
    candidates = [
        _candidate(lever, base, measured_step_s, _ranges(lever, bounds, training, collective))
        for lever in levers_for(inputs, base)
    ]
    interval = None if training is None else training.duration(predicted)
    return Explanation(
        predicted_step_s=predicted,
        measured_step_s=measured_step_s,
        interval=None if interval is None else (interval.low, interval.high),
        level=level,
        interval_basis="" if training is None else training.basis,
        candidates=tuple(sorted(candidates, key=_rank)),
    )
