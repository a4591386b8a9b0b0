"""A transport experiment over several seeds: each figure's median, with its min and max.

A run is a list of per-transport results (``TransportResult`` or ``GroupResult``); ``over_seeds`` runs
it once per seed and combines the runs transport by transport, figure by figure: each figure is the
median over the seeds (the mean of the middle two for an even count), so the figures of one row can
come from different seeds. A run whose answer no seed draws (``seeds_to_run``) runs once.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from clustersim.network.transport.experiments import Scenario

R = TypeVar("R")

# figures that are the same for every seed by construction: kept from the first run
FIXED = ("transport", "num_messages")


@dataclass(frozen=True, slots=True)
class Seeded(Generic[R]):
    """A transport's result over ``seeds``: ``result`` holds each figure's median; ``values`` each
    figure's value per seed (in the order of ``seeds``)."""

    result: R
    seeds: tuple[int, ...]
    values: dict[str, tuple[float, ...]]

    def low_high(self, name: str) -> tuple[float, float]:
        """The least and the greatest of figure ``name`` over the seeds."""
        return min(self.values[name]), max(self.values[name])

    def spread_json(self) -> dict[str, dict[str, Any]]:
        """Per figure: its min and max over the seeds, the seeds and the value at each."""
        return {
            name: {"min": min(v), "max": max(v), "seeds": list(self.seeds), "values": list(v)}
            for name, v in self.values.items()
        }


def seeds_to_run(drawn: Sequence[str], seed: int, count: int) -> list[int]:
    """``seed``, ``seed + 1``, ... (``count`` of them) where the seed draws something, else ``seed`` alone."""
    return list(range(seed, seed + count)) if drawn else [seed]


def _median(values: Sequence[Any]) -> Any:
    middle = statistics.median(values)
    if all(isinstance(v, int) for v in values) and float(middle).is_integer():
        return int(middle)  # a count stays a count where its median is whole
    return float(middle) if not isinstance(middle, int) else middle


def combine(runs: Sequence[Sequence[R]], seeds: Sequence[int]) -> list[Seeded[R]]:
    """Runs of the same transports (one list per seed, in the order of ``seeds``) as one ``Seeded``
    per transport."""
    if not runs or len(runs) != len(seeds) or len({len(run) for run in runs}) != 1:
        raise ValueError(f"combine: {len(runs)} runs of unequal length for {len(seeds)} seeds")
    out = []
    for column in zip(*runs, strict=True):
        first = column[0]
        names = [f.name for f in fields(first) if f.name not in FIXED]
        values = {name: tuple(getattr(r, name) for r in column) for name in names}
        median = replace(first, **{name: _median(v) for name, v in values.items()})
        out.append(Seeded(median, tuple(seeds), values))
    return out


def over_seeds(run: Callable[[Scenario], Sequence[R]], scenario: Scenario, seeds: Sequence[int]) -> list[Seeded[R]]:
    """``run`` of ``scenario`` with each of ``seeds`` in place of its own, combined (``combine``)."""
    return combine([run(replace(scenario, seed=seed)) for seed in seeds], seeds)
