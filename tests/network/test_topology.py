"""The topology built from the catalog, and the fabric each parallel group sees on it."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.topology import Topology, fabric_for_instance, topology_for_instance
from clustersim.system import system_for_accelerator, system_for_instance

CATALOG = load_catalog(use_env=False)


def test_p5_rails_and_tiers_come_from_the_catalog():
    topology = topology_for_instance(CATALOG, "p5.48xlarge", 16)
    assert topology.num_devices == 128 and topology.num_nodes == 16 and topology.scaleup_devices == 8
    assert topology.rails is not None and topology.rails.num_nics == 32
    assert topology.rails.total_bits_per_s == pytest.approx(3.2e12)
    assert topology.network_bytes_per_s == pytest.approx(3.2e12 / 8)
    assert topology.tiers is not None
    assert (topology.tiers.cluster, topology.tiers.num_layers, topology.tiers.oversubscription) == (
        "ec2-ultracluster", 3, 1.0,
    )  # fmt: skip
    assert topology.in_network_reduction  # NVSwitch gen 3 does NVLink SHARP


def test_groups_see_their_members_share_of_the_network():
    topology = topology_for_instance(CATALOG, "p5.48xlarge", 16)
    tp = topology.group_fabric(8, 1)  # one node, NVLink only
    assert tp is not None and (tp.devices_per_node, tp.num_nodes) == (8, 1)
    dp = topology.group_fabric(16, 8)  # one rank per node: 1/8 of each node's cards
    assert dp is not None and (dp.devices_per_node, dp.num_nodes) == (1, 16)
    assert dp.network_bytes_per_s == pytest.approx(topology.network_bytes_per_s / 8)
    assert not dp.in_network_reduction
    assert topology.group_fabric(1, 1) is None
    whole = topology.fabric()
    assert (whole.devices_per_node, whole.num_nodes, whole.name) == (8, 16, "16 x p5.48xlarge")
    assert fabric_for_instance(CATALOG, "p5.48xlarge", 16) == whole


def test_an_nvl72_rack_is_one_scale_up_domain_across_trays():
    gb200 = system_for_accelerator(CATALOG, "gb200", devices=144, devices_per_node=4, network_bits_per_s=1.6e12)
    assert gb200.topology.scaleup_devices == 72 and gb200.num_nodes == 36
    group = gb200.group_fabric(64, 1)
    assert group is not None and group.num_nodes == 1  # 64 ranks stay on NVLink


def test_neuroncores_as_devices_share_the_chip_links():
    cores = system_for_instance(CATALOG, "trn1.32xlarge", 2, devices_per_node=32)
    chips = system_for_instance(CATALOG, "trn1.32xlarge", 2)
    assert cores.topology.scaleup_bytes_per_s == pytest.approx(chips.topology.scaleup_bytes_per_s / 2)
    assert cores.num_devices == 64 and cores.topology.domain_devices == 0


def test_impossible_topologies_are_refused_with_the_reason():
    with pytest.raises(ClusterSimError, match="not a whole number of nodes"):
        Topology("x", 12, 8, 450e9, 400e9, False)
    with pytest.raises(ClusterSimError, match="needs a network bandwidth"):
        Topology("x", 16, 8, 450e9, 0.0, False)
    with pytest.raises(ClusterSimError, match="at least 2 devices"):
        Topology("x", 1, 8, 450e9, 0.0, False).fabric()
    with pytest.raises(ClusterSimError, match="nodes must be at least 1"):
        topology_for_instance(CATALOG, "p5.48xlarge", 0)
