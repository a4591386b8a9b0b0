"""Training error by layout feature: the same cases scored now and held out.

A workload group (MoE, context parallelism, sequences of 16K tokens or more, FSDP-style sharding, FP8, pipelines) is
judged by the MAPE of its published runs. ``validate`` gives two figures per group: the cases as the
packaged constants predict them, and the same cases' left-out residuals (``intervals/residuals.toml``:
each predicted by the constants fitted without its source). The groups are the interval lookup's
layout features (``clustersim.intervals.layout``), so a case counts in every group whose feature it has;
``none`` holds the cases with none of them (dense data and tensor parallelism only). Each group also gives the same
two figures per source, so a group's MAPE can be read for what drives it (one source's many easy runs, or a few
hard ones).
"""

from __future__ import annotations

from collections import defaultdict
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
    @property
    def source(self) -> str: ...


def _figures(item: SourceShare | LayoutGroup) -> dict[str, Any]:
    """The figures a group and a source's share of it both give."""
    return {
        "cases": item.cases,
        "mape": item.mape,
        "left_out_cases": item.left_out_cases,
        "left_out_mape": item.left_out_mape,
    }


@dataclass(frozen=True)
class SourceShare:
    """One source's cases in a layout group: how many, their MAPE now, and their left-out MAPE (None where the
    residual file holds none of them)."""

    source: str
    cases: int
    mape: float
    left_out_cases: int
    left_out_mape: float | None

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (MAPE as fractions)."""
        return {"source": self.source} | _figures(self)


@dataclass(frozen=True)
class LayoutGroup:
    """The training cases with one layout feature: how many, their MAPE now, and their left-out MAPE
    over those of them the residual file holds (None where it holds none); ``sources``: the same per source, the
    most cases first."""

    feature: str
    cases: int
    mape: float | None
    left_out_cases: int
    left_out_mape: float | None
    sources: tuple[SourceShare, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (MAPE as fractions)."""
        return {"feature": self.feature} | _figures(self) | {"sources": [share.to_json() for share in self.sources]}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _shares(errors: dict[str, float], left: dict[str, float], source_of: dict[str, str]) -> tuple[SourceShare, ...]:
    """Per source of the cases ``errors`` holds (id -> |error| now; ``left``: id -> left-out |error|)."""
    now: dict[str, list[float]] = defaultdict(list)
    held: dict[str, list[float]] = defaultdict(list)
    for case_id, error in errors.items():
        now[source_of[case_id]].append(error)
    for case_id, error in left.items():
        held[source_of[case_id]].append(error)
    names = sorted(now, key=lambda name: (-len(now[name]), name))
    return tuple(
        SourceShare(name, len(now[name]), sum(now[name]) / len(now[name]), len(held[name]), _mean(held[name]))
        for name in names
    )


def layout_groups(scores: Iterable[Scored], residuals: ResidualTable) -> list[LayoutGroup]:
    """One group per layout feature (and ``none``) that some scored training case has, in
    ``LAYOUT_FEATURES`` order; the left-out figures are those of the same cases in ``residuals``."""
    cases = [c for c in scores if c.kind == "training"]
    source_of = {c.id: c.source for c in cases}
    held = [r for r in residuals.of_kind("training") if r.id in source_of]
    groups = []
    for feature in (*LAYOUT_FEATURES, PLAIN):

        def member(layout: tuple[str, ...], feature: str = feature) -> bool:
            return not layout if feature == PLAIN else feature in layout

        errors = {c.id: abs(c.error) for c in cases if member(c.layout)}
        if not errors:
            continue
        left = {r.id: abs(predicted_over_measured(r) - 1) for r in held if member(r.layout)}
        now, out = list(errors.values()), list(left.values())
        shares = _shares(errors, left, source_of)
        groups.append(LayoutGroup(feature, len(now), sum(now) / len(now), len(out), _mean(out), shares))
    return groups
