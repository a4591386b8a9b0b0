"""Searches over candidate layouts: the fastest that fits, the k fastest, and the Pareto front."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.plan.space import SearchSpace, candidate_layouts, why_no_layout
from clustersim.system import System
from clustersim.training.estimate import evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
_GIB = 2**30


@dataclass(frozen=True)
class Ranking:
    """Candidate layouts with their step time and memory need, one element each."""

    layouts: LayoutArrays
    step_s: FloatArray
    required_bytes: FloatArray
    capacity_bytes: float

    @property
    def fits(self) -> npt.NDArray[np.bool_]:
        """Which layouts fit in device memory."""
        return np.asarray(self.required_bytes <= self.capacity_bytes)

    def fastest(self, k: int) -> list[tuple[Layout, float]]:
        """The ``k`` fastest layouts that fit, fastest first, with their step times (ties: earlier first)."""
        step = np.where(self.fits, self.step_s, np.inf)
        order = np.argsort(step, kind="stable")[:k]
        return [(self.layouts.layout(int(i)), float(step[i])) for i in order if np.isfinite(step[i])]


def rank_layouts(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> Ranking:
    """Evaluate every candidate of ``space`` in one vectorized call."""
    layouts = candidate_layouts(model, system, job, space)
    if software is not None and software.zero_stages is not None:  # only the stages the framework implements
        layouts = layouts.select(np.isin(layouts.zero, software.zero_stages))
    if len(layouts) == 0:
        raise ClusterSimError(
            f"no layout of {model.name} keeps the rules on {system.num_devices} devices with global batch "
            f"{job.global_batch} and sequence {job.seq_len}: {why_no_layout(model, system, job, space)}",
            field="layout",
        )
    terms, memory = evaluate_layouts(model, system, layouts, job, efficiency=efficiency, cost=cost, software=software)
    return Ranking(layouts, terms.step_s, memory.required, system.memory_bytes)


def choose_layout(
    model: Transformer,
    system: System,
    job: TrainingJob,
    *,
    space: SearchSpace | None = None,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> Layout:
    """The fastest candidate layout that fits in memory (``ClusterSimError`` when none fits)."""
    ranking = rank_layouts(model, system, job, space=space, efficiency=efficiency, cost=cost, software=software)
    best = ranking.fastest(1)
    if not best:
        need = float(ranking.required_bytes.min()) / _GIB
        raise ClusterSimError(
            f"{model.name} does not fit on {system.name}: the leanest layout needs {need:.1f} GiB per device, "
            f"the device has {system.memory_bytes / _GIB:.1f} GiB; use more devices or a larger-memory accelerator",
            field="nodes",
        )
    return best[0][0]


def pareto_front(objectives: npt.ArrayLike) -> npt.NDArray[np.int64]:
    """Indices of the rows no other row beats on every column (all minimized), in input order.

    ``objectives`` has one row per candidate and one column per objective (step time, memory, cost).
    """
    values = np.asarray(objectives, dtype=float)
    if values.ndim != 2:
        raise ClusterSimError(f"objectives must be a 2-D array (candidates x objectives), got shape {values.shape}")
    no_worse = np.all(values[None, :, :] <= values[:, None, :], axis=2)  # [i, j]: j no worse than i anywhere
    better = np.any(values[None, :, :] < values[:, None, :], axis=2)  # [i, j]: j better than i somewhere
    dominated = np.any(no_worse & better, axis=1)
    return np.flatnonzero(~dominated)
