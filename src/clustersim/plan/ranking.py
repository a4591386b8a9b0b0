"""A search's ranking of candidate layouts: their memory need and step time, the fastest that fit, and the
terms and memory of those a planner keeps (``plan.search.rank_layouts`` makes it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from functools import cached_property

import numpy as np
import numpy.typing as npt

from clustersim.compute.memory import MemoryArrays
from clustersim.execution import Layout, LayoutArrays
from clustersim.plan.space import CandidateGrid
from clustersim.training.pricing import OperationTimes
from clustersim.training.terms import StepTerms, TermTimes

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Ranking:
    """Candidate layouts with their memory need and step time.

    Memory is checked first, over the space's open grid (``plan.space.CandidateGrid``), and only the layouts
    that fit are built and priced (``fit_layouts``, ``fit_step_s``); every candidate (``layouts``) with its
    memory (``required_bytes``) is built on first reading, and the step times of those that do not fit are
    priced on first reading ``step_s`` (``price`` does it), so a search that asks only for the fastest never
    pays for them.
    """

    grid: CandidateGrid = field(repr=False)
    required_grid: FloatArray = field(repr=False)  # memory need of every grid position (``grid.arrays``'s)
    capacity_bytes: float
    headroom: float  # share of device memory a layout must leave free
    fit_positions: npt.NDArray[np.int64]  # grid positions of the layouts that fit, in candidate order
    fit_layouts: LayoutArrays
    fit_step_s: FloatArray  # step times of the layouts that fit, in candidate order
    price: Callable[[LayoutArrays], FloatArray] = field(repr=False, compare=False)
    # the memory of every grid position (``grid.arrays``'s), and the step terms of the layouts that fit where they
    # were priced in one call (up to ``CHUNK`` of them: a larger set's terms would hold tens of arrays of its
    # size); the estimates of the layouts a planner keeps read them instead of pricing those layouts again
    memory: MemoryArrays | None = field(default=None, repr=False, compare=False)
    fit_terms: StepTerms | None = field(default=None, repr=False, compare=False)
    # the layers each grid position offloads to fit (None: none; ``required_grid`` counts them), which its layouts
    # carry; ``memory`` holds the positions as if nothing were offloaded
    offloaded: FloatArray | None = field(default=None, repr=False, compare=False)

    @property
    def usable_bytes(self) -> float:
        """Device memory a layout may need: the capacity less the headroom."""
        return self.capacity_bytes * (1 - self.headroom)

    @property
    def count(self) -> int:
        """How many candidates (what a search reports as evaluated)."""
        return self.grid.count

    @cached_property
    def _positions(self) -> npt.NDArray[np.int64]:
        return self.grid.positions()

    @cached_property
    def layouts(self) -> LayoutArrays:
        """Every candidate, those that do not fit included (built on first use)."""
        return grid_layouts(self.grid, self._positions, self.offloaded)

    @cached_property
    def required_bytes(self) -> FloatArray:
        """Memory each candidate needs per device (read on first use)."""
        return np.asarray(self.grid.at(self.required_grid, self._positions), dtype=np.float64)

    @cached_property
    def fits(self) -> npt.NDArray[np.bool_]:
        """Which candidates fit in device memory with the headroom left free."""
        return np.asarray(self.required_bytes <= self.usable_bytes)

    @cached_property
    def step_s(self) -> FloatArray:
        """Step time of every candidate, those that do not fit included (priced on first use)."""
        step = np.empty(self.count)
        fits = self.fits
        step[fits] = self.fit_step_s
        if not fits.all():
            step[~fits] = self.price(self.layouts.select(~fits))
        return step

    def fastest(self, k: int) -> list[tuple[Layout, float]]:
        """The ``k`` fastest layouts that fit, fastest first, with their step times (ties: earlier first)."""
        order = _k_smallest(self.fit_step_s, k)
        return [(self.fit_layouts.layout(int(i)), float(self.fit_step_s[i])) for i in order]

    def with_pipelined(self, k: int, pool: int, reach: float) -> list[tuple[Layout, float]]:
        """The ``k`` fastest layouts that fit (as ``fastest``), then up to ``pool`` more: the fastest pipelined ones
        (pp > 1) that fit within ``reach`` of the fastest's step (1 + reach times it), whose last stage a search may
        still make lighter (``plan.stage_balance``)."""
        order = _k_smallest(self.fit_step_s, k)
        if not len(order):
            return []
        near = self.fit_step_s <= self.fit_step_s[order[0]] * (1 + reach)
        pipelined = np.where((self.fit_layouts.pp > 1) & near, self.fit_step_s, np.inf)
        pipelined[order] = np.inf
        more = _k_smallest(pipelined, pool) if pool and len(pipelined) else order[:0]
        return [(self.fit_layouts.layout(int(i)), float(self.fit_step_s[i])) for i in (*order, *more)]

    def fastest_evaluated(self, k: int) -> tuple[list[Layout], Evaluated | None]:
        """The ``k`` fastest layouts that fit (as ``fastest``) with their step terms and memory, one element
        each, where the ranking kept them (None: price them again)."""
        order = _k_smallest(self.fit_step_s, k)
        layouts = [self.fit_layouts.layout(int(i)) for i in order]
        offloads = any(layout.offload_layers for layout in layouts)  # the grid's memory holds them unoffloaded
        if self.fit_terms is None or self.memory is None or not layouts or offloads:
            return layouts, None
        return layouts, (
            terms_at(self.fit_terms, order),
            _memory_at(self.grid, self.memory, self.fit_positions[order]),
        )


def grid_layouts(grid: CandidateGrid, positions: npt.NDArray[np.int64], offloaded: FloatArray | None) -> LayoutArrays:
    """The layouts at grid ``positions``, each with the layers it offloads (a grid figure; None: none)."""
    layouts = grid.layouts(positions)
    if offloaded is None:
        return layouts
    return replace(layouts, offload_layers=grid.at(offloaded, positions).astype(np.int64))


Evaluated = tuple[StepTerms, MemoryArrays]  # step terms and memory of some layouts, one element each


def terms_at(terms: StepTerms, index: npt.NDArray[np.int64] | slice) -> StepTerms:
    """The step terms of the layouts at ``index``."""
    return StepTerms(
        times={name: TermTimes(t.link_s[index], t.exposed_s[index]) for name, t in terms.times.items()},
        micro_batches=terms.micro_batches[index],
        operations=[
            OperationTimes(op.name, op.forward_s[index], op.backward_s[index], op.in_head, op.kind)
            for op in terms.operations
        ],
    )


def _memory_at(grid: CandidateGrid, memory: MemoryArrays, positions: npt.NDArray[np.int64]) -> MemoryArrays:
    """The memory of the layouts at grid ``positions``, of the memory of every grid position."""
    return MemoryArrays(**{f.name: grid.at(getattr(memory, f.name), positions) for f in fields(memory)})


def _k_smallest(values: FloatArray, k: int) -> npt.NDArray[np.int64]:
    """Indices of the ``k`` smallest finite values, smallest first (ties: earlier first), as a stable sort
    would give them, without sorting all of ``values`` when ``k`` is small."""
    kth = np.partition(values, k - 1)[k - 1] if k < len(values) // 8 else np.nan
    if np.isfinite(kth):  # stable-sort only what is no larger than the k-th value
        few = np.flatnonzero(values <= kth)
        order = few[np.argsort(values[few], kind="stable")[:k]]
    else:
        order = np.argsort(values, kind="stable")[:k]
    return order[np.isfinite(values[order])]
