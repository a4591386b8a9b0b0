"""One collective on many fabrics at once (``analytic_many.collective_times_s``, the planner's path) equals each
size priced alone on its own fabric (``analytic.collective_time_s``): H100, A100 and B200 servers, a GB200 NVL72
domain (where NCCL's price and what it achieves differ, so the pick is by price), any mix of group shapes, sizes
from a byte to gigabytes, a user's calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.network.analytic import DEFAULT_CALIBRATION, collective_time_s
from clustersim.network.analytic_many import collective_times_s
from clustersim.network.collectives import Op
from clustersim.system import system_for_accelerator, system_for_instance

CATALOG = load_catalog(use_env=False)
SYSTEMS = [
    system_for_instance(CATALOG, "p5.48xlarge", 64),
    system_for_instance(CATALOG, "p4de.24xlarge", 32),
    system_for_instance(CATALOG, "p6-b200.48xlarge", 16),
    system_for_accelerator(CATALOG, "gb200", devices=288, devices_per_node=4, network_bits_per_s=1.6e12),
]
OPS = [Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL, Op.SENDRECV]
GROUP = st.tuples(st.integers(0, len(SYSTEMS) - 1), st.sampled_from([2, 4, 8, 16, 32, 72]), st.sampled_from([1, 2, 8]))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(OPS),
    groups=st.lists(GROUP, min_size=1, max_size=6, unique=True),
    picks=st.lists(st.tuples(st.integers(0, 5), st.floats(0.0, 8e9)), min_size=1, max_size=30),
    tuned=st.booleans(),
)
def test_each_size_on_its_fabric_is_the_size_alone(op, groups, picks, tuned):
    fabrics = [SYSTEMS[s].group_fabric(ranks, stride) for s, ranks, stride in groups]
    which = np.array([k % len(fabrics) for k, _ in picks])
    sizes = np.array([size for _, size in picks])
    cal = dataclasses.replace(DEFAULT_CALIBRATION, ramp_exponent=1.5) if tuned else None
    together = collective_times_s(op, sizes, fabrics, which, cal)
    for i, size in enumerate(sizes):
        alone = collective_time_s(op, np.array([size]), fabrics[which[i]], cal)
        assert together[i] == pytest.approx(float(alone[0]), rel=1e-12, abs=0.0), (groups[which[i]], size)


def test_nvl72_picks_by_price_not_by_what_is_achieved():
    nvl72 = SYSTEMS[3].group_fabric(144, 1)
    node = SYSTEMS[0].group_fabric(8, 1)
    sizes = np.geomspace(1e3, 4e9, 12)
    together = collective_times_s(Op.ALL_REDUCE, np.concatenate([sizes, sizes]), [nvl72, node], np.repeat([0, 1], 12))
    np.testing.assert_allclose(together[:12], collective_time_s(Op.ALL_REDUCE, sizes, nvl72), rtol=1e-12, atol=0)
    np.testing.assert_allclose(together[12:], collective_time_s(Op.ALL_REDUCE, sizes, node), rtol=1e-12, atol=0)
