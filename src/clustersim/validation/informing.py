"""Which cases inform each fitted constant: those whose prediction moves when the constant moves.

A constant informs nothing about a case whose prediction does not depend on it (``expert_gemm_s``
and a dense model, ``fp8_efficiency_ratio`` and a BF16 run, a gather ramp and an all-reduce). The
sources of a constant's informing cases say how well the data identifies it: a constant informed by
one source alone is that source's fit, and leave-one-source-out cross-validation must not predict
that source with it (``clustersim.validation.crossval`` holds it at its stated prior instead).

A case informs a constant when moving the constant by ``STEP`` (up, or down where up would leave its
bounds) changes the case's prediction by more than ``RELATIVE_TOLERANCE``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from clustersim.errors import ClusterSimError
from clustersim.validation.fit import Constant, FitSpec, Prepared, groups_of

C = TypeVar("C")
STEP = 1.25
RELATIVE_TOLERANCE = 1e-9


@dataclass(frozen=True)
class Informed:
    """One fitted constant and the cases (ids) and sources whose predictions depend on it."""

    constant: Constant
    case_ids: frozenset[str]
    sources: frozenset[str]


def moved(constant: Constant, value: float) -> float:
    """``value`` moved by ``STEP`` within the constant's bounds."""
    up = value * STEP
    return up if up <= constant.high else value / STEP


def informing(
    spec: FitSpec[C], cases: Sequence[Prepared[C]], calibration: C, *, priors: frozenset[tuple[str, str]] = frozenset()
) -> list[Informed]:
    """Per group of ``cases`` and per constant the spec fits there (those not held as ``priors``), the
    cases and sources that inform it under ``calibration``."""
    out: list[Informed] = []
    for group, members in groups_of(cases).items():
        for constant in spec.constants(calibration, group, members):
            if (constant.table, constant.key) in priors:
                continue
            trial = spec.replace(calibration, {constant: moved(constant, spec.get(calibration, constant))})
            hits = [p for p in members if _depends(p, calibration, trial)]
            out.append(Informed(constant, frozenset(p.case.id for p in hits), frozenset(p.source for p in hits)))
    return out


def _depends(case: Prepared[Any], base: Any, trial: Any) -> bool:
    try:
        before, after = case.predict(base), case.predict(trial)
    except ClusterSimError:
        return False
    return abs(after - before) > RELATIVE_TOLERANCE * abs(before)


def only_source(informed: Sequence[Informed], source: str) -> list[Constant]:
    """The constants that no case outside ``source`` informs (and some case of it does)."""
    return [i.constant for i in informed if i.sources == {source}]
