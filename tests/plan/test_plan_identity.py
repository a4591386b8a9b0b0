"""The planner's shortcuts give the rows the plain path gives: each point's kept layouts estimated one by one
(``estimate_training``, each pricing its layout alone) with the spread looked up at the point's own device
count, priced, constrained and ranked, must be the plan's rows: the same instances, node counts and layouts in
the same order, every figure equal to 1e-9, and the same front and top rows. Computed in the test from the
plain path, never a stored snapshot. Also: a collective priced over many layouts at once equals each layout
priced alone, and the terms a ranking keeps equal the layouts evaluated again."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.software import software_for, software_profiles
from clustersim.execution import LayoutArrays
from clustersim.intervals import spread_for
from clustersim.intervals.layout import job_features
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC
from clustersim.plan.planner import Constraints, plan_training
from clustersim.plan.planner_grid import PlanGrid, grid_points
from clustersim.plan.search import pareto_front, rank_layouts
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training, evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.training.pricing import collective_s
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
LLAMA_70B = load_model("llama3-70b", use_env=False)
GRID = PlanGrid(
    instances=("p5.48xlarge", "p4de.24xlarge", "trn2.48xlarge"), nodes=(8, 16, 64, 128), tokens=2e12,
    offers=("on_demand", "capacity_block"),
)  # fmt: skip
KEEP = 3
REL = 1e-9


def _plain_rows(model, points, keep: int) -> list[dict]:
    """Each point's ``keep`` fastest layouts that fit, each estimated alone, with its spread at its own devices."""
    rows = []
    for point in points:
        system, job, software = point.system, point.job, point.software
        ranking = rank_layouts(model, system, job, efficiency=point.efficiency, software=software)
        found = []
        for layout, _ in ranking.fastest(keep):
            chosen = layout.model_copy(update={"uneven_stages": model.layers % (layout.pp * layout.vp) != 0})
            estimate = estimate_training(
                model, system, chosen, job, offer=point.offer, efficiency=point.efficiency, software=software
            )
            features = job_features(chosen, job)
            spread = spread_for(
                "training", accelerator=system.accelerator.id, family=system.accelerator.family,
                framework=software.name, devices=system.num_devices, layout=features,
            )  # fmt: skip
            totals = estimate.totals
            assert totals is not None
            if totals.cost_usd is None:  # an instance not offered at the point's price: the point is skipped
                found = []
                break
            found.append(
                {
                    "key": (point.instance, point.nodes, point.offer, chosen.describe()),
                    "time_s": totals.time_s,
                    "cost_usd": totals.cost_usd,
                    "energy_j": None if totals.energy_kwh is None else totals.energy_kwh * 3.6e6,
                    "step_s": estimate.step_s,
                    "required_bytes": estimate.memory.required_bytes,
                    "bottleneck": estimate.bottleneck,
                    "terms": [(t.name, t.link_s, t.exposed_s) for t in estimate.terms],
                    "operations": [(o.name, o.forward_s, o.backward_s) for o in estimate.operations],
                    "spread": None if spread is None else (spread.q_lo, spread.q_hi, spread.basis),
                }
            )
        rows.extend(found)
    return rows


def _row_figures(row) -> dict:
    estimate, spread = row.estimate, row.spread
    return {
        "key": (row.point.instance, row.point.nodes, row.point.offer, estimate.layout.describe()),
        "time_s": row.time_s,
        "cost_usd": row.cost_usd,
        "energy_j": row.energy_j,
        "step_s": estimate.step_s,
        "required_bytes": estimate.memory.required_bytes,
        "bottleneck": estimate.bottleneck,
        "terms": [(t.name, t.link_s, t.exposed_s) for t in estimate.terms],
        "operations": [(o.name, o.forward_s, o.backward_s) for o in estimate.operations],
        "spread": None if spread is None else (spread.q_lo, spread.q_hi, spread.basis),
    }


def _same(ours, theirs, where: str) -> None:
    if isinstance(ours, float) and isinstance(theirs, float):
        assert math.isclose(ours, theirs, rel_tol=REL, abs_tol=1e-300), f"{where}: {ours!r} != {theirs!r}"
    elif isinstance(ours, list | tuple):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            _same(a, b, f"{where}[{i}]")
    else:
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


@pytest.mark.parametrize("objective", ["cost", "time"])
def test_plan_rows_are_the_plain_paths(objective):
    points, notes = grid_points(LLAMA_70B, CATALOG, GRID, profiles=PROFILES)
    deadline = Constraints(deadline_s=120 * 86400.0)
    found = plan_training(LLAMA_70B, points, objective=objective, constraints=deadline, keep=KEEP, notes=notes)
    plain = [r for r in _plain_rows(LLAMA_70B, points, KEEP) if r["time_s"] <= 120 * 86400.0]
    value = {"cost": "cost_usd", "time": "time_s"}[objective]
    plain.sort(key=lambda r: (r[value], r["time_s"], r["cost_usd"]))  # the planner's order (sort is stable)
    ours = [_row_figures(row) for row in found.rows]
    assert len(plain) > 20 and len({r["key"][0] for r in plain}) == 3  # every instance type is in the test
    assert [r["key"] for r in ours] == [r["key"] for r in plain]
    for a, b in zip(ours, plain, strict=True):
        for name in a:
            _same(a[name], b[name], f"{a['key']} {name}")
    front = pareto_front(np.array([[r["time_s"], r["cost_usd"]] for r in plain]))
    plain_front = sorted((plain[int(i)] for i in front), key=lambda r: (r["time_s"], r["cost_usd"]))
    assert [row.name for row in found.pareto] == [
        next(o.name for o in found.rows if _row_figures(o)["key"] == r["key"]) for r in plain_front
    ]
    best_per_point, seen = [], set()
    for r in plain:
        if r["key"][:3] not in seen:
            seen.add(r["key"][:3])
            best_per_point.append(r["key"])
    assert [_row_figures(row)["key"] for row in found.top] == best_per_point[: len(found.top)]


def test_kept_terms_are_the_layouts_evaluated_again():
    system = system_for_instance(CATALOG, "p5.48xlarge", 16)
    software = software_for(None, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)
    job = TrainingJob(512, 8192)
    ranking = rank_layouts(LLAMA_70B, system, job, software=software)
    layouts, evaluated = ranking.fastest_evaluated(4)
    assert evaluated is not None and len(layouts) == 4
    assert [layout for layout, _ in ranking.fastest(4)] == layouts
    terms, memory = evaluate_layouts(LLAMA_70B, system, LayoutArrays.of(layouts), job, software=software)
    kept_terms, kept_memory = evaluated
    np.testing.assert_allclose(kept_terms.step_s, terms.step_s, rtol=1e-12)
    np.testing.assert_allclose(kept_memory.required, memory.required, rtol=1e-12)
    for name, times in terms.times.items():
        np.testing.assert_allclose(kept_terms.times[name].exposed_s, times.exposed_s, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(kept_terms.times[name].link_s, times.link_s, rtol=1e-12, atol=1e-300)


OPS = [Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL, Op.SENDRECV]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(OPS),
    instance=st.sampled_from(["p5.48xlarge", "trn2.48xlarge", "p4de.24xlarge"]),
    groups=st.lists(
        st.tuples(
            st.sampled_from([1, 2, 4, 8, 16, 32]), st.sampled_from([1, 2, 8, 16]), st.floats(1.0, 4e9), st.booleans()
        ),
        min_size=2,
        max_size=40,
    ),
)
def test_a_collective_over_many_layouts_is_each_alone(op, instance, groups):
    system = system_for_instance(CATALOG, instance, 64)
    ranks = np.array([g[0] for g in groups])
    strides = np.array([g[1] for g in groups])
    sizes = np.array([g[2] for g in groups])
    where = np.array([g[3] for g in groups])
    together = collective_s(system, ANALYTIC, op, sizes, ranks, strides, where)
    for i in range(len(groups)):
        alone = collective_s(system, ANALYTIC, op, sizes[i : i + 1], ranks[i : i + 1], strides[i : i + 1], where[i])
        assert together[i] == pytest.approx(float(alone[0]), rel=1e-12, abs=0.0), groups[i]
        assert (together[i] == 0.0) == (not where[i] or ranks[i] == 1)


def test_instance_types_of_one_node_count_share_their_candidates():
    memo: dict = {}
    job = TrainingJob(512, 8192)
    for instance in ("p5.48xlarge", "p5en.48xlarge"):  # H100 and H200: 8 a node, one Hopper profile
        system = system_for_instance(CATALOG, instance, 16)
        software = software_for(None, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)
        shared = rank_layouts(LLAMA_70B, system, job, software=software, memo=memo)
        alone = rank_layouts(LLAMA_70B, system, job, software=software)
        np.testing.assert_array_equal(shared.fit_step_s, alone.fit_step_s)
        np.testing.assert_array_equal(shared.required_bytes, alone.required_bytes)
        assert shared.fastest(3) == alone.fastest(3)
    assert len(memo) == 1  # the same devices, domain, batch and framework: one set of candidates
    trn2 = system_for_instance(CATALOG, "trn2.48xlarge", 16)
    neuron = software_for(None, trn2.accelerator.family, PROFILES, accelerator=trn2.accelerator.id)
    rank_layouts(LLAMA_70B, trn2, job, software=neuron, memo=memo)
    assert len(memo) == 2  # other devices per node, another framework: its own candidates


def test_an_fp8_job_holds_its_own_candidates_where_its_gemm_inputs_take_a_byte():
    """Megatron keeps FP8 GEMM inputs in a byte, so a BF16 and an FP8 job of the same shape need different memory:
    sharing candidates across them would size one with the other's activations."""
    memo: dict = {}
    system = system_for_instance(CATALOG, "p5.48xlarge", 16)
    software = software_for("megatron", system.accelerator.family, PROFILES)
    for precision in (Dtype.BF16, Dtype.FP8):
        job = TrainingJob(512, 8192, precision=precision)
        shared = rank_layouts(LLAMA_70B, system, job, software=software, memo=memo)
        alone = rank_layouts(LLAMA_70B, system, job, software=software)
        np.testing.assert_array_equal(shared.required_bytes, alone.required_bytes)
    assert len(memo) == 2
