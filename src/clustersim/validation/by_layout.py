"""Training error by layout feature: the same cases scored now and held out.

A workload group (MoE, context parallelism, sequences of 16K tokens or more, FSDP-style sharding, FP8, pipelines) is
judged by the MAPE of its published runs. ``validate`` gives two figures per group: the cases as the
packaged constants predict them, and the same cases' left-out residuals (``intervals/residuals.toml``:
each predicted by the constants fitted without its source). The groups are the interval lookup's
layout features (``clustersim.intervals.layout``), so a case counts in every group whose feature it has;
``none`` holds the cases with none of them (dense data and tensor parallelism only).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from clustersim.intervals import ResidualTable
from clustersim.intervals.layout import LAYOUT_FEATURES
from clustersim.validation.intervals import predicted_over_measured

PLAIN = "none"  # the group of layouts with no feature


class Scored(Protocol):
    """What a group reads of a scored case (``clustersim.validation.scoring.CaseScore``)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def error(self) -> float: ...
    @property
    def layout(self) -> tuple[str, ...]: ...
    @property
    def accelerator(self) -> str: ...


@dataclass(frozen=True)
class LayoutGroup:
    """The training cases with one layout feature: how many, their MAPE now, and their left-out MAPE
    over those of them the residual file holds (None where it holds none)."""

    feature: str
    cases: int
    mape: float | None
    left_out_cases: int
    left_out_mape: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (MAPE as fractions)."""
        return {
            "feature": self.feature,
            "cases": self.cases,
            "mape": self.mape,
            "left_out_cases": self.left_out_cases,
            "left_out_mape": self.left_out_mape,
        }


def layout_groups(scores: Iterable[Scored], residuals: ResidualTable) -> list[LayoutGroup]:
    """One group per layout feature (and ``none``) that some scored training case has, in
    ``LAYOUT_FEATURES`` order; the left-out figures are those of the same cases in ``residuals``."""
    cases = [c for c in scores if c.kind == "training"]
    scored = {c.id for c in cases}
    held = [r for r in residuals.of_kind("training") if r.id in scored]
    groups = []
    for feature in (*LAYOUT_FEATURES, PLAIN):

        def member(layout: tuple[str, ...], feature: str = feature) -> bool:
            return not layout if feature == PLAIN else feature in layout

        errors = [abs(c.error) for c in cases if member(c.layout)]
        if not errors:
            continue
        left = [abs(predicted_over_measured(r) - 1) for r in held if member(r.layout)]
        groups.append(
            LayoutGroup(
                feature, len(errors), sum(errors) / len(errors), len(left), sum(left) / len(left) if left else None
            )
        )
    return groups
