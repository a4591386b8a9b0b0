"""A Trn2 UltraServer from the catalog: four instances whose chips at the same torus position form a
ring over the inter-instance NeuronLink (trn2-ultraserver-64), between each instance's torus and EFA."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC
from clustersim.network.topology import topology_for_instance

CATALOG = load_catalog(use_env=False)
TRN2 = CATALOG.instance("trn2.48xlarge")
# trn2u.48xlarge is not catalogued yet: the same instance whose scale-up domain is the UltraServer's ring.
TRN2U = TRN2.model_copy(
    update={"id": "trn2u-test", "intra_node": TRN2.intra_node.model_copy(update={"domain": "trn2-ultraserver-64"})}
)


def test_the_ring_joins_four_instances_at_the_bandwidth_the_catalog_lists_beyond_the_torus():
    fabric = topology_for_instance(CATALOG, TRN2U, 4).fabric()
    assert fabric.torus is not None
    assert (fabric.torus.dims, fabric.torus.ring_nodes) == ((4, 4), 4)
    assert fabric.torus.link_bytes_per_s == pytest.approx(128e9)  # 1,024 GB/s per chip, both ways, 4 links
    assert fabric.torus.ring_link_bytes_per_s == pytest.approx(64e9)  # (1,280 - 1,024) GB/s, both ways, 2 links
    assert (fabric.num_nodes, fabric.devices_per_node) == (4, 16)


def test_a_data_parallel_group_across_the_ultraserver_is_faster_than_across_four_trn2_over_efa():
    size = 2.0**30
    ultra = topology_for_instance(CATALOG, TRN2U, 4).group_fabric(4, 16)
    separate = topology_for_instance(CATALOG, TRN2, 4).group_fabric(4, 16)
    assert ultra is not None and separate is not None
    over_ring = ANALYTIC.time_s(Op.ALL_REDUCE, size, ultra)[0]
    over_efa = ANALYTIC.time_s(Op.ALL_REDUCE, size, separate)[0]
    assert over_ring < over_efa
    assert ANALYTIC.table(Op.ALL_REDUCE, size, ultra).bound == ["NeuronLink (UltraServer ring)"]
    assert ANALYTIC.table(Op.ALL_REDUCE, size, separate).bound == ["network"]


def test_two_ultraservers_add_efa_between_them_and_odd_counts_are_refused():
    two = topology_for_instance(CATALOG, TRN2U, 8).fabric()
    one = topology_for_instance(CATALOG, TRN2U, 4).fabric()
    size = 2.0**30
    assert ANALYTIC.time_s(Op.ALL_REDUCE, size, two)[0] > ANALYTIC.time_s(Op.ALL_REDUCE, size, one)[0]
    with pytest.raises(ClusterSimError, match="do not fill UltraServers of 4") as refused:
        ANALYTIC.time_s(Op.ALL_REDUCE, size, topology_for_instance(CATALOG, TRN2U, 6).fabric())
    assert refused.value.field == "nodes"
