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

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.software import SoftwareProfile
from clustersim.errors import ClusterSimError
from clustersim.intervals import DEFAULT_LEVEL, Interval, Spread, spread_for
from clustersim.intervals.layout import layout_features
from clustersim.intervals.lookup import scale_of
from clustersim.plan.parallel import Executor, partitions, run_here
from clustersim.plan.planner_why import grouped_notes, objective_terms, why_better
from clustersim.plan.search import CandidateMemo, Ranking, RankRequest, pareto_front, rank_each
from clustersim.plan.space import SearchSpace
from clustersim.system import System
from clustersim.training.estimate import Estimate, estimate_layouts
from clustersim.training.job import TrainingJob
from clustersim.units import format_seconds
from clustersim.workload.transformer import Transformer

OBJECTIVES = ("time", "cost", "energy", "goodput")
DEFAULT_KEEP = 3  # layouts kept per point: the fastest that fit, so that each has a runner-up
DEFAULT_TOP = 5
Resilient = Callable[[Estimate, System], Estimate]  # an estimate with checkpoints and failures in its totals
Progress = Callable[[int, int], None]  # (points done, points in all)
PointResult = tuple[list["PlanRow"], int, str]  # a point's priced rows, the layouts evaluated, a note

SpreadKey = tuple[str, str, str, tuple[str, ...]]  # accelerator, framework, scale bucket, layout features


@dataclass(frozen=True)
class PlanPoint:
    """One system to plan on, with the job, framework, price offer and checkpoint policy that go with it.

    ``resilience`` turns an estimate's totals into the expected run with failures and checkpoints
    (``checkpoint`` names the policy in the output; None: failure-free totals only)."""

    system: System
    instance: str
    nodes: int
    job: TrainingJob
    software: SoftwareProfile
    efficiency: FamilyEfficiency | None = None
    offer: str = "on_demand"
    checkpoint: str = "none"
    resilience: Resilient | None = None

    @property
    def label(self) -> str:
        """The point in words: instance, nodes, framework, precision, batch, offer and checkpoint policy."""
        policy = "" if self.resilience is None else f", checkpoint {self.checkpoint}"
        return (
            f"{self.nodes} x {self.instance} ({self.software.name}, {self.job.precision.value}, batch "
            f"{self.job.global_batch}, {self.offer.replace('_', ' ')}{policy})"
        )


@dataclass(frozen=True)
class Constraints:
    """What a plan must keep: wall time (``deadline_s``), cost (``budget_usd``) and instances (``max_nodes``)."""

    deadline_s: float | None = None
    budget_usd: float | None = None
    max_nodes: int | None = None


@dataclass(frozen=True)
class PlanRow:
    """One priced layout on one point, with its interval and, once ranked, why it beats its runner-up."""

    point: PlanPoint
    estimate: Estimate
    spread: Spread | None
    why: str = ""
    margin: float | None = None  # the runner-up's objective over this row's, less one
    runner_up: str = ""

    @property
    def time_s(self) -> float:
        """Failure-free time of the token budget."""
        totals = self.estimate.totals
        assert totals is not None
        return totals.time_s if totals.failures is None else totals.failures.failure_free_time_s

    @property
    def goodput_time_s(self) -> float | None:
        """Expected wall time with failures and checkpoints (None without a checkpoint policy)."""
        totals = self.estimate.totals
        assert totals is not None
        return None if totals.failures is None else totals.time_s

    @property
    def wall_s(self) -> float:
        """The time the deadline and the front read: goodput-adjusted where a checkpoint policy is given."""
        goodput = self.goodput_time_s
        return self.time_s if goodput is None else goodput

    @property
    def cost_usd(self) -> float | None:
        """Instance cost at the offer's price over the wall time (with the storage's, under a policy); None
        where the system has no price (a cluster that is not a catalogued instance)."""
        totals = self.estimate.totals
        assert totals is not None
        return totals.cost_usd

    @property
    def energy_j(self) -> float | None:
        """Energy at board power over the wall time (waits at the idle fraction, under a policy); None where
        the catalog gives no board power."""
        totals = self.estimate.totals
        assert totals is not None
        return None if totals.energy_kwh is None else totals.energy_kwh * 3.6e6

    def value(self, objective: str, safe: bool = False) -> float:
        """The figure ``objective`` minimizes (rows without an energy are left out before energy is ranked);
        ``safe``: its interval's upper end (the figure if the model errs as its left-out runs did)."""
        figures = {"energy": self.energy_j, "cost": self.cost_usd, "time": self.time_s, "goodput": self.wall_s}
        figure = figures[objective]
        assert figure is not None
        return figure * math.exp(self.spread.q_hi) if safe and self.spread is not None else figure

    @property
    def interval(self) -> dict[str, Interval]:
        """Intervals of the wall time, cost and energy (empty without residuals of the kind)."""
        if self.spread is None:
            return {}
        found = {"time_s": self.spread.duration(self.wall_s)}
        if self.cost_usd is not None:
            found["cost_usd"] = self.spread.duration(self.cost_usd)
        if self.energy_j is not None:
            found["energy_j"] = self.spread.duration(self.energy_j)
        return found

    @property
    def name(self) -> str:
        """The row in words: its point and layout."""
        return f"{self.point.label}: {self.estimate.layout.describe()}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON, units in the names."""
        found = self.interval
        point, estimate = self.point, self.estimate
        return {
            "instance": point.instance,
            "nodes": point.nodes,
            "devices": point.system.num_devices,
            "framework": point.software.name,
            "precision": point.job.precision.value,
            "global_batch": point.job.global_batch,
            "seq_len": point.job.seq_len,
            "price_offer": point.offer,
            "checkpoint": point.checkpoint if point.resilience is not None else None,
            "layout": estimate.layout.describe(),
            "layout_fields": estimate.layout.model_dump(mode="json"),
            "step_s": estimate.step_s,
            "mfu": estimate.mfu,
            "time_s": self.time_s,
            "goodput_time_s": self.goodput_time_s,
            "cost_usd": self.cost_usd,
            "energy_j": self.energy_j,
            "memory_required_bytes": estimate.memory.required_bytes,
            "interval": None
            if not found
            else {
                "level": self.spread.level if self.spread else None,
                "basis": self.spread.basis if self.spread else "",
                "note": self.spread.note if self.spread else "",
                **{key: {"low": i.low, "high": i.high} for key, i in found.items()},
            },
            "why": self.why,
            "margin": self.margin,
            "runner_up": self.runner_up,
        }


@dataclass(frozen=True)
class Plan:
    """The rows that keep every constraint (best first by the objective), the front and the top rows."""

    objective: str
    safe: bool  # ranked by the upper end of each row's interval
    rows: tuple[PlanRow, ...]
    pareto: tuple[PlanRow, ...]  # by wall time, fastest first
    top: tuple[PlanRow, ...]  # the best row of each point, best first
    notes: tuple[str, ...]
    evaluated: int  # layouts evaluated in the vectorized calls
    elapsed_s: float
    points: int
    priced: int  # rows priced, before the constraints

    @property
    def layouts_per_s(self) -> float:
        """Layouts evaluated per second of the whole plan (enumerate, check, evaluate, rank, price)."""
        return self.evaluated / self.elapsed_s if self.elapsed_s > 0 else 0.0

    def to_json(self) -> dict[str, Any]:
        """``pareto``, ``top``, the search's own figures and the notes."""
        return {
            "objective": self.objective,
            "safe": self.safe,
            "pareto": [row.to_json() for row in self.pareto],
            "top": [row.to_json() for row in self.top],
            "evaluated": self.evaluated,
            "elapsed_s": self.elapsed_s,
            "layouts_per_s": self.layouts_per_s,
            "points": self.points,
            "priced": self.priced,
            "feasible": len(self.rows),
            "notes": list(self.notes),
        }


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
    feasible = _constrained(rows, limits)
    ranked, distinct = _ranked(feasible, objective, safe)
    priced = [row for row in ranked if row.cost_usd is not None]
    wall_cost = np.array([[row.wall_s, row.cost_usd] for row in priced]).reshape(len(priced), 2)
    front = sorted((priced[int(i)] for i in pareto_front(wall_cost)), key=lambda r: (r.wall_s, r.cost_usd or 0.0))
    if len(priced) < len(ranked):
        said.append(f"{len(ranked) - len(priced)} rows have no price and are left off the time-cost front")
    return Plan(
        objective=objective,
        safe=safe,
        rows=tuple(ranked),
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
    spreads: dict[SpreadKey, Spread | None] = field(default_factory=dict)
    candidates: CandidateMemo = field(default_factory=dict)  # shared by the points of one node count

    def __call__(self, points: list[PlanPoint]) -> list[PointResult]:
        keys = [shared_key(point) for point in points]
        last = {key: i for i, key in enumerate(keys)}
        firsts: dict[tuple[int, ...], PlanPoint] = {}
        for key, point in zip(keys, points, strict=True):
            firsts.setdefault(key, point)
        requests = (RankRequest(p.system, p.job, p.efficiency, p.software) for p in firsts.values())
        ranked = rank_each(self.model, requests, space=self.space, memo=self.candidates)
        live: dict[tuple[int, ...], Ranking | ClusterSimError] = {}
        found = []
        for i, (key, point) in enumerate(zip(keys, points, strict=True)):
            fresh = key not in live
            if fresh:
                live[key] = next(ranked)
            found.append(
                _point_rows(self.model, point, (live[key], fresh), self.keep, self.spreads, self.level, self.needs)
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
    chosen = [
        layout.model_copy(update={"uneven_stages": model.layers % (layout.pp * layout.vp) != 0}) for layout in best
    ]  # the flag counts in the rules only: the ranking's terms and memory hold for the chosen layouts
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
        features = layout_features(
            pp=layout.pp, cp=layout.cp, ep=layout.ep, zero=layout.zero, precision=job.precision.value
        )
        # the spread reads the devices only through their scale bucket: one lookup per bucket, not per count
        key = (system.accelerator.id, software.name, scale_of(system.num_devices), features)
        if key not in spreads:
            spreads[key] = spread_for(
                "training", accelerator=system.accelerator.id, family=system.accelerator.family,
                framework=software.name, devices=system.num_devices, level=level, layout=features,
            )  # fmt: skip
        if point.resilience is not None:
            estimate = point.resilience(estimate, system)
        rows.append(PlanRow(point, estimate, spreads[key]))
    return rows, counted, ""


def _constrained(rows: list[PlanRow], limits: Constraints) -> list[PlanRow]:
    """The rows that keep the deadline and the budget; the error names the one that binds."""
    on_time = [r for r in rows if limits.deadline_s is None or r.wall_s <= limits.deadline_s]
    budget = limits.budget_usd
    in_budget = [r for r in rows if budget is None or (r.cost_usd is not None and r.cost_usd <= budget)]
    affordable = {id(r) for r in in_budget}
    both = [r for r in on_time if id(r) in affordable]
    if both:
        return both
    fastest = min(rows, key=lambda r: r.wall_s)
    cheapest = min(rows, key=lambda r: math.inf if r.cost_usd is None else r.cost_usd)
    if not on_time:
        raise ClusterSimError(
            f"--deadline {format_seconds(limits.deadline_s or 0)}: no plan finishes in time; the fastest, "
            f"{fastest.name}, takes {format_seconds(fastest.wall_s)} (raise --deadline, or add instances or nodes)",
            field="--deadline",
            value=limits.deadline_s,
        )
    if not in_budget:
        raise ClusterSimError(
            f"--budget ${limits.budget_usd:,.0f}: no plan costs that little; the cheapest, {cheapest.name}, costs "
            f"${cheapest.cost_usd or 0:,.0f} (raise --budget, or try other instances or --price)",
            field="--budget",
            value=limits.budget_usd,
        )
    quick = min(in_budget, key=lambda r: r.wall_s)
    raise ClusterSimError(
        f"--deadline {format_seconds(limits.deadline_s or 0)} with --budget ${limits.budget_usd:,.0f}: each holds "
        f"alone, not both; the fastest plan within budget, {quick.name}, takes {format_seconds(quick.wall_s)}",
        field="--deadline",
        value=limits.deadline_s,
    )


def _ranked(rows: list[PlanRow], objective: str, safe: bool) -> tuple[list[PlanRow], list[PlanRow]]:
    """``rows`` best first by ``objective`` (ties: the shorter wall time, the lower cost, the input order), and the best
    row of each point among them; each row says why it beats its runner-up and by how much. The runner-up of
    a point's best row is the next point's best row (what else to rent), or, for the last point, its own next
    layout; of any other row, the next row."""
    order = sorted(
        rows, key=lambda r: (r.value(objective, safe), r.wall_s, math.inf if r.cost_usd is None else r.cost_usd)
    )
    seen: set[int] = set()
    best: list[int] = []
    for i, row in enumerate(order):
        if id(row.point) not in seen:
            seen.add(id(row.point))
            best.append(i)
    following = {i: best[k + 1] for k, i in enumerate(best[:-1])}
    ranked = []
    for i, row in enumerate(order):
        j = following.get(i, i + 1)
        if j >= len(order):
            ranked.append(replace(row, why="no runner-up: the only feasible row left"))
            continue
        other = order[j]
        ours, theirs = row.value(objective, safe), other.value(objective, safe)
        why = (
            f"ties the runner-up on {objective}"
            if ours == theirs
            else why_better(
                objective_terms(row.estimate, objective, row.point.system),
                objective_terms(other.estimate, objective, other.point.system),
            )
        )
        ranked.append(replace(row, why=why, margin=theirs / ours - 1 if ours > 0 else None, runner_up=other.name))
    return ranked, [ranked[i] for i in best]
