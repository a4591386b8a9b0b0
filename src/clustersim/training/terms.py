"""The registry of step terms: each term of a training step is one registered function.

A term has a name (``"tp comm"``), the words that name it as a bottleneck, and a function from a
step context (``clustersim.training.step.StepContext``) to its link time and exposed time per step,
one element per layout. The step time is the sum of the exposed times of every registered term, and
the estimate, its JSON and its bottleneck read the terms from here: a new term (a checkpoint
stall, time lost to failures) is one ``@step_term`` function, nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.training.pricing import OperationTimes

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class TermTimes:
    """Seconds per step of one term, one element per layout: busy on its links or units, and on the
    critical path after overlap."""

    link_s: FloatArray
    exposed_s: FloatArray

    def times(self, count: FloatArray) -> TermTimes:
        """This term ``count`` times over (per micro-batch times over a step's micro-batches)."""
        return TermTimes(count * self.link_s, count * self.exposed_s)


@dataclass(frozen=True)
class StepTerm:
    """A registered term: its name, its bottleneck words and the function that computes it."""

    name: str
    words: str
    compute: Callable[[Any], TermTimes]  # StepContext -> TermTimes


STEP_TERMS: list[StepTerm] = []


def step_term(name: str, words: str) -> Callable[[Callable[[Any], TermTimes]], Callable[[Any], TermTimes]]:
    """Register the decorated function as the term ``name``; terms are reported in registration order."""

    def register(compute: Callable[[Any], TermTimes]) -> Callable[[Any], TermTimes]:
        if any(term.name == name for term in STEP_TERMS):
            raise ClusterSimError(f"step term {name!r} is registered twice")
        STEP_TERMS.append(StepTerm(name, words, compute))
        return compute

    return register


def bottleneck_words(name: str) -> str:
    """How the bottleneck ``name`` reads in a sentence."""
    return next((term.words for term in STEP_TERMS if term.name == name), name)


@dataclass(frozen=True)
class StepTerms:
    """Every registered term for many layouts, with the micro-batch count and per-operation times."""

    times: dict[str, TermTimes]
    micro_batches: FloatArray
    operations: list[OperationTimes]  # per layer (or head) and micro-batch

    @property
    def step_s(self) -> FloatArray:
        """Step time: the exposed time of every term."""
        return np.asarray(sum(t.exposed_s for t in self.times.values()), dtype=np.float64)

    def __getitem__(self, name: str) -> TermTimes:
        return self.times[name]
