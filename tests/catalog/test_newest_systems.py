"""The newest systems in the catalog: P6e-GB200 UltraServer trays, the Trn2 UltraServer's instance and
the announced Trn3 UltraServers; each figure against its published source, and the sizes refused."""

import pytest

from clustersim.catalog.figures import Provenance
from clustersim.catalog.kinds import Dtype, Kind
from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.topology import cluster_limit
from clustersim.system import system_for_instance


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_p6e_gb200_is_a_four_gpu_tray_of_an_nvl72_ultraserver(catalog):
    tray = catalog.instance("p6e-gb200.36xlarge")
    assert catalog.instance("u-p6e-gb200x72").id == tray.id  # the UltraServer's name finds its tray
    assert tray.accelerator == "gb200" and tray.num_accelerators.value == 4
    domain = catalog.get(tray.intra_node.domain, Kind.DOMAIN)
    assert domain.num_accelerators.value == 72 and domain.num_accelerators.value / 4 == 18
    # 1,600 Gbps per tray: 400 Gbps per GPU, as p6-b200's 3,200 per 8; 18 trays = the 28.8 Tbps AWS quotes
    total = tray.network.total_bandwidth_bits_per_s.value
    assert total == 1.6e12 and 18 * total == pytest.approx(28.8e12)
    b200 = catalog.instance("p6-b200.48xlarge")
    assert total / 4 == b200.network.total_bandwidth_bits_per_s.value / 8


def test_p6e_gb200_price_is_the_ultraserver_rate_per_tray(catalog):
    tray = catalog.instance("p6e-gb200.36xlarge")
    assert tray.on_demand is not None and not tray.on_demand.offered
    block = tray.capacity_block
    assert block is not None and block.usd_per_hour == pytest.approx(761.904 / 18, abs=1e-3)
    assert block.usd_per_hour / 4 == pytest.approx(10.582, abs=1e-3)  # AWS's per-GPU figure
    assert "Dallas" in block.region and block.as_of.isoformat() == "2026-08-01"


def test_the_x36_ultraserver_is_half_the_domain_at_the_same_rate_per_gpu(catalog):
    x36 = catalog.get("u-p6e-gb200x36", Kind.DOMAIN)
    nvl72 = catalog.get("gb200-nvl72", Kind.DOMAIN)
    assert x36.num_accelerators.value == 36 == nvl72.num_accelerators.value / 2
    assert x36.dense_flop_per_s[Dtype.FP8].value == pytest.approx(180e15)  # AWS: 180 PF FP8 for the x36


def test_trn2u_differs_from_trn2_only_in_its_ultraserver_domain(catalog):
    trn2, trn2u = catalog.instance("trn2.48xlarge"), catalog.instance("trn2u.48xlarge")
    assert trn2u.accelerator == trn2.accelerator and trn2u.num_accelerators.value == 16
    assert trn2u.network.total_bandwidth_bits_per_s.value == trn2.network.total_bandwidth_bits_per_s.value
    assert trn2.intra_node.domain == "trn2-16" and trn2u.intra_node.domain == "trn2-ultraserver-64"
    assert catalog.get(trn2u.intra_node.domain, Kind.DOMAIN).num_accelerators.value == 4 * 16
    assert trn2u.on_demand is None and trn2u.capacity_block is None  # no published price: unknown, not guessed
    assert any("No published price" in note for note in trn2u.notes)


def test_trn3_ultraservers_are_announced_figures_of_64_and_144_chips(catalog):
    chip = catalog.accelerator("trainium3")
    assert chip.preliminary and chip.dense_flop_per_s[Dtype.MXFP8].value == 2517e12
    assert chip.dense_flop_per_s[Dtype.MXFP4].value == chip.dense_flop_per_s[Dtype.MXFP8].value
    for domain_id, chips, mxfp8_pf in (("trn3-ultraserver-gen1", 64, 161.088), ("trn3-ultraserver-gen2", 144, 362.448)):
        domain = catalog.get(domain_id, Kind.DOMAIN)
        assert domain.preliminary and domain.num_accelerators.value == chips
        assert domain.dense_flop_per_s[Dtype.MXFP8].value == pytest.approx(mxfp8_pf * 1e15)  # PF
        assert domain.num_accelerators.provenance is Provenance.ANNOUNCED


@pytest.mark.parametrize("instance", ["p6e-gb200.36xlarge", "trn2u.48xlarge", "u-p6e-gb200x36"])
def test_every_new_entry_names_a_source_for_each_figure(catalog, instance):
    from clustersim.catalog.describe import describe

    entry = catalog.get(instance)
    rows = [row for row in describe(entry) if row.provenance is not None]
    assert rows and all(row.source and len(row.source) > 10 for row in rows)


def test_more_p6e_gb200_than_the_catalogued_cluster_is_refused(catalog):
    limit = cluster_limit(catalog, "p6e-gb200.36xlarge")
    assert limit is not None and limit.max_nodes == 25000 // 4
    system_for_instance(catalog, "p6e-gb200.36xlarge", limit.max_nodes)
    with pytest.raises(ClusterSimError, match=r"^nodes: 6,251 x p6e-gb200.36xlarge is more than") as info:
        system_for_instance(catalog, "p6e-gb200.36xlarge", limit.max_nodes + 1)
    assert info.value.field == "nodes"


def test_an_instance_in_a_switched_multi_server_domain_is_priced_as_that_domain(catalog):
    """A p6e-gb200.36xlarge of an x72 UltraServer sees 72 GPUs on NVLink. An instance of the x36 offer
    (domain u-p6e-gb200x36) must see 36, never 72: this fails if one is catalogued before the topology
    reads an instance's own domain."""
    from clustersim.catalog.schema import DomainTopology

    checked = 0
    for instance in catalog.list(Kind.INSTANCE):
        if instance.intra_node.domain is None:
            continue
        domain = catalog.get(instance.intra_node.domain, Kind.DOMAIN)
        per_node = int(instance.num_accelerators.value)
        if domain.topology is not DomainTopology.CROSSBAR or domain.num_accelerators.value <= per_node:
            continue
        servers = int(domain.num_accelerators.value) // per_node
        system = system_for_instance(catalog, instance.id, servers)
        assert system.scaleup_devices == domain.num_accelerators.value, instance.id
        checked += 1
    assert checked >= 1
