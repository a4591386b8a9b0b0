"""The embedded catalog: every entry validates and cites its figures; the corrected figures hold."""

import pytest

from clustersim.catalog.describe import compare, describe
from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Kind

REQUIRED = {
    Kind.ACCELERATOR: [
        "a100-sxm4-40gb",
        "a100-sxm4-80gb",
        "h100-sxm",
        "h100-pcie",
        "h100-nvl",
        "h200-sxm",
        "h200-nvl",
        "b200",
        "gb200",
        "b300",
        "gb300",
        "trainium1",
        "trainium2",
        "trainium3",
    ],
    Kind.INSTANCE: [
        "p4d.24xlarge",
        "p4de.24xlarge",
        "p5.48xlarge",
        "p5e.48xlarge",
        "p5en.48xlarge",
        "p6-b200.48xlarge",
        "p6-b300.48xlarge",
        "trn1.32xlarge",
        "trn1n.32xlarge",
        "trn2.48xlarge",
        "dgx-a100",
        "dgx-h100",
    ],
    Kind.LINK: [
        "nvlink-1",
        "nvlink-2",
        "nvlink-3",
        "nvlink-4",
        "nvlink-5",
        "nvlink-6",
        "neuronlink-v2",
        "neuronlink-v3",
        "neuronlink-v4",
        "pcie-gen3-x16",
        "pcie-gen4-x16",
        "pcie-gen5-x16",
        "pcie-gen6-x16",
    ],
    Kind.SWITCH: ["nvswitch-gen3", "nvlink-switch-tray"],
    Kind.DOMAIN: ["gb200-nvl72", "gb300-nvl72", "hgx-b300-8"],
    Kind.NETWORK: ["ena", "efa-v1", "efa-v2", "efa-v3", "efa-v4", "srd", "libfabric"],
    Kind.STORAGE: [
        "fsx-lustre",
        "fsx-scratch-1",
        "fsx-scratch-2",
        "fsx-persistent-1-ssd-50",
        "fsx-persistent-1-ssd-100",
        "fsx-persistent-1-ssd-200",
        "fsx-persistent-1-hdd-12",
        "fsx-persistent-1-hdd-40",
        "fsx-persistent-2-125",
        "fsx-persistent-2-250",
        "fsx-persistent-2-500",
        "fsx-persistent-2-1000",
    ],
    Kind.CLUSTER: ["ec2-ultracluster"],
}


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(use_env=False)


@pytest.mark.parametrize("kind", list(REQUIRED))
def test_required_entries_exist(catalog, kind):
    missing = [i for i in REQUIRED[kind] if i not in catalog.entries[kind]]
    assert not missing


def test_every_number_has_a_source(catalog):
    for entry in catalog.list():
        for row in describe(entry):
            if isinstance(row.value, int | float) and not isinstance(row.value, bool):
                assert row.source and len(row.source) > 5, (entry.id, row.path)


def test_every_kind_is_populated(catalog):
    for kind in Kind:
        assert catalog.list(kind), kind


def test_preliminary_entries_are_marked(catalog):
    assert catalog.accelerator("trainium3").preliminary
    assert not catalog.accelerator("h100-sxm").preliminary


def _ratio(rows, path):
    (row,) = [r for r in rows if r.path == path]
    return row.ratios[1]


def test_h200_over_h100_ratios(catalog):
    rows = compare([catalog.get("h100-sxm"), catalog.get("h200-sxm")])
    assert _ratio(rows, "memory_bytes") == pytest.approx(1.7625, abs=0.01)  # +76%
    assert _ratio(rows, "memory_bandwidth_bytes_per_s") == pytest.approx(1.433, abs=0.01)  # +43%
    for dtype in ("bf16", "fp16", "fp8", "tf32"):
        assert _ratio(rows, f"dense_flop_per_s.{dtype}") == pytest.approx(1.0)


def test_h100_dense_is_half_the_quoted_sparse(catalog):
    h100 = catalog.accelerator("h100-sxm")
    assert h100.dense_peak_flop_per_s("bf16") == pytest.approx(989.4e12, rel=1e-3)
    assert h100.sparse_flop_per_s["bf16"].value == pytest.approx(2 * 989.4e12, rel=2e-3)
    assert h100.memory_bytes.value == 80 * 2**30


def test_trainium2_bf16_is_667_dense(catalog):
    trn2 = catalog.accelerator("trn2")
    assert trn2.dense_peak_flop_per_s("bf16") == pytest.approx(667e12)
    assert trn2.memory_bytes.value == 96 * 2**30


def test_p5en_has_16_cards_of_200_gbps(catalog):
    net = catalog.instance("p5en.48xlarge").network
    assert net.num_cards.value == 16
    assert net.card_bandwidth_bits_per_s.value == 200e9
    assert net.total_bandwidth_bits_per_s.value == 3.2e12
    assert catalog.instance("p5.48xlarge").network.num_cards.value == 32


def test_hopper_nvswitch_chip_is_64_ports_and_3_2_tbps(catalog):
    switch = catalog.get("nvswitch-gen3", "switch")
    assert switch.num_ports.value == 64
    assert switch.bandwidth_bidirectional_bytes_per_s.value == pytest.approx(3.2e12)


def test_nvlink4_per_direction_is_half_the_bidirectional(catalog):
    link = catalog.get("nvlink-4", "link")
    assert link.per_device_bandwidth_per_direction_bytes_per_s.value == pytest.approx(450e9)
    assert link.per_device_bandwidth_bidirectional_bytes_per_s.value == pytest.approx(900e9)


def test_no_single_instance_has_28_8_tbps(catalog):
    # 28.8 Tbps is a 72-GPU UltraServer's EFA total; 6.4 Tbps (p6-b300, 800 Gbps a GPU) is the most one instance has
    above = {i.id for i in catalog.list(Kind.INSTANCE) if i.network.total_bandwidth_bits_per_s.value > 3.2e12 + 1}
    assert above == {"p6-b300.48xlarge"}
    assert catalog.instance("p6-b300.48xlarge").network.total_bandwidth_bits_per_s.value == pytest.approx(6.4e12)


def test_instances_reference_catalogued_accelerators(catalog):
    for instance in catalog.list(Kind.INSTANCE):
        assert catalog.accelerator(instance.accelerator).id == instance.accelerator


def test_prices_are_dated_and_absent_offers_are_explicit(catalog):
    p5e = catalog.instance("p5e.48xlarge")
    assert p5e.on_demand is not None and p5e.on_demand.usd_per_hour is None
    assert p5e.capacity_block is not None and p5e.capacity_block.usd_per_hour is not None
    assert catalog.instance("p5.48xlarge").on_demand.usd_per_hour == pytest.approx(55.04)


def test_scratch2_writes_at_half_its_read_baseline(catalog):
    scratch = catalog.get("fsx-scratch-2", "storage")
    assert scratch.network_baseline_bytes_per_s_per_tib.value == 200e6
    assert scratch.disk_baseline_write_bytes_per_s_per_tib.value == 100e6


def test_instance_domain_matches_its_accelerators(catalog):
    for instance in catalog.list(Kind.INSTANCE):
        if instance.intra_node.domain is None:
            continue
        domain = catalog.get(instance.intra_node.domain, Kind.DOMAIN)
        assert domain.accelerator == instance.accelerator, instance.id
        # an instance is its domain (p5, trn2) or one server of a domain that spans several (an UltraServer:
        # 18 p6e-gb200.36xlarge trays of 4 GPUs in a 72-GPU NVL72, 4 trn2u.48xlarge in a 64-chip Trn2 UltraServer)
        servers, rest = divmod(domain.num_accelerators.value, instance.num_accelerators.value)
        assert servers >= 1 and rest == 0, instance.id


def test_domain_totals_are_device_count_times_device_figures(catalog):
    for domain in catalog.list(Kind.DOMAIN):
        device = catalog.accelerator(domain.accelerator)
        if domain.memory_bytes is not None:
            expected = domain.num_accelerators.value * device.memory_bytes.value
            assert domain.memory_bytes.value == pytest.approx(expected, rel=0.02), domain.id
