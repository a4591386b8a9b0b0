"""Which planned rows keep a plan's constraints, and how they rank: best first by the objective, each with why it
beats its runner-up (``planner_why``) and by how much."""

from __future__ import annotations

import math
from dataclasses import replace

from clustersim.errors import ClusterSimError
from clustersim.plan.plan_records import Constraints, PlanRow
from clustersim.plan.planner_why import objective_terms, why_better
from clustersim.plan.ties import tie_words, ties
from clustersim.units import format_seconds


def constrained(rows: list[PlanRow], limits: Constraints) -> list[PlanRow]:
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


def ranked(rows: list[PlanRow], objective: str, safe: bool) -> tuple[list[PlanRow], list[PlanRow]]:
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
            tie_words(objective)
            if ties(ours, theirs)
            else why_better(
                objective_terms(row.estimate, objective, row.point.system),
                objective_terms(other.estimate, objective, other.point.system),
            )
        )
        ranked.append(replace(row, why=why, margin=theirs / ours - 1 if ours > 0 else None, runner_up=other.name))
    return ranked, [ranked[i] for i in best]
