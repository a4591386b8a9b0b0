"""Error by accelerator: each chip's cases scored now and held out, per kind.

A user weighing a new chip (``b300`` against ``b200``) asks how well the model knows it. ``validate`` gives,
per kind and accelerator (as the cases write it), the MAPE of the cases the packaged constants predict and of
the same cases' left-out residuals (``intervals/residuals.toml``: each predicted by constants fitted without
its source). Memory cases have no residuals; their left-out figures are absent.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from clustersim.intervals import ResidualTable
from clustersim.validation.by_layout import Scored
from clustersim.validation.intervals import predicted_over_measured

KIND_ORDER = ("training", "inference", "collective", "memory")


@dataclass(frozen=True)
class AcceleratorGroup:
    """The cases of one kind on one accelerator: how many, their MAPE now, and their left-out MAPE over those
    of them the residual file holds (None where it holds none)."""

    kind: str
    accelerator: str
    cases: int
    mape: float
    left_out_cases: int
    left_out_mape: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (MAPE as fractions)."""
        return {
            "kind": self.kind,
            "accelerator": self.accelerator,
            "cases": self.cases,
            "mape": self.mape,
            "left_out_cases": self.left_out_cases,
            "left_out_mape": self.left_out_mape,
        }


def accelerator_groups(scores: Iterable[Scored], residuals: ResidualTable) -> list[AcceleratorGroup]:
    """One group per (kind, accelerator) that some scored case has, kinds in ``KIND_ORDER`` and accelerators
    by name; the left-out figures are those of the same cases in ``residuals``."""
    errors: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
    members: dict[str, tuple[str, str]] = {}
    for case in scores:
        key = (case.kind, case.accelerator or "unstated")
        errors[key].append(abs(case.error))
        members[case.id] = key
    left: defaultdict[tuple[str, str], list[float]] = defaultdict(list)
    for kind in {kind for kind, _ in errors}:
        for residual in residuals.of_kind(kind):  # the primary figure's residuals, not the latency fields'
            member = members.get(residual.id)
            if member is not None and member[0] == kind:
                left[member].append(abs(predicted_over_measured(residual) - 1))

    def order(key: tuple[str, str]) -> tuple[int, str]:
        kind, accelerator = key
        return (KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER), accelerator)

    groups = []
    for key in sorted(errors, key=order):
        now, held = errors[key], left.get(key, [])
        held_mape = sum(held) / len(held) if held else None
        groups.append(AcceleratorGroup(*key, len(now), sum(now) / len(now), len(held), held_mape))
    return groups
