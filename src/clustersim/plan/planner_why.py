"""Why one planned row beats another: the term of the objective it shrinks the most.

A row's objective over the token budget splits by the terms of its step: each term's exposed seconds per
step, times the steps, times the rate the objective pays per second (1 for time, the instances' price per
second for cost, the devices' board power for energy), plus what failures and checkpoints add to the
failure-free run. The reason a row wins is the term whose share falls the most against the runner-up.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from clustersim.system import System
from clustersim.training.estimate import Estimate
from clustersim.units import format_seconds

FAILURES = "failures and checkpoints"
_WORDS = {
    "forward": "forward compute",
    "backward": "backward compute",
    "recompute": "activation recompute",
    "tp comm": "exposed TP communication",
    "cp comm": "exposed CP communication",
    "ep comm": "exposed expert all-to-all",
    "pp comm": "exposed pipeline send/recv",
    "dp comm": "exposed DP communication",
    "optimizer": "optimizer step",
}


@dataclass(frozen=True)
class ObjectiveTerms:
    """An objective over the job, split by term, with its unit and the rate it pays per second of run."""

    terms: dict[str, float]
    unit: str  # "s", "$" or "J"
    rate: str = ""  # what the objective pays per unit rented, e.g. "$55.04/h"; empty for time
    per: str = ""  # the unit rented: "per instance", "per device"

    def show(self, value: float) -> str:
        """``value`` in the objective's unit."""
        if self.unit == "s":
            return format_seconds(value)
        if self.unit == "$":
            return f"${value:,.0f}"
        return f"{value / 3.6e9:,.1f} MWh"


def objective_terms(estimate: Estimate, objective: str, system: System) -> ObjectiveTerms:
    """``estimate``'s ``objective`` (time, goodput, cost or energy) over its token budget, split by term."""
    totals = estimate.totals
    assert totals is not None
    steps = totals.steps
    seconds = {t.name: t.exposed_s * steps for t in estimate.terms if t.exposed_s > 0}
    free_s = sum(seconds.values())
    failures = totals.failures
    if objective in ("time", "goodput"):
        extra = totals.time_s - free_s if objective == "goodput" and failures is not None else 0.0
        return ObjectiveTerms(_with(seconds, extra), "s", "")
    if objective == "cost":
        per_hour = totals.price_usd_per_hour or 0.0
        rate = per_hour * system.num_nodes / 3600
        extra = (totals.cost_usd or 0.0) - rate * free_s
        words = f"${per_hour:,.2f}/h"
        return ObjectiveTerms(_with({k: v * rate for k, v in seconds.items()}, extra), "$", words, "per instance")
    watts = (system.power_watts or 0.0) * system.num_devices
    extra = (totals.energy_kwh or 0.0) * 3.6e6 - watts * free_s
    words = f"{system.power_watts or 0.0:,.0f} W"
    return ObjectiveTerms(_with({k: v * watts for k, v in seconds.items()}, extra), "J", words, "per device")


def _with(terms: dict[str, float], extra: float) -> dict[str, float]:
    return terms | ({FAILURES: extra} if abs(extra) > 0 else {})


def why_better(ours: ObjectiveTerms, theirs: ObjectiveTerms) -> str:
    """The term ``ours`` shrinks the most against ``theirs``, in the objective's unit, and the rates where
    they differ; "ties" where no term is smaller."""
    names = list(dict.fromkeys([*theirs.terms, *ours.terms]))
    gains = {name: theirs.terms.get(name, 0.0) - ours.terms.get(name, 0.0) for name in names}
    best = max(names, key=lambda name: gains[name], default="")
    if not best or gains[best] <= 0:
        return "ties the runner-up on every term"
    mine, others = ours.show(ours.terms.get(best, 0.0)), theirs.show(theirs.terms.get(best, 0.0))
    reason = f"less {_WORDS.get(best, best)}: {mine} against {others}"
    if ours.rate != theirs.rate and ours.rate:
        reason += f" ({ours.rate} against {theirs.rate} {ours.per})"
    return reason


def grouped_notes(notes: Sequence[str]) -> tuple[str, ...]:
    """``notes`` each once, the skips that share a reason in one note: ``skipped 5 points (A; B; ...): why``."""
    reasons: dict[str, list[str]] = {}
    order: list[tuple[bool, str]] = []  # (a skip's reason, text), in the order each first came
    for note in dict.fromkeys(notes):
        subject, sep, reason = note.removeprefix("skipped ").partition(": ")
        if not note.startswith("skipped ") or not sep:
            order.append((False, note))
            continue
        if reason not in reasons:
            reasons[reason] = []
            order.append((True, reason))
        reasons[reason].append(subject)
    out = []
    for skip, text in order:
        subjects = reasons[text] if skip else []
        if not skip:
            out.append(text)
        elif len(subjects) == 1:
            out.append(f"skipped {subjects[0]}: {text}")
        else:
            out.append(f"skipped {len(subjects)} points ({'; '.join(subjects)}): {text}")
    return tuple(out)
