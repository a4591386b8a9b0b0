"""Ranking many systems at once (``search.rank_each``: consecutive requests of one framework priced in one call)
gives each request the ranking it gets alone (``rank_layouts``): the same candidates, memory, step times of those
that fit and kept terms, bit for bit; a request without candidates yields its error in its place and the others
still rank; small chunks split the calls without changing a figure."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_for, software_profiles
from clustersim.errors import ClusterSimError
from clustersim.plan import search
from clustersim.plan.search import RankRequest, rank_each, rank_layouts
from clustersim.plan.space import SearchSpace
from clustersim.system import system_for_instance
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
MODEL = load_model("llama3-70b", use_env=False)
INSTANCES = ("p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "trn2.48xlarge", "p4de.24xlarge")
SPACE = SearchSpace(micro_batch=(1, 2), vp=(1, 2))


def _request(instance: str, nodes: int, batch: int) -> RankRequest:
    system = system_for_instance(CATALOG, instance, nodes)
    software = software_for(None, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)
    return RankRequest(system, TrainingJob(batch, 4096), None, software)


def _same(a, b) -> None:
    np.testing.assert_array_equal(a.required_bytes, b.required_bytes)
    np.testing.assert_array_equal(a.fits, b.fits)
    np.testing.assert_allclose(a.fit_step_s, b.fit_step_s, rtol=1e-12, atol=0)
    assert a.fastest(3) == b.fastest(3)
    (_, kept_a), (_, kept_b) = a.fastest_evaluated(3), b.fastest_evaluated(3)
    assert (kept_a is None) == (kept_b is None)
    if kept_a is not None and kept_b is not None:
        for name, times in kept_a[0].times.items():
            np.testing.assert_allclose(times.exposed_s, kept_b[0].times[name].exposed_s, rtol=1e-12, atol=1e-300)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    picks=st.lists(
        st.tuples(st.sampled_from(INSTANCES), st.sampled_from([1, 3, 4, 16, 64]), st.sampled_from([7, 32, 256, 1024])),
        min_size=2,
        max_size=6,
    ),
    chunk=st.sampled_from([64, 512, search.CHUNK]),
)
def test_requests_ranked_together_rank_as_they_do_alone(picks, chunk):
    requests = [_request(*pick) for pick in picks]
    old = search.CHUNK
    search.CHUNK = chunk  # read at each call: the calls split where a chunk fills
    try:
        together = list(rank_each(MODEL, requests, space=SPACE))
        alone: list[object] = []
        for r in requests:
            try:
                alone.append(rank_layouts(MODEL, r.system, r.job, space=SPACE, software=r.software))
            except ClusterSimError as exc:
                alone.append(exc)
    finally:
        search.CHUNK = old
    assert len(together) == len(requests)
    for found, single in zip(together, alone, strict=True):
        if isinstance(single, ClusterSimError):
            assert isinstance(found, ClusterSimError) and str(found) == str(single)
        else:
            assert not isinstance(found, ClusterSimError)
            _same(found, single)


def test_a_request_without_candidates_yields_its_error_in_its_place():
    requests = [_request("p4de.24xlarge", 4, 256), _request("p4de.24xlarge", 3, 7), _request("p4de.24xlarge", 8, 256)]
    found = list(rank_each(MODEL, requests, space=SPACE))
    assert isinstance(found[1], ClusterSimError) and "no layout of" in str(found[1])
    _same(
        found[0], rank_layouts(MODEL, requests[0].system, requests[0].job, space=SPACE, software=requests[0].software)
    )
    _same(
        found[2], rank_layouts(MODEL, requests[2].system, requests[2].job, space=SPACE, software=requests[2].software)
    )
    with pytest.raises(ClusterSimError, match="no layout of"):
        rank_layouts(MODEL, requests[1].system, requests[1].job, space=SPACE, software=requests[1].software)
