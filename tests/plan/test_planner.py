"""``plan.planner``: the Pareto front is the set of rows no other beats on both time and cost, constraints
exclude rows or name the one that binds, cost is price x nodes x hours, energy grows with devices x time,
a combination that cannot run is a note, and every ranked row says why it wins and by how much. Relations
only: predicted step times move when the model's constants are recalibrated."""

from __future__ import annotations

import math

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_profiles
from clustersim.errors import ClusterSimError
from clustersim.plan.planner import Constraints, Plan, plan_training
from clustersim.plan.planner_grid import PlanGrid, expand_counts, grid_points
from clustersim.plan.ties import TIE_SHARE
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
GRID = PlanGrid(
    instances=("p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"), nodes=(16, 32, 64), tokens=2e12,
    offers=("on_demand", "capacity_block"),
)  # fmt: skip


def plan(grid: PlanGrid = GRID, **options) -> Plan:
    points, notes = grid_points(LLAMA_70B, CATALOG, grid, profiles=PROFILES)
    return plan_training(LLAMA_70B, points, notes=notes, **options)


@pytest.fixture(scope="module")
def wide() -> Plan:
    return plan()


def dominates(a, b) -> bool:
    return a.wall_s <= b.wall_s and a.cost_usd <= b.cost_usd and (a.wall_s < b.wall_s or a.cost_usd < b.cost_usd)


def test_the_front_holds_every_row_no_other_beats_on_time_and_cost_and_no_other(wide):
    front = {id(r) for r in wide.pareto}
    assert len(wide.pareto) >= 2 and len(wide.rows) > len(wide.pareto)
    for row in wide.rows:
        beaten = any(dominates(other, row) for other in wide.rows)
        assert beaten == (id(row) not in front), row.name
    times = [r.wall_s for r in wide.pareto]
    costs = [r.cost_usd for r in wide.pareto]
    assert times == sorted(times) and costs == sorted(costs, reverse=True)  # faster costs more along the front


def test_cost_is_the_offer_price_times_nodes_times_hours(wide):
    for row in wide.rows:
        entry = CATALOG.instance(row.point.instance)
        price = getattr(entry, row.point.offer).usd_per_hour
        assert row.cost_usd == pytest.approx(price * row.point.nodes * row.time_s / 3600, rel=1e-9)
    offers = {r.point.offer for r in wide.rows}
    assert offers == {"on_demand", "capacity_block"}


def test_energy_grows_with_devices_times_time_on_one_chip(wide):
    for instance in GRID.instances:
        rows = sorted((r for r in wide.rows if r.point.instance == instance), key=lambda r: r.point.nodes * r.time_s)
        energy = [r.energy_j for r in rows]
        assert all(e is not None for e in energy) and energy == sorted(energy)
        watts = {round(r.energy_j / (r.point.system.num_devices * r.time_s), 6) for r in rows}
        assert len(watts) == 1  # board power per device


def test_rows_are_ranked_by_the_objective_with_a_reason_and_a_margin():
    for objective, figure in (("time", "time_s"), ("cost", "cost_usd"), ("energy", "energy_j")):
        found = plan(objective=objective, top=4)
        values = [getattr(r, figure) for r in found.top]
        assert values == sorted(values)
        assert len({id(r.point) for r in found.top}) == len(found.top)  # one row per point
        for row in found.top:
            assert row.runner_up and row.margin is not None and row.margin >= 0
            tied = row.margin < TIE_SHARE and row.why == f"ties the runner-up on {objective} (within 0.01%)"
            assert (row.why.startswith("less ") and row.margin >= TIE_SHARE) or tied
        assert found.evaluated > 1000 and found.elapsed_s > 0
        assert found.layouts_per_s == pytest.approx(found.evaluated / found.elapsed_s)
    cheapest = plan(objective="cost", top=1).top[0]
    assert cheapest.cost_usd == min(r.cost_usd for r in plan(objective="time").rows)


def test_every_interval_brackets_its_figure(wide):
    for row in wide.rows:
        found = row.interval
        assert set(found) == {"time_s", "cost_usd", "energy_j"}
        assert found["time_s"].low < row.wall_s < found["time_s"].high
        assert found["cost_usd"].low < row.cost_usd < found["cost_usd"].high


def test_deadline_and_budget_exclude_rows(wide):
    times = sorted(r.wall_s for r in wide.rows)
    costs = sorted(r.cost_usd for r in wide.rows)
    deadline, budget = times[len(times) // 2], costs[len(costs) // 2]
    on_time = plan(constraints=Constraints(deadline_s=deadline))
    assert on_time.rows and all(r.wall_s <= deadline for r in on_time.rows)
    assert len(on_time.rows) < len(wide.rows)
    cheap = plan(constraints=Constraints(budget_usd=budget))
    assert cheap.rows and all(r.cost_usd <= budget for r in cheap.rows)
    few = plan(constraints=Constraints(max_nodes=32))
    assert few.rows and all(r.point.nodes <= 32 for r in few.rows) and few.points < wide.points


def test_an_impossible_constraint_is_named(wide):
    fastest = min(r.wall_s for r in wide.rows)
    cheapest = min(r.cost_usd for r in wide.rows)
    with pytest.raises(ClusterSimError, match=r"--deadline .*the fastest") as late:
        plan(constraints=Constraints(deadline_s=fastest / 2))
    assert late.value.field == "--deadline"
    with pytest.raises(ClusterSimError, match=r"--budget .*the cheapest") as poor:
        plan(constraints=Constraints(budget_usd=cheapest / 2))
    assert poor.value.field == "--budget"
    # each holds alone: the fastest row is dear, the cheapest slow
    quick = min(wide.rows, key=lambda r: r.wall_s)
    thrifty = min(wide.rows, key=lambda r: r.cost_usd)
    assert quick.cost_usd > thrifty.cost_usd and thrifty.wall_s > quick.wall_s
    both = Constraints(deadline_s=quick.wall_s * 1.0001, budget_usd=thrifty.cost_usd * 1.0001)
    if not any(r.wall_s <= both.deadline_s and r.cost_usd <= both.budget_usd for r in wide.rows):
        with pytest.raises(ClusterSimError, match="each holds alone"):
            plan(constraints=both)
    with pytest.raises(ClusterSimError, match="--max-nodes 8") as many:
        plan(constraints=Constraints(max_nodes=8))
    assert many.value.field == "--max-nodes"


def test_a_framework_on_a_chip_it_does_not_run_on_is_a_note_not_a_crash():
    grid = PlanGrid(
        instances=("p5.48xlarge", "trn2.48xlarge"), nodes=(16,), tokens=1e12, frameworks=("megatron", "neuronx"),
        offers=("capacity_block",),
    )  # fmt: skip
    found = plan(grid)
    assert {(r.point.instance, r.point.software.name) for r in found.rows} == {
        ("p5.48xlarge", "megatron"),
        ("trn2.48xlarge", "neuronx"),
    }
    assert any("'megatron' does not run on trainium2" in n for n in found.notes)
    assert any("'neuronx' does not run on h100-sxm" in n for n in found.notes)


def test_an_instance_without_the_offer_price_is_a_note():
    grid = PlanGrid(instances=("p5.48xlarge", "trn2.48xlarge"), nodes=(16,), tokens=1e12)
    found = plan(grid)
    assert {r.point.instance for r in found.rows} == {"p5.48xlarge"}
    assert any("no on demand price for trn2.48xlarge" in n for n in found.notes)
    with pytest.raises(ClusterSimError, match=r"no point could be planned.*no on demand price"):
        plan(PlanGrid(instances=("trn2.48xlarge",), nodes=(16,), tokens=1e12))


def test_goodput_needs_a_checkpoint_policy():
    with pytest.raises(ClusterSimError, match=r"goodput.*--storage"):
        plan(objective="goodput")
    with pytest.raises(ClusterSimError, match="unknown objective 'speed'"):
        plan(objective="speed")


@pytest.mark.parametrize(
    ("text", "counts"),
    [
        ("128..2048", (128, 256, 512, 1024, 2048)),
        ("100..1000", (100, 128, 256, 512, 1000)),
        ("16,24,32", (16, 24, 32)),
        ("32, 16,16", (16, 32)),
        ("64", (64,)),
        ("3..3", (3,)),
    ],
)
def test_node_counts_expand_from_ranges_and_lists(text, counts):
    assert expand_counts(text, "--nodes") == counts


def test_token_counts_read_suffixes():
    assert expand_counts("4M..16M", "--batch-tokens", limit=10**18, tokens=True) == (
        4_000_000,
        4_194_304,
        8_388_608,
        16_000_000,
    )


@pytest.mark.parametrize("text", ["0..4", "64..32", "a,b", "16,,32", "", "1.5", "nan"])
def test_bad_node_counts_are_refused_naming_the_option(text):
    with pytest.raises(ClusterSimError, match="--nodes") as refused:
        expand_counts(text, "--nodes")
    assert refused.value.field == "--nodes"


def test_the_default_batch_follows_the_devices_and_a_given_one_is_kept():
    default = plan(PlanGrid(instances=("p5.48xlarge",), nodes=(16, 1024), tokens=15e12))
    batches = {r.point.nodes: r.point.job.global_batch for r in default.rows}
    assert batches[1024] > batches[16]  # 1,024 tokens per device past 4,096 devices, as train
    given = plan(PlanGrid(instances=("p5.48xlarge",), nodes=(16,), tokens=15e12, global_batches=(256, 1024)))
    assert {r.point.job.global_batch for r in given.rows} == {256, 1024}
    assert all(math.isfinite(r.time_s) for r in given.rows)
