"""FSx for Lustre rates at their edges: the burst only where asked, tiers with one figure, a file system
smaller than one target, stripe counts of -1 and past the targets, Automatic metadata IOPS at and a hair
below their thresholds, catalogue overlays missing a figure, and the errors each refusal raises."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Storage
from clustersim.errors import ClusterSimError
from clustersim.storage.fsx import ClientPath, FileSystem, check_capacity, file_system, tier_by_name
from clustersim.storage.layouts import Extent

CATALOG = load_catalog(use_env=False)
SERVICE = CATALOG.get("fsx-lustre")
GIB = 2**30
EXAMPLES = settings(max_examples=50, deadline=None, derandomize=True)  # the same draws on every run

# storage.toml, fsx-lustre: Automatic metadata IOPS 1,500 / 3,000 / 6,000 / 12,000 / 24,000 from
# 1,200 / 2,400 / 4,800 / 12,000 / 48,000 GiB.
CAPS = (1200, 2400, 4800, 12000, 48000)
IOPS = (1500, 3000, 6000, 12000, 24000)


def overlay(entry: Storage, **fields: object) -> Storage:
    """``entry`` with ``fields`` replaced and validated again, as a user's --catalog file merged field by field
    over the packaged one gives it (None: the figure absent)."""
    return Storage.model_validate({**entry.model_dump(), **fields})


def fs_of(tier: str, capacity_gib: float, *, service: Storage = SERVICE, **tier_fields: object) -> FileSystem:
    """A file system of a catalogued tier (optionally overlaid) at any capacity, not only AWS's sizes."""
    entry = tier_by_name(CATALOG, tier)
    return FileSystem(tier=overlay(entry, **tier_fields) if tier_fields else entry, service=service,
                      capacity_gib=capacity_gib)  # fmt: skip


# --- capacity, targets, price ---------------------------------------------------------------------


def test_capacity_in_bytes_is_gib_times_2_to_the_30():
    """Capacity is provisioned in GiB: 2,400 GiB is 2,400 x 2^30 bytes."""
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "2400GiB")
    assert fs.capacity_bytes == 2400 * GIB == 2_576_980_377_600


@EXAMPLES
@given(steps=st.integers(1, 80), tier=st.sampled_from(["SCRATCH_2", "PERSISTENT_2-125", "PERSISTENT_1-200"]))
def test_one_target_per_1200_gib(steps, tier):
    """One storage target per 1,200 GiB (service storage_target_bytes): 1,200 GiB has one, n x 2,400 has 2n."""
    assert file_system(CATALOG, tier, f"{2400 * steps}GiB").num_targets == 2 * steps
    assert file_system(CATALOG, tier, "1200GiB").num_targets == 1


def test_a_file_system_smaller_than_one_target_still_has_one():
    """num_targets floors at 1: 600 GiB (the lower PERSISTENT_2 minimum the SDK's DeploymentType text mentions,
    storage.toml min_capacity_bytes note) is half a 1,200 GiB target, round(0.5) = 0 targets, so 1."""
    tier = overlay(tier_by_name(CATALOG, "PERSISTENT_2-1000"), min_capacity_bytes={"value": "600GiB", "source": "test"})
    check_capacity(tier, 600.0)  # an overlay with the 600 GiB minimum accepts it
    fs = FileSystem(tier=tier, service=SERVICE, capacity_gib=600.0)
    assert fs.num_targets == 1
    # The one target carries the whole aggregate: 0.6 AWS TiB x 1,000 MB/s/TiB disk = 600 MB/s.
    assert fs.target_bytes_per_s(write=True) == pytest.approx(600e6)


def test_a_service_without_a_target_size_takes_1200_gib():
    """No storage_target_bytes in the service (an overlay removing it): AWS's ~1.2 TiB disk, 1,200 GiB."""
    service = overlay(SERVICE, storage_target_bytes=None)
    fs = fs_of("PERSISTENT_2-1000", 24000, service=service)
    assert fs.target_gib == 1200.0 and fs.num_targets == 20


def test_the_catalogued_target_size_sets_the_targets():
    """An overlay giving 2,400 GiB targets (the 2.4 TiB per OSS of non-EFA PERSISTENT_2, storage.toml
    efa_storage_per_server_bytes source) halves the targets: 24,000 GiB has 10, each twice the share."""
    service = overlay(SERVICE, storage_target_bytes={"value": "2400GiB", "source": "test"})
    fs = fs_of("PERSISTENT_2-1000", 24000, service=service)
    assert fs.target_gib == 2400.0 and fs.num_targets == 10
    assert fs.target_bytes_per_s(write=True) == pytest.approx(24e9 / 10)  # 24 AWS TiB x 1,000 MB/s/TiB


def test_price_per_hour_and_a_tier_without_one():
    """$/GB-month x GiB / 730 h: PERSISTENT_2-125 at $0.145 (storage.toml price) on 2,400 GiB is $0.4767/h;
    SCRATCH_1 has no price in the catalog, so none."""
    assert file_system(CATALOG, "PERSISTENT_2-125", "2400GiB").price_usd_per_hour == pytest.approx(0.145 * 2400 / 730)
    assert file_system(CATALOG, "SCRATCH_1", "2400GiB").price_usd_per_hour is None


# --- aggregates, targets, stripes -------------------------------------------------------------------


def test_a_tier_with_only_a_network_figure_runs_at_it():
    """SCRATCH_1 publishes one figure, network 200 MB/s/TiB, and no disk or burst figure: writes, uncached
    reads and the burst all run at it (2.4 AWS TiB -> 480 MB/s)."""
    fs = file_system(CATALOG, "SCRATCH_1", "2400GiB")
    assert fs.network_bytes_per_s == pytest.approx(480e6)
    assert fs.write_bytes_per_s == pytest.approx(480e6)
    assert fs.read_bytes_per_s == pytest.approx(480e6)
    assert fs.burst_write_bytes_per_s == pytest.approx(480e6)
    assert fs.aggregate_bytes_per_s(write=True, burst=True) == pytest.approx(480e6)


# PERSISTENT_1-50 on 4,800 GiB (AWS's worked example, storage.toml): 4.8 AWS TiB x disk 50 MB/s/TiB = 240 MB/s
# baseline; burst min(network 1,300, disk 240) x 4.8 = 1.152 GB/s; 4 targets of 60 MB/s (288 MB/s bursting).
P1_50 = file_system(CATALOG, "PERSISTENT_1-50", "4800GiB")


def test_the_burst_applies_only_where_asked():
    """Aggregate, target and stripe rates are the baseline unless burst=True, and only writes burst."""
    assert P1_50.num_targets == 4
    assert P1_50.aggregate_bytes_per_s(write=True) == pytest.approx(240e6)
    assert P1_50.aggregate_bytes_per_s(write=True, burst=True) == pytest.approx(1.152e9)
    assert P1_50.aggregate_bytes_per_s(write=False, burst=True) == pytest.approx(240e6)  # uncached reads
    assert P1_50.target_bytes_per_s(write=True) == pytest.approx(60e6)
    assert P1_50.target_bytes_per_s(write=True, burst=True) == pytest.approx(288e6)
    for path in ClientPath:  # 288 MB/s is under one 5 Gbps (625 MB/s) ENA connection
        assert P1_50.stripe_bytes_per_s(path, write=True) == pytest.approx(60e6)
        assert P1_50.stripe_bytes_per_s(path, write=True, burst=True) == pytest.approx(288e6)


def test_a_stripe_writes_at_the_write_share_and_reads_at_the_read_share():
    """SCRATCH_2 on 2,400 GiB (storage.toml): disk writes 100, reads 200 MB/s/TiB, so 240 and 480 MB/s over
    2 targets: a stripe writes at 120 MB/s and reads at 240 MB/s."""
    fs = file_system(CATALOG, "SCRATCH_2", "2400GiB")
    for path in (ClientPath.ENA, ClientPath.EFA):
        assert fs.stripe_bytes_per_s(path, write=True) == pytest.approx(120e6)
        assert fs.stripe_bytes_per_s(path, write=False) == pytest.approx(240e6)


@EXAMPLES
@given(
    tier=st.sampled_from(["SCRATCH_2", "PERSISTENT_1-50", "PERSISTENT_1-12", "PERSISTENT_2-125", "PERSISTENT_2-1000"]),
    steps=st.integers(1, 30),
    write=st.booleans(),
    burst=st.booleans(),
)
def test_a_stripe_is_a_targets_share_capped_on_ena_by_one_connection(tier, steps, write, burst):
    """A stripe carries aggregate / targets; over ENA at most one 5 Gbps connection (625 MB/s)."""
    fs = file_system(CATALOG, tier, f"{12000 * steps}GiB")
    share = fs.aggregate_bytes_per_s(write=write, burst=burst) / fs.num_targets
    assert fs.target_bytes_per_s(write=write, burst=burst) == pytest.approx(share)
    assert fs.stripe_bytes_per_s(ClientPath.EFA, write=write, burst=burst) == pytest.approx(share)
    assert fs.stripe_bytes_per_s(ClientPath.ENA, write=write, burst=burst) == pytest.approx(min(share, 625e6))


def test_stripe_count_minus_one_or_past_the_targets_is_all_targets():
    """-1 means all targets; a count above the targets gets them all; a smaller count is kept."""
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "24000GiB")  # 20 targets
    assert fs.stripes_of(Extent(0.0, math.inf, -1)) == 20
    assert fs.stripes_of(Extent(0.0, math.inf, 32)) == 20
    assert fs.stripes_of(Extent(0.0, math.inf, 8)) == 8
    assert file_system(CATALOG, "PERSISTENT_2-1000", "1200GiB").stripes_of(Extent(0.0, math.inf, -1)) == 1


# --- metadata IOPS ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("capacity", "iops"),
    [(600, 1500), (1199.5, 1500), (2399, 1500), (2399.999999999, 3000), (2400, 3000), (4799.5, 3000),
     (11999.5, 6000), (47999.5, 12000), (47999.999999999, 24000), (48000, 24000)],
)  # fmt: skip
def test_automatic_metadata_iops_at_and_below_the_thresholds(capacity, iops):
    """Automatic IOPS step up at each capacity in storage.toml (within 1e-9 GiB of float noise): below the
    first threshold the first step, up to 1 GiB short of a threshold the step before it."""
    assert fs_of("PERSISTENT_2-125", capacity).metadata_iops == iops


@EXAMPLES
@given(step=st.integers(0, 3), fraction=st.floats(0.0, 0.999))
def test_automatic_metadata_iops_hold_between_thresholds(step, fraction):
    """Any capacity from one threshold up to (not including) the next gets that threshold's IOPS."""
    capacity = CAPS[step] + fraction * (CAPS[step + 1] - CAPS[step])
    assert fs_of("PERSISTENT_2-1000", capacity).metadata_iops == IOPS[step]


def test_automatic_metadata_iops_need_both_capacities_and_iops():
    """A service overlay without either Automatic list gives no Automatic IOPS (None), not an error."""
    for missing in ("metadata_automatic_iops", "metadata_automatic_capacities_gib"):
        service = overlay(SERVICE, **{missing: None})
        assert fs_of("PERSISTENT_2-1000", 4800, service=service).metadata_iops is None
        assert fs_of("PERSISTENT_2-1000", 4800, service=service).metadata_files_per_s() is None


def test_automatic_metadata_lists_of_different_lengths_are_refused_by_the_catalog():
    """An overlay giving 2 Automatic IOPS for 5 capacities is refused when the entry is read, naming both
    lists, not paired up to the shorter one (1,500 and 3,000 up to 2,400 GiB, the other capacities dropped)."""
    with pytest.raises(ValueError, match=r"metadata_automatic_iops: 2 values for the 5 capacities of "
                       r"metadata_automatic_capacities_gib"):  # fmt: skip
        overlay(SERVICE, metadata_automatic_iops={"values": [1500, 3000], "source": "test"})


# --- errors and description ---------------------------------------------------------------------------


def test_a_tier_without_a_network_baseline_is_named():
    """Every rate needs the network baseline; a tier overlay without it is refused naming the tier."""
    fs = fs_of("PERSISTENT_2-1000", 2400, network_baseline_bytes_per_s_per_tib=None)
    for rate in ("network_bytes_per_s", "write_bytes_per_s", "read_bytes_per_s"):
        with pytest.raises(ClusterSimError) as err:
            getattr(fs, rate)
        assert err.value.field == "storage" and err.value.value == "fsx-persistent-2-1000"
        assert str(err.value) == (
            "storage tier fsx-persistent-2-1000 has no network_baseline_bytes_per_s_per_tib in the catalog"
        )


def test_a_path_without_a_client_ceiling_is_named():
    """A service overlay without the EFA+GDS ceiling: asking for that path names the service and the path."""
    fs = fs_of("PERSISTENT_2-1000", 4800, service=overlay(SERVICE, efa_gds_client_bits_per_s=None))
    with pytest.raises(ClusterSimError) as err:
        fs.client_bytes_per_s(ClientPath.EFA_GDS, None)
    assert str(err.value) == (
        "path 'efa-gds': fsx-lustre has no client ceiling for it in the catalog (paths with one: ena, efa)"
    )
    assert err.value.field == "path" and err.value.value == "efa-gds"
    assert fs.client_bytes_per_s(ClientPath.EFA, None) == pytest.approx(700e9 / 8)  # the others still hold


def test_stripes_past_the_targets_are_refused_naming_field_and_value():
    """check_stripes refuses 0 and 21 on 20 targets, with field 'stripes' and the count as value."""
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "24000GiB")
    for bad in (0, 21):
        with pytest.raises(ClusterSimError, match=rf"stripes: {bad} is not between 1 and the 20 storage targets of "
                           r"this 24,000 GiB file system") as err:  # fmt: skip
            fs.check_stripes(bad)
        assert err.value.field == "stripes" and err.value.value == bad


def test_efa_on_a_file_system_not_created_for_it_names_path_and_fix():
    """EFA on SCRATCH_2 (no EFA at all) or on a plain PERSISTENT_2: field 'path', the path as value, and
    the fix for each."""
    scratch = file_system(CATALOG, "SCRATCH_2", "2400GiB")
    with pytest.raises(ClusterSimError) as err:
        scratch.check_path(ClientPath.EFA_GDS)
    assert err.value.field == "path" and err.value.value == "efa-gds"
    assert str(err.value) == (
        "path 'efa-gds': this FSx for Lustre SCRATCH_2 file system is not EFA-enabled; only PERSISTENT_2 file "
        "systems created EFA-enabled can be, or use --path ena"
    )
    plain = file_system(CATALOG, "PERSISTENT_2-1000", "4800GiB")
    with pytest.raises(ClusterSimError, match=r"create it EFA-enabled \(fsx:PERSISTENT_2-1000:CAPACITY:efa\)") as err:
        plain.check_path(ClientPath.EFA)
    assert err.value.field == "path" and err.value.value == "efa"


def test_describe_names_tier_capacity_efa_and_targets():
    """The description: tier, capacity, ', EFA-enabled' only when it is, and the target count."""
    assert file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB").describe() == (
        "FSx for Lustre PERSISTENT_2 1000 MB/s/TiB, 100,800 GiB (84 targets)"
    )
    assert file_system(CATALOG, "PERSISTENT_2-1000", "9600GiB", efa=True).describe() == (
        "FSx for Lustre PERSISTENT_2 1000 MB/s/TiB, 9,600 GiB, EFA-enabled (2 targets)"
    )
