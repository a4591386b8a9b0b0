"""What to rent and how to lay it out: a training job planned over systems, frameworks, precisions and layouts.

Each :class:`PlanPoint` is one system (an instance type at a node count) with a framework, a precision, a
global batch, a price offer and a checkpoint policy. :func:`plan_training` ranks every layout the framework
runs on each point in one vectorized call (``plan.search.rank_layouts``, memory headroom included), keeps the
fastest few that fit, prices them over the token budget (time, cost at the offer's price, energy at board
power, and with a checkpoint policy the expected wall time with failures and checkpoints), drops those that
break a constraint (deadline, budget, node count), and returns the Pareto front of wall time against cost
and the top rows by the objective, each with its interval (``clustersim.intervals``), the term of the step
it shrinks against the runner-up and its margin. A point that cannot run (a framework on a chip it does not
run on, a model that does not fit, no price) is skipped with a note; when nothing is left, the error names
the constraint that binds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.intervals import DEFAULT_LEVEL, ResidualTable, Spread, load_residuals, spread_for
from clustersim.intervals.layout import job_features
from clustersim.intervals.lookup import scale_of
from clustersim.plan.parallel import Executor, partitions, run_here
from clustersim.plan.plan_records import Constraints as Constraints
from clustersim.plan.plan_records import Plan as Plan
from clustersim.plan.plan_records import PlanPoint as PlanPoint
from clustersim.plan.plan_records import PlanRow as PlanRow
from clustersim.plan.plan_records import Resilient as Resilient
from clustersim.plan.planner_rank import constrained, ranked
from clustersim.plan.planner_why import grouped_notes
from clustersim.plan.search import CandidateMemo, Ranking, RankRequest, pareto_front, rank_each
from clustersim.plan.space import SearchSpace
from clustersim.plan.stage_balance import BALANCE_POOL, BALANCE_REACH, chosen_layouts
from clustersim.training.estimate import estimate_layouts
from clustersim.workload.transformer import Transformer

OBJECTIVES = ("time", "cost", "energy", "goodput")
DEFAULT_KEEP = 3  # layouts kept per point: the fastest that fit, so that each has a runner-up
DEFAULT_TOP = 5
Progress = Callable[[int, int], None]  # (points done, points in all)
PointResult = tuple[list[PlanRow], int, str]  # a point's priced rows, the layouts evaluated, a note

SpreadKey = tuple[str, str, str, str, tuple[str, ...], float]  # kind, accelerator, framework, scale, features, level
# the spreads of the packaged residuals looked up so far in this process (a pure function of the table, read once):
# plans after the first (a sweep's, a worker's) read them here
_SPREADS: dict[SpreadKey, Spread | None] = {}
_SPREADS_OF: list[ResidualTable] = []  # the table they were read from


def _spreads() -> dict[SpreadKey, Spread | None]:
    """The spreads looked up so far, of the residual table read now (emptied when it is another)."""
    table = load_residuals()
    if not _SPREADS_OF or _SPREADS_OF[0] is not table:
        _SPREADS.clear()
        _SPREADS_OF[:] = [table]
    return _SPREADS


def plan_training(
    model: Transformer,
    points: Sequence[PlanPoint],
    *,
    objective: str = "time",
    safe: bool = False,
    constraints: Constraints | None = None,
    top: int = DEFAULT_TOP,
    keep: int = DEFAULT_KEEP,
    space: SearchSpace | None = None,
    level: float = DEFAULT_LEVEL,
    notes: Sequence[str] = (),
    progress: Progress | None = None,
    executor: Executor = run_here,
    workers: int = 1,
) -> Plan:
    """Plan ``model``'s training over ``points`` (see the module's note), ranked by ``objective`` (``safe``: by
    its interval's upper end); ``ClusterSimError`` when no row is left, naming the constraint that binds.
    ``executor`` searches the points (``plan.parallel``: here, or on Ray workers, partitions sized for
    ``workers``); the plan is the same either way."""
    if objective not in OBJECTIVES:
        raise ClusterSimError(
            f"objective: unknown objective {objective!r} (valid: {', '.join(OBJECTIVES)})",
            field="objective",
            value=objective,
        )
    if top < 1 or keep < 1:
        raise ClusterSimError(f"top and keep must be at least 1, got {top} and {keep}", field="top", value=top)
    if objective == "goodput" and not any(p.resilience is not None for p in points):
        raise ClusterSimError(
            "objective goodput: the goodput-adjusted time needs a checkpoint policy and its storage (--storage)",
            field="objective",
            value=objective,
        )
    limits = constraints or Constraints()
    started = time.perf_counter()
    said = list(notes)
    evaluated = 0
    rows: list[PlanRow] = []
    wanted = [p for p in points if limits.max_nodes is None or p.nodes <= limits.max_nodes]
    if points and not wanted:
        raise ClusterSimError(
            f"--max-nodes {limits.max_nodes}: every point has more instances (the fewest: "
            f"{min(p.nodes for p in points)})",
            field="--max-nodes",
            value=limits.max_nodes,
        )
    needs = {"energy"} if objective == "energy" else set()
    needs |= {"cost"} if objective == "cost" or limits.budget_usd is not None else set()
    parts = partitions(wanted, workers, together=shared_key, batch=batch_key)
    results: dict[int, list[PointResult]] = {}
    task = _PlanPoints(model, space, keep, level, frozenset(needs))
    for index, found in executor(task, parts):
        results[index] = found
        if progress is not None:
            progress(sum(len(parts[i]) for i in results), len(wanted))
    for found_rows, count, note in (result for index in sorted(results) for result in results[index]):
        evaluated += count
        rows.extend(found_rows)
        if note:
            said.append(note)
    if not rows:
        raise ClusterSimError(
            "no point could be planned: " + ("; ".join(said) if said else "no points given"), field="plan"
        )
    feasible = constrained(rows, limits)
    ordered, distinct = ranked(feasible, objective, safe)
    priced = [row for row in ordered if row.cost_usd is not None]
    wall_cost = np.array([[row.wall_s, row.cost_usd] for row in priced]).reshape(len(priced), 2)
    front = sorted((priced[int(i)] for i in pareto_front(wall_cost)), key=lambda r: (r.wall_s, r.cost_usd or 0.0))
    if len(priced) < len(ordered):
        said.append(f"{len(ordered) - len(priced)} rows have no price and are left off the time-cost front")
    return Plan(
        objective=objective,
        safe=safe,
        rows=tuple(ordered),
        pareto=tuple(front),
        top=tuple(distinct[:top]),
        notes=grouped_notes(said),
        evaluated=evaluated,
        elapsed_s=time.perf_counter() - started,
        points=len(wanted),
        priced=len(rows),
    )


@dataclass
class _PlanPoints:
    """The task an executor runs: ``_point_rows`` of each point it is given. Points that share their system, job,
    framework and fractions (other offers or checkpoint policies) share one ranking, its layouts counted once,
    kept until the last of them; consecutive points on one framework, fractions, precision and sequence length
    are ranked together (``plan.search.rank_each``: their layouts priced in one vectorized call)."""

    model: Transformer
    space: SearchSpace | None
    keep: int
    level: float
    needs: frozenset[str]
    candidates: CandidateMemo = field(default_factory=dict)  # shared by the points of one node count

    def __call__(self, points: list[PlanPoint]) -> list[PointResult]:
        keys = [shared_key(point) for point in points]
        last = {key: i for i, key in enumerate(keys)}
        firsts: dict[tuple[int, ...], PlanPoint] = {}
        for key, point in zip(keys, points, strict=True):
            firsts.setdefault(key, point)
        requests = (RankRequest(p.system, p.job, p.efficiency, p.software) for p in firsts.values())
        spreads = _spreads()
        ranked = rank_each(self.model, requests, space=self.space, memo=self.candidates)
        live: dict[tuple[int, ...], Ranking | ClusterSimError] = {}
        found = []
        for i, (key, point) in enumerate(zip(keys, points, strict=True)):
            fresh = key not in live
            if fresh:
                live[key] = next(ranked)
            uneven = (self.space or SearchSpace()).uneven_stages
            found.append(
                _point_rows(self.model, point, (live[key], fresh), self.keep, spreads, self.level, self.needs, uneven)
            )
            if last[key] == i:  # a large space's arrays are large: keep a ranking only while a point needs it
                del live[key]
        return found


def shared_key(point: PlanPoint) -> tuple[int, ...]:
    """Points with equal keys share one ranking: the same system, job, framework and fractions (points are alive
    while a plan runs, so their objects' ids stay theirs)."""
    return id(point.system), id(point.job), id(point.software), id(point.efficiency)


def batch_key(point: PlanPoint) -> tuple[Any, ...]:
    """Points with equal keys can be ranked in one vectorized call: one framework, set of fractions (the family's
    where none is given), precision and sequence length."""
    fractions = point.system.accelerator.family if point.efficiency is None else id(point.efficiency)
    return id(point.software), fractions, point.job.precision, point.job.seq_len


def _point_rows(
    model: Transformer,
    point: PlanPoint,
    ranked: tuple[Ranking | ClusterSimError, bool],
    keep: int,
    spreads: dict[SpreadKey, Spread | None],
    level: float,
    needs: frozenset[str],
    space_uneven: bool | None = None,
) -> PointResult:
    """The priced rows of one point, the layouts evaluated (none where its ranking was made for an earlier
    point), and a note where the point is skipped: an instance not offered at the point's price, a system
    without a price where cost counts, no board power where energy is the objective. A system that is no
    catalogued instance (a published run's cluster) keeps its rows unpriced otherwise."""
    system, job, software = point.system, point.job, point.software
    ranking, fresh = ranked
    if isinstance(ranking, ClusterSimError):
        return [], 0, f"skipped {point.label}: {ranking}"
    counted = ranking.count if fresh else 0
    best, evaluated = ranking.fastest_evaluated(keep)
    if not best:
        need = float(ranking.required_bytes.min()) / 2**30
        usable = ranking.usable_bytes / 2**30
        return (
            [],
            counted,
            (
                f"skipped {point.label}: does not fit, the leanest layout needs {need:.1f} GiB per device of "
                f"{usable:.1f} GiB usable ({ranking.headroom:.0%} headroom)"
            ),
        )
    contenders = ranking.with_pipelined(keep, BALANCE_POOL, BALANCE_REACH)
    chosen = chosen_layouts(
        model, system, job, contenders, keep=keep, space_uneven=space_uneven, usable_bytes=ranking.usable_bytes,
        software=software, efficiency=point.efficiency,
    )  # fmt: skip
    if [layout.describe() for layout in chosen] != [layout.describe() for layout in best]:
        evaluated = None  # a balanced stage, or a pipeline that overtook, is priced again
    estimates = estimate_layouts(
        model, system, chosen, job, offer=point.offer, efficiency=point.efficiency, software=software,
        evaluated=evaluated,
    )  # fmt: skip
    rows = []
    for layout, estimate in zip(chosen, estimates, strict=True):
        totals = estimate.totals
        if totals is None:
            raise ClusterSimError("plan: a training plan needs a token budget (tokens)", field="tokens")
        if totals.cost_usd is None and ("cost" in needs or system.instance is not None):  # not offered so
            return [], counted, f"skipped {point.label}: {totals.price_note}"
        if totals.energy_kwh is None and "energy" in needs:
            return [], counted, f"skipped {point.label}: no board power in the catalog, so no energy"
        features = job_features(layout, job)
        # the spread reads the devices only through their scale bucket: one lookup per bucket, not per count
        found = {}
        for kind in ("training", "memory"):
            key = (kind, system.accelerator.id, software.name, scale_of(system.num_devices), features, level)
            if key not in spreads:
                spreads[key] = spread_for(
                    kind, accelerator=system.accelerator.id, family=system.accelerator.family,
                    framework=software.name, devices=system.num_devices, level=level, layout=features,
                )  # fmt: skip
            found[kind] = spreads[key]
        if point.resilience is not None:
            estimate = point.resilience(estimate, system)
        rows.append(PlanRow(point, estimate, found["training"], memory_spread=found["memory"]))
    return rows, counted, ""
