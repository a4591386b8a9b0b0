"""Other tenants' traffic on the job's fabric (``training.background``): rate-limited at the tenants' NICs,
sharing the links max-min fairly with the job's flows, exactly where they cross the job's links."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.engine import independent, route_flows, run
from clustersim.network.flowsim.patterns import Pattern
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, build
from clustersim.training.background import (
    Background,
    background_flows,
    limited,
    other_hosts,
    parse_background,
    run_loaded,
)

LINE = 1e9  # bytes/s: every NIC and leaf uplink
JOB = np.array([0, 4])  # one host on each leaf


def _tree(oversubscription: float = 3.0) -> FatTree:
    """Two leaves of four one-GPU hosts; at 3 (radix 8) each leaf has a single uplink of one NIC's rate."""
    spec = FatTreeSpec(
        num_hosts=8, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=LINE, scaleup_bytes_per_s=10 * LINE, radix=8,
        oversubscription=oversubscription,
    )  # fmt: skip
    return build(spec)


def _job_s(tree: FatTree, background: Background, routing: Routing = Routing.ECMP) -> float:
    """Host 0 sends 1 GB to host 4, across the spine, with ``background`` on the other six hosts."""
    flows = independent(np.array([0]), np.array([4]), np.array([LINE]))
    others = other_hosts(tree, JOB)
    times, _ = run_loaded(limited(tree, others, background.share), flows, routing, 0, others, background)
    return float(times.end_s.max())


def test_the_share_and_pattern_are_read_and_bad_ones_refused_by_name():
    assert parse_background("0.5") == Background(0.5, Pattern.PERMUTATION)
    assert parse_background(" 0.3:all-to-all ") == Background(0.3, Pattern.ALL_TO_ALL)
    assert parse_background("0:incast").pattern is Pattern.INCAST and not parse_background("0").active
    for bad in ("1.2", "-0.1", "half", "1", ":permutation"):
        with pytest.raises(ClusterSimError, match=r"--background: share .* from 0 to 0\.99") as found:
            parse_background(bad)
        assert found.value.field == "--background"
    valid = r"unknown pattern 'flood' \(valid: permutation, shift, incast, all-to-all\)"
    with pytest.raises(ClusterSimError, match=valid):
        parse_background("0.5:flood")


@settings(max_examples=15, deadline=None)
@given(st.floats(min_value=0.01, max_value=0.99))
def test_a_tenant_on_the_jobs_uplink_takes_its_rate_limit_or_half_the_link(share):
    """Shift over the other hosts (1->2->3->5->6->7->1): host 3 sends to host 5 over leaf 0's single uplink,
    which the job's flow (0 -> 4) crosses too. Max-min with the tenant capped at ``share`` of its NIC: the
    tenant takes min(share, 1/2) of the link, the job the rest."""
    job_s = _job_s(_tree(), Background(share, Pattern.SHIFT))
    assert job_s == pytest.approx(1.0 / (1.0 - min(share, 0.5)), rel=1e-9)


def test_more_background_never_speeds_the_job_and_a_random_one_slows_it_on_a_thin_spine():
    times = [_job_s(_tree(), Background(s)) for s in (0.2, 0.5, 0.9)]  # permutation, seed 0
    assert times == sorted(times) and times[-1] > 1.0 + 1e-6


def test_tenants_that_cross_none_of_the_jobs_links_leave_it_alone():
    """With two uplinks per leaf (radix 8, 2:1) and spraying, the tenants' flows still cross leaf 0's
    uplinks, but a job inside one leaf (hosts 0 -> 1) crosses no uplink: its time is its NIC's, exactly."""
    tree = _tree(2.0)
    flows = independent(np.array([0]), np.array([1]), np.array([LINE]))
    job = np.array([0, 1])
    others = other_hosts(tree, job)
    background = Background(0.9)
    times, inc = run_loaded(limited(tree, others, 0.9), flows, Routing.SPRAY, 0, others, background)
    alone = run(tree, flows, route_flows(tree, flows, Routing.SPRAY))
    assert times.end_s.max() == alone.end_s.max() == pytest.approx(1.0)
    assert np.all(inc.flow == 0)  # no tenant's flow was run


def test_a_tenant_below_its_fair_share_keeps_its_share_of_its_nic_busy_for_the_jobs_whole_run():
    """Host 3's tenant flow shares leaf 0's uplink with the job at 0.4 of its NIC, below half the link:
    nothing throttles it, so over the job's window (1 / 0.6 s) its NIC carries 0.4 of the line rate (the
    bytes counted for the window only); the tenants that cross none of the job's links are not run."""
    tree = _tree()
    flows = independent(np.array([0]), np.array([4]), np.array([LINE]))
    others = other_hosts(tree, JOB)
    background = Background(0.4, Pattern.SHIFT)
    times, _ = run_loaded(limited(tree, others, 0.4), flows, Routing.ECMP, 2, others, background)
    window_s = float(times.end_s.max())
    busy = times.resource_bytes[tree.nic_up0 + others] / (LINE * window_s)
    assert window_s == pytest.approx(1 / 0.6)
    assert busy == pytest.approx(np.where(others == 3, 0.4, 0.0), rel=1e-9)


def test_the_background_is_sized_to_its_share_and_keeps_off_the_scale_up_fabric():
    tree = build(
        FatTreeSpec(num_hosts=4, gpus_per_host=4, nics_per_host=2, nic_bytes_per_s=LINE, scaleup_bytes_per_s=LINE)
    )
    flows = background_flows(tree, np.array([1, 2, 3]), Background(0.5, Pattern.ALL_TO_ALL), 2.0, seed=0, group=7)
    g = tree.spec.gpus_per_host
    assert np.all(flows.src_gpu // g != flows.dst_gpu // g) and np.all(flows.group == 7)
    sent = np.bincount(flows.src_gpu, weights=flows.size_bytes)[4:]
    assert sent == pytest.approx(np.full(12, 0.5 * 2 * LINE / 4 * 2.0))  # share x the GPU's NICs x horizon


def test_a_fabric_of_the_jobs_hosts_only_has_no_room_for_tenants():
    tree = _tree()
    with pytest.raises(ClusterSimError, match="the fabric's 8 hosts are all the job's") as found:
        other_hosts(tree, np.arange(8))
    assert found.value.field == "--background"


def test_an_all_to_all_of_too_many_tenants_is_refused_naming_the_option():
    tree = build(FatTreeSpec(num_hosts=200, gpus_per_host=8, nics_per_host=1, nic_bytes_per_s=LINE,
                             scaleup_bytes_per_s=LINE))  # fmt: skip
    with pytest.raises(ClusterSimError, match=r"--background: an all-to-all of the 199 other hosts' 1,592 GPUs is"):
        background_flows(tree, np.arange(1, 200), Background(0.5, Pattern.ALL_TO_ALL), 1.0, seed=0, group=0)
