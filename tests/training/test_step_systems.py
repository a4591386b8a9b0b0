"""One step priced over many systems at once (``training.pricing.Systems``: a planner's node counts and instance
types in one vectorized call) gives each layout what its own system gives it alone: every term, the micro-batch
count and every operation's time equal, on switched fabrics (Hopper, Blackwell), a torus (Trainium) and an MoE
model with expert parallelism; systems of two families are refused."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.compute.efficiency import efficiency_for
from clustersim.compute.software import software_for, software_profiles
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC
from clustersim.plan.search import framework_runs
from clustersim.plan.space import SearchSpace, candidate_layouts
from clustersim.system import system_for_instance
from clustersim.training.job import TrainingJob
from clustersim.training.pricing import ALONE_FROM, Systems, collective_s
from clustersim.training.step import step_terms
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
FAMILIES = {  # instance types of one family (one set of fractions, one framework profile)
    "hopper": ("p5.48xlarge", "p5en.48xlarge"),
    "blackwell": ("p6-b200.48xlarge",),
    "trainium": ("trn2.48xlarge",),
}
MODELS = {
    "llama3-70b": load_model("llama3-70b", use_env=False),
    "mixtral-8x7b": load_model("mixtral-8x7b", use_env=False),
}


def _members(family: str, picks: list[tuple[int, int, int]]):
    """(system, job, layouts) of each pick: instance index, node count, global batch."""
    found = []
    for instance_index, nodes, batch in picks:
        instances = FAMILIES[family]
        system = system_for_instance(CATALOG, instances[instance_index % len(instances)], nodes)
        found.append((system, TrainingJob(batch, 4096)))
    return found


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(sorted(FAMILIES)),
    model_id=st.sampled_from(sorted(MODELS)),
    picks=st.lists(
        st.tuples(st.integers(0, 1), st.sampled_from([2, 4, 8, 16]), st.sampled_from([64, 128, 256])),
        min_size=2,
        max_size=4,
    ),
)
def test_a_step_over_many_systems_is_each_system_alone(family, model_id, picks):
    model = MODELS[model_id]
    members = _members(family, picks)
    accelerator = members[0][0].accelerator
    software = software_for(None, accelerator.family, PROFILES, accelerator=accelerator.id)
    eff = efficiency_for(accelerator)
    space = SearchSpace(micro_batch=(1, 2), vp=(1, 2), ep=(1, 2, 4, 8))
    alone, parts = [], []
    for system, job in members:
        layouts = candidate_layouts(model, system, job, space)
        layouts = layouts.select(framework_runs(layouts, software))
        parts.append(layouts)
        alone.append(
            step_terms(
                model, system, eff, layouts, seq_len=job.seq_len, global_batch=job.global_batch,
                precision=job.precision, software=software,
            )
        )  # fmt: skip
    counts = [len(p) for p in parts]
    owner = np.repeat(np.arange(len(members)), counts)
    joined = type(parts[0])(**{name: np.concatenate([getattr(p, name) for p in parts]) for name in vars(parts[0])})
    batches = np.array([job.global_batch for _, job in members])[owner]
    together = step_terms(
        model, Systems(tuple(s for s, _ in members), owner), eff, joined, seq_len=4096, global_batch=batches,
        precision=members[0][1].precision, software=software,
    )  # fmt: skip
    ends = np.cumsum(counts)
    for terms, end, count in zip(alone, ends, counts, strict=True):
        mine = slice(int(end) - count, int(end))
        np.testing.assert_allclose(together.step_s[mine], terms.step_s, rtol=1e-12, atol=0)
        np.testing.assert_array_equal(together.micro_batches[mine], terms.micro_batches)
        for name, times in terms.times.items():
            np.testing.assert_allclose(together.times[name].link_s[mine], times.link_s, rtol=1e-12, atol=1e-300)
            np.testing.assert_allclose(together.times[name].exposed_s[mine], times.exposed_s, rtol=1e-12, atol=1e-300)
        for batched, single in zip(together.operations, terms.operations, strict=True):
            assert batched.name == single.name
            np.testing.assert_allclose(batched.forward_s[mine], single.forward_s, rtol=1e-12, atol=0)
            np.testing.assert_allclose(batched.backward_s[mine], single.backward_s, rtol=1e-12, atol=0)


def test_systems_read_each_members_figures_per_layout():
    h100, h200 = (system_for_instance(CATALOG, name, 4) for name in FAMILIES["hopper"])
    systems = Systems((h100, h200), np.array([1, 0, 1]))
    assert systems.memory_bandwidth_bytes_per_s.tolist() == [
        h200.memory_bandwidth_bytes_per_s, h100.memory_bandwidth_bytes_per_s, h200.memory_bandwidth_bytes_per_s
    ]  # fmt: skip
    assert h200.memory_bandwidth_bytes_per_s > h100.memory_bandwidth_bytes_per_s  # HBM3e against HBM3
    assert systems.scaleup_devices.tolist() == [8, 8, 8]


def test_systems_of_two_families_are_refused():
    h100 = system_for_instance(CATALOG, "p5.48xlarge", 4)
    trn2 = system_for_instance(CATALOG, "trn2.48xlarge", 4)
    with pytest.raises(ClusterSimError, match="share one accelerator family, got hopper, trainium"):
        Systems((h100, trn2), np.array([0, 1]))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(list(Op)),
    shapes=st.lists(
        st.tuples(
            st.integers(0, 2),
            st.sampled_from([1, 2, 8, 16, 64]),
            st.sampled_from([1, 8]),
            st.integers(1, ALONE_FROM + 100),
        ),
        min_size=1,
        max_size=6,
    ),
    seed=st.integers(0, 2**16),
)
def test_a_collective_over_many_systems_is_each_alone(op, shapes, seed):
    """Groups small and large (one call for the small ones, a call each for those of ``ALONE_FROM`` or more
    layouts), on a switched fabric and a torus, each equal to the layout priced alone on its own system."""
    members = (
        system_for_instance(CATALOG, "p5.48xlarge", 16),
        system_for_instance(CATALOG, "p5en.48xlarge", 64),
        system_for_instance(CATALOG, "p5.48xlarge", 256),
    )
    rng = np.random.default_rng(seed)
    owner = np.concatenate([np.full(n, s) for s, _, _, n in shapes])
    ranks = np.concatenate([np.full(n, r) for _, r, _, n in shapes])
    strides = np.concatenate([np.full(n, d) for _, _, d, n in shapes])
    sizes = rng.uniform(1.0, 4e9, len(owner))
    together = collective_s(Systems(members, owner), ANALYTIC, op, sizes, ranks, strides)
    for i in rng.choice(len(owner), size=min(len(owner), 25), replace=False):
        alone = collective_s(members[owner[i]], ANALYTIC, op, sizes[i : i + 1], ranks[i : i + 1], strides[i : i + 1])
        assert together[i] == pytest.approx(float(alone[0]), rel=1e-12, abs=0.0)
    trn2 = system_for_instance(CATALOG, "trn2.48xlarge", 8)
    on_torus = collective_s(Systems((trn2, trn2), owner % 2), ANALYTIC, op, sizes, ranks, strides)
    for i in rng.choice(len(owner), size=min(len(owner), 10), replace=False):
        alone = collective_s(trn2, ANALYTIC, op, sizes[i : i + 1], ranks[i : i + 1], strides[i : i + 1])
        assert on_torus[i] == pytest.approx(float(alone[0]), rel=1e-12, abs=0.0)


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(list(Op)),
    distinct=st.integers(1, 6),
    count=st.integers(2, 3 * ALONE_FROM),
    seed=st.integers(0, 2**16),
)
def test_a_collective_prices_each_distinct_size_once_as_each_alone(op, distinct, count, seed):
    """Layouts that share a system, a group and a size (a search's layouts share few of each) are priced once
    for all of them: each layout's time is still its own alone, and a layout without the
    collective (``where``) or with a group of one rank costs nothing. Against the lone layout's path (one
    size: its own arithmetic) to 1e-12, as the other tests here."""
    members = (system_for_instance(CATALOG, "p5.48xlarge", 16), system_for_instance(CATALOG, "p5en.48xlarge", 64))
    rng = np.random.default_rng(seed)
    sizes = rng.choice(rng.uniform(1.0, 4e9, distinct), count)
    ranks = rng.choice([1, 2, 8, 64], count)
    strides = rng.choice([1, 8], count)
    owner = rng.integers(0, 2, count)
    where = rng.random(count) < 0.8
    together = collective_s(Systems(members, owner), ANALYTIC, op, sizes, ranks, strides, where)
    for i in rng.choice(count, size=min(count, 20), replace=False):
        alone = collective_s(members[owner[i]], ANALYTIC, op, sizes[i : i + 1], ranks[i : i + 1], strides[i : i + 1])
        expected = float(alone[0]) if where[i] and ranks[i] > 1 else 0.0
        assert together[i] == pytest.approx(expected, rel=1e-12, abs=0.0)
