"""The search's candidates on the space's open grid (``plan.space.CandidateGrid``): memory sized over the grid or
over the candidates gives the same figures bit for bit, the grid's candidates are ``candidate_layouts``' in its
order, and instance types whose framework profiles differ only in what the candidates do not read share one set
of candidates (the memo) and rank as they do alone."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_for, software_profiles
from clustersim.plan import search
from clustersim.plan.search import rank_layouts
from clustersim.plan.space import SearchSpace, candidate_grid, candidate_layouts
from clustersim.system import system_for_instance
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
SPACE = SearchSpace(micro_batch=(1, 2, 3), vp=(1, 2, 3), sp=(False, True), uneven_stages=True)


def _software(system):
    return software_for(None, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)


@pytest.mark.parametrize(
    ("model_id", "instance", "nodes", "batch", "seq"),
    [
        ("mixtral-8x7b", "p5.48xlarge", 4, 256, 4096),  # experts: expert TP and sharding read the grid's axes too
        ("llama3-70b", "p4de.24xlarge", 6, 96, 8192),  # devices that few degrees divide: the rules prune hard
        ("llama3.1-405b", "trn2.48xlarge", 8, 512, 8192),  # a framework that runs ZeRO 0-1 only
    ],
)
def test_memory_over_the_grid_is_memory_over_the_candidates(monkeypatch, model_id, instance, nodes, batch, seq):
    model = load_model(model_id, use_env=False)
    system = system_for_instance(CATALOG, instance, nodes)
    job, software = TrainingJob(batch, seq), _software(system)
    monkeypatch.setattr(search, "GRID_SHARE", 10**9)  # every grid sized whole
    whole = rank_layouts(model, system, job, space=SPACE, software=software)
    monkeypatch.setattr(search, "GRID_SHARE", 0)  # every grid sized over its candidates
    alone = rank_layouts(model, system, job, space=SPACE, software=software)
    assert len(whole.grid.shape) > 1 and alone.grid.shape == (alone.count,)  # the two ways were taken
    assert whole.count == alone.count > 0
    np.testing.assert_array_equal(whole.required_bytes, alone.required_bytes)
    np.testing.assert_array_equal(whole.fits, alone.fits)
    np.testing.assert_array_equal(whole.fit_step_s, alone.fit_step_s)
    assert whole.fastest(5) == alone.fastest(5)
    (_, kept_whole), (_, kept_alone) = whole.fastest_evaluated(3), alone.fastest_evaluated(3)
    assert kept_whole is not None and kept_alone is not None
    for name in ("weights", "gradients", "optimizer", "activations", "params_per_device"):
        np.testing.assert_array_equal(getattr(kept_whole[1], name), getattr(kept_alone[1], name))
    for i, layout in enumerate(whole.layouts.layout(j) for j in range(whole.count)):
        assert layout == alone.layouts.layout(i)


def test_the_grids_candidates_are_the_candidate_layouts_in_order():
    model = load_model("mixtral-8x7b", use_env=False)
    system = system_for_instance(CATALOG, "p5.48xlarge", 4)
    job = TrainingJob(256, 4096)
    grid = candidate_grid(model, system, job, SPACE)
    layouts = candidate_layouts(model, system, job, SPACE)
    assert grid.count == len(layouts) > 100
    found = grid.layouts(grid.positions())
    assert [found.layout(i) for i in range(len(found))] == [layouts.layout(i) for i in range(len(layouts))]
    some = grid.positions()[::7]
    picked = grid.layouts(some)
    assert [picked.layout(i) for i in range(len(picked))] == [layouts.layout(i) for i in range(0, len(layouts), 7)]


def test_instance_types_share_candidates_where_their_frameworks_read_the_same():
    """A100 40 GB and 80 GB instances get framework profiles of their own, with equal ZeRO stages, attention
    kernel and bytes per parameter: one memo entry serves both, and each ranks as it does without the memo."""
    model = load_model("llama3-70b", use_env=False)
    job = TrainingJob(512, 4096)
    memo: search.CandidateMemo = {}
    for instance in ("p4d.24xlarge", "p4de.24xlarge"):
        system = system_for_instance(CATALOG, instance, 16)
        shared = rank_layouts(model, system, job, space=SPACE, software=_software(system), memo=memo)
        alone = rank_layouts(model, system, job, space=SPACE, software=_software(system))
        np.testing.assert_array_equal(shared.required_bytes, alone.required_bytes)
        np.testing.assert_array_equal(shared.fit_step_s, alone.fit_step_s)
        assert shared.fastest(3) == alone.fastest(3)
    assert len(memo) == 1
    forty = system_for_instance(CATALOG, "p4d.24xlarge", 16)
    eighty = system_for_instance(CATALOG, "p4de.24xlarge", 16)
    assert _software(forty) is not _software(eighty)  # a profile object of each accelerator
    assert forty.memory_bytes < eighty.memory_bytes  # the same candidates, fewer of them fit on 40 GB
