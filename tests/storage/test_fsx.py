"""FSx for Lustre from the catalog: hand-derived aggregates, AWS's capacity rules, layouts, client paths."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.storage.fsx import ClientPath, default_layout, file_system, parse_storage
from clustersim.storage.layouts import Extent, parse_layout

CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")
GIB = 2**30


def test_persistent_2_1000_aggregates_by_hand():
    fs = parse_storage(CATALOG, "fsx:PERSISTENT_2-1000:100800GiB")
    # 100,800 GiB = 100.8 AWS TiB: disk 1000 MB/s/TiB -> 100.8 GB/s, network 2600 -> 262.08 GB/s.
    assert fs.num_targets == 84
    assert fs.write_bytes_per_s == pytest.approx(100.8e9)
    assert fs.read_bytes_per_s == pytest.approx(100.8e9)
    assert fs.network_bytes_per_s == pytest.approx(262.08e9)
    assert fs.target_bytes_per_s(write=True) == pytest.approx(1.2e9)
    assert fs.price_usd_per_hour == pytest.approx(0.600 * 100_800 / 730)


def test_scratch_2_writes_at_half_the_quoted_rate():
    fs = file_system(CATALOG, "SCRATCH_2", "2400GiB")
    assert fs.write_bytes_per_s == pytest.approx(100e6 * 2.4)  # disk write 100 MB/s/TiB
    assert fs.read_bytes_per_s == pytest.approx(200e6 * 2.4)
    assert fs.burst_write_bytes_per_s == pytest.approx(100e6 * 2.4)  # no disk burst: the disk baseline binds
    assert fs.num_targets == 2


def test_aws_worked_example_persistent_1_50():
    # AWS: 4.8 TiB at 50 MB/s/TiB gives 240 MB/s baseline and 1.152 GB/s burst disk throughput.
    fs = file_system(CATALOG, "PERSISTENT_1-50", "4800GiB")
    assert fs.write_bytes_per_s == pytest.approx(240e6)
    assert fs.burst_write_bytes_per_s == pytest.approx(1.152e9)


@pytest.mark.parametrize("capacity", ["1200GiB", "2400GiB", "4800GiB", "100800GiB"])
def test_valid_ssd_capacities(capacity):
    assert file_system(CATALOG, "PERSISTENT_2-125", capacity).capacity_gib == pytest.approx(int(capacity[:-3]))


def test_scratch_1_steps_of_3600():
    assert file_system(CATALOG, "SCRATCH_1", "7200GiB").capacity_gib == 7200
    with pytest.raises(ClusterSimError, match="nearest valid: 3,600 GiB or 7,200 GiB"):
        file_system(CATALOG, "SCRATCH_1", "4800GiB")


def test_capacity_below_minimum_is_refused():
    with pytest.raises(ClusterSimError, match=r"below the .* minimum of 1,200 GiB") as err:
        file_system(CATALOG, "PERSISTENT_2-1000", "600GiB")
    assert err.value.field == "capacity"


def test_capacity_off_the_increments_names_the_neighbours():
    with pytest.raises(ClusterSimError, match="nearest valid: 100,800 GiB or 103,200 GiB"):
        parse_storage(CATALOG, "fsx:PERSISTENT_2-1000:100TiB")


def test_hdd_minimum_and_multiples():
    assert file_system(CATALOG, "PERSISTENT_1-12", "12000GiB").capacity_gib == 12000
    with pytest.raises(ClusterSimError, match="minimum of 6,000 GiB"):
        file_system(CATALOG, "PERSISTENT_1-12", "2400GiB")


def test_unknown_tier_and_malformed_spec():
    with pytest.raises(UnknownNameError):
        parse_storage(CATALOG, "fsx:PERSISTENT_3-1000:1200GiB")
    with pytest.raises(ClusterSimError, match="expected fsx:TIER:CAPACITY"):
        parse_storage(CATALOG, "efs:1200GiB")


def test_stripe_count_above_targets_is_refused():
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "24000GiB")
    assert fs.num_targets == 20
    fs.check_stripes(20)
    with pytest.raises(ClusterSimError, match="21 is not between 1 and the 20 storage targets"):
        fs.check_stripes(21)


def test_layouts_parse_and_the_newest_default_is_progressive():
    assert parse_layout("-c 1") == (Extent(0.0, math.inf, 1),)
    assert parse_layout("-E 1G -c 1 -E -1 -c 5") == (Extent(0.0, GIB, 1), Extent(GIB, math.inf, 5))
    newest = default_layout(CATALOG.get("fsx-lustre"))
    assert [e.stripes for e in newest] == [1, 8, 16, 32]
    assert newest[2].end_bytes == 100 * GIB
    for bad in ("-c 0", "-E 1G -c 1", "-E 1G -c 1 -E 1M -c 2 -E -1 -c 4", "-c x", "stripe"):
        with pytest.raises(ClusterSimError, match="layout"):
            parse_layout(bad)


def test_client_ceilings_by_path_and_nic():
    fs = parse_storage(CATALOG, "fsx:PERSISTENT_2-1000:100800GiB")
    assert fs.client_bytes_per_s(ClientPath.ENA, P5) == pytest.approx(100e9 / 8)
    assert fs.client_bytes_per_s(ClientPath.EFA, P5) == pytest.approx(700e9 / 8)
    assert fs.client_bytes_per_s(ClientPath.EFA_GDS, P5) == pytest.approx(1200e9 / 8)
    p4d = CATALOG.instance("p4d.24xlarge")  # 400 Gbps of NICs caps the 1,200 Gbps GDS ceiling
    assert fs.client_bytes_per_s(ClientPath.EFA_GDS, p4d) == pytest.approx(400e9 / 8)
    # On ENA one stripe is one 5 Gbps client-to-server connection, below a target's 1.2 GB/s.
    assert fs.stripe_bytes_per_s(ClientPath.ENA, write=True) == pytest.approx(5e9 / 8)
    assert fs.stripe_bytes_per_s(ClientPath.EFA, write=True) == pytest.approx(1.2e9)


def test_efa_needs_persistent_2():
    fs = file_system(CATALOG, "SCRATCH_2", "2400GiB")
    with pytest.raises(ClusterSimError, match="only PERSISTENT_2 file systems created EFA-enabled") as err:
        fs.check_path(ClientPath.EFA_GDS)
    assert err.value.field == "path"
    plain = file_system(CATALOG, "PERSISTENT_2-1000", "4800GiB")
    with pytest.raises(ClusterSimError, match=r"fsx:PERSISTENT_2-1000:CAPACITY:efa"):
        plain.check_path(ClientPath.EFA)
    file_system(CATALOG, "PERSISTENT_2-1000", "4800GiB", efa=True).check_path(ClientPath.EFA)


@settings(max_examples=25, deadline=None)
@given(steps=st.integers(1, 200), tier=st.sampled_from(["PERSISTENT_2-125", "PERSISTENT_2-1000", "SCRATCH_2"]))
def test_more_capacity_is_never_slower(steps, tier):
    small = file_system(CATALOG, tier, f"{2400 * steps}GiB")
    large = file_system(CATALOG, tier, f"{2400 * (steps + 1)}GiB")
    assert large.write_bytes_per_s > small.write_bytes_per_s
    assert large.read_bytes_per_s > small.read_bytes_per_s
    assert large.num_targets >= small.num_targets


@pytest.mark.parametrize(
    ("capacity", "iops"),
    [(1200, 1500), (2400, 3000), (4800, 6000), (9600, 6000), (12000, 12000), (45600, 12000), (48000, 24000),
     (100800, 48000)],
)  # fmt: skip
def test_automatic_metadata_iops_follow_capacity(capacity, iops):
    fs = file_system(CATALOG, "PERSISTENT_2-1000", f"{capacity}GiB")
    assert fs.metadata_iops == iops and fs.metadata_files_per_s() == iops  # two operations per IOPS, two per file
    assert file_system(CATALOG, "SCRATCH_2", "2400GiB").metadata_iops is None  # no metadata configuration


def test_efa_enabled_capacity_and_targets():
    for rate, step in (("125", 38400), ("250", 19200), ("500", 9600), ("1000", 4800)):
        fs = file_system(CATALOG, f"PERSISTENT_2-{rate}", f"{step * 3}GiB", efa=True)
        assert fs.num_targets == 3 and fs.target_gib == step
        assert fs.write_bytes_per_s == pytest.approx(int(rate) * 1e6 * step * 3 / 1000)
    with pytest.raises(ClusterSimError, match="nearest valid: 4,800 GiB or 9,600 GiB") as err:
        file_system(CATALOG, "PERSISTENT_2-1000", "7200GiB", efa=True)
    assert err.value.field == "capacity"
    spec = parse_storage(CATALOG, "fsx:PERSISTENT_2-1000:9600GiB:efa:mdiops=24000")
    assert spec.efa and spec.metadata_iops == 24000 and spec.num_targets == 2
