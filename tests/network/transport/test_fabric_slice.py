"""A slice of the flow-level simulator's fat-tree as a packet topology: the fat-tree's equal-cost routes,
its link speeds, failed links left out, and transports running over it."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.transport.engine import Environment
from clustersim.network.transport.fabric_slice import fat_tree_slice
from clustersim.network.transport.flows import ACK_BYTES
from clustersim.network.transport.links import Network
from clustersim.network.transport.srd import SrdFlow
from clustersim.network.transport.topology import FabricSpec

# radix 8: leaves of 4 NIC ports with 4 spine uplinks, pods of 4 leaves with 4 core uplinks per spine;
# 40 hosts x 1 NIC = 10 leaves = 3 pods: three tiers.
TREE = build(
    FatTreeSpec(
        num_hosts=40, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=12.5e9, scaleup_bytes_per_s=1e11, radix=8
    )
)
SPEC = FabricSpec(host_latency_s=1e-6, hop_latency_s=0.5e-6)


def test_routes_follow_the_fat_tree_tiers():
    assert TREE.num_tiers == 3
    topo = fat_tree_slice(Network(Environment()), TREE, [0, 1, 4, 20], SPEC, max_paths=255)
    assert [len(r) for r in topo.routes(0, 1)] == [2]  # one leaf: NIC up, NIC down
    assert [len(r) for r in topo.routes(0, 2)] == [4] * 4  # two leaves of a pod: one route per spine
    cross = topo.routes(0, 3)  # two pods: one per (spine, core), 4 x 4
    assert len(cross) == 16 and {len(r) for r in cross} == {6}
    assert len({r[1:-1] for r in cross}) == 16
    assert all(r[0] == topo.uplinks[0] and r[-1] == topo.downlinks[3] for r in cross)
    assert len(fat_tree_slice(Network(Environment()), TREE, [0, 20], SPEC, max_paths=5).routes(0, 1)) == 5


def test_a_failed_link_takes_its_routes_away():
    leaf0_spine2 = TREE.leaf_up0 + 0 * TREE.leaf_uplinks + 2
    topo = fat_tree_slice(Network(Environment()), TREE.with_failures([leaf0_spine2]), [0, 4], SPEC)
    assert len(topo.routes(0, 1)) == 3


def test_srd_over_a_slice_takes_the_store_and_forward_time_of_its_route():
    """One packet across pods: six 100 Gbit/s links store and forward it, its ACK comes back over six."""
    env = Environment(1)
    topo = fat_tree_slice(Network(env), TREE, [0, 20], SPEC, max_paths=1)
    flow = SrdFlow(topo, 0, 1, [8192])
    env.run()
    props = 2 * (2 * 1.5e-6 + 4 * 0.5e-6)
    expected = 6 * (8192 + 84) * 80 + 6 * ACK_BYTES * 80 + round(props * 1e12)
    assert flow.completions_ps == [expected]


def test_bad_slices_are_refused():
    with pytest.raises(ClusterSimError, match="NIC port 99"):
        fat_tree_slice(Network(Environment()), TREE, [0, 99])
    with pytest.raises(ClusterSimError, match="two distinct"):
        fat_tree_slice(Network(Environment()), TREE, [3, 3])
    with pytest.raises(ClusterSimError, match="max_paths"):
        fat_tree_slice(Network(Environment()), TREE, [0, 1], max_paths=0)
