"""A plan's points searched in partitions give the plan of one point after another: the same rows, front, top
and layouts counted, in this process or on a real local Ray instance (2 CPUs; skipped without the ``ray``
extra); points that differ only in their price offer share one ranking, its layouts counted once."""

from __future__ import annotations

import itertools

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_profiles
from clustersim.errors import ClusterSimError
from clustersim.plan import search
from clustersim.plan.parallel import PARTITIONS_PER_WORKER, POINTS_PER_PARTITION, RayPoints, partitions, run_here
from clustersim.plan.planner import Plan, batch_key, plan_training, shared_key
from clustersim.plan.planner_grid import PlanGrid, grid_points
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
GRID = PlanGrid(instances=("p5.48xlarge", "p5en.48xlarge"), nodes=(4, 8, 16), tokens=2e12)
POINTS, NOTES = grid_points(LLAMA_70B, CATALOG, GRID, profiles=PROFILES)


def _same(a: Plan, b: Plan) -> None:
    assert [r.to_json() for r in a.rows] == [r.to_json() for r in b.rows]
    assert [r.name for r in a.pareto] == [r.name for r in b.pareto]
    assert [r.name for r in a.top] == [r.name for r in b.top]
    assert (a.evaluated, a.points, a.priced, a.notes) == (b.evaluated, b.points, b.priced, b.notes)


def test_partitions_are_consecutive_and_cover_every_point_once():
    items = list(range(23))
    assert partitions(items, 1) == [[i] for i in items]  # no keys: one point each
    parts = partitions(items, 2)
    assert [i for part in parts for i in part] == items
    assert len(parts) <= 2 * PARTITIONS_PER_WORKER and max(map(len, parts)) - min(map(len, parts)) <= 3


def test_partitions_keep_what_points_share_together():
    items = list(range(40))
    family = lambda i: i // 20  # noqa: E731  (what can be priced in one call: a chip family)
    system = lambda i: i // 2  # noqa: E731  (what shares a ranking: two price offers of one system)
    one = partitions(items, 1, together=system, batch=family)
    assert [len(p) for p in one] == [
        POINTS_PER_PARTITION,
        20 - POINTS_PER_PARTITION,
    ] * 2  # cut where the family changes
    for workers in (2, 3):
        parts = partitions(items, workers, together=system, batch=family)
        assert [i for part in parts for i in part] == items
        assert all(len({family(i) for i in part}) == 1 for part in parts)
        assert all(system(part[0]) != system(before[-1]) for before, part in itertools.pairwise(parts))
        assert len(parts) >= workers
    odd = partitions(list(range(9)), 4, together=lambda i: i // 3)  # runs of 3 never split, even past the size
    assert odd == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]


def test_the_points_of_a_plan_are_priced_in_few_calls(monkeypatch):
    parts = partitions(POINTS, 1, together=shared_key, batch=batch_key)
    assert [len(p) for p in parts] == [len(POINTS)]  # H100 and H200 (one family, one framework): one partition
    calls = []
    real = search.step_terms

    def counted(*args, **kwargs):  # the real step, its calls counted
        calls.append(len(args[3]))
        return real(*args, **kwargs)

    monkeypatch.setattr(search, "step_terms", counted)
    plan = plan_training(LLAMA_70B, POINTS, notes=NOTES)
    assert len(calls) == 1 and calls[0] > 0 and plan.evaluated >= calls[0]  # six systems, one vectorized call


def test_partitions_in_any_order_give_the_plan_of_one_point_after_another():
    def backwards(task, parts):  # finishes the last partition first
        for index in reversed(range(len(parts))):
            yield index, task(parts[index])

    seen = []
    one_by_one = plan_training(LLAMA_70B, POINTS, notes=NOTES)
    reordered = plan_training(
        LLAMA_70B, POINTS, notes=NOTES, executor=backwards, workers=2, progress=lambda d, n: seen.append((d, n))
    )
    _same(one_by_one, reordered)
    assert seen[-1] == (len(POINTS), len(POINTS)) and [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_points_that_differ_only_in_their_offer_share_one_ranking():
    offers = PlanGrid(instances=("p5.48xlarge",), nodes=(4, 8), tokens=2e12, offers=("on_demand", "capacity_block"))
    points, notes = grid_points(LLAMA_70B, CATALOG, offers, profiles=PROFILES)
    both = plan_training(LLAMA_70B, points, notes=notes)
    alone = [plan_training(LLAMA_70B, [p], notes=notes) for p in points]
    assert [p.offer for p in points] == ["on_demand", "capacity_block"] * 2 and points[0].system is points[1].system
    assert both.evaluated == alone[0].evaluated + alone[2].evaluated  # each system's layouts once
    for point, single in zip(points, alone, strict=True):
        mine = [r for r in both.rows if r.point is point]
        assert sorted(r.estimate.step_s for r in mine) == sorted(r.estimate.step_s for r in single.rows)
        assert {r.point.offer for r in mine} == {point.offer}


def test_ray_gives_the_plan_of_this_process():
    ray = pytest.importorskip("ray")
    here = plan_training(LLAMA_70B, POINTS, notes=NOTES, executor=run_here)
    with RayPoints(ray, workers=2) as executor:
        assert executor.cpus == 2
        there = plan_training(LLAMA_70B, POINTS, notes=NOTES, executor=executor, workers=executor.cpus)
    assert not ray.is_initialized()  # the Ray started here is shut down
    _same(here, there)


def test_a_worker_count_below_one_is_refused():
    with pytest.raises(ClusterSimError, match="--workers: 0 must be at least 1"):
        RayPoints(object(), workers=0)
