"""FSx for Lustre input checks: layouts as ``lfs setstripe`` reads them, tier names, AWS's capacity rules,
EFA-enabled capacities, metadata IOPS, storage specs and client paths. Each refusal names its field and
value and says what is valid; the valid sizes in the messages are worked out by hand from the catalog."""

import math
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Storage
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.storage.fsx import (
    ClientPath,
    check_capacity,
    check_efa,
    check_metadata_iops,
    client_path_for,
    default_layout,
    file_system,
    parse_storage,
    path_refusal,
    tier_by_name,
)
from clustersim.storage.layouts import Extent, parse_layout

CATALOG = load_catalog(use_env=False)
GIB = 2**30
PROPERTY = settings(max_examples=50, deadline=None, derandomize=True)


def tier(name: str) -> Storage:
    return tier_by_name(CATALOG, name)


# A user's catalog file: a second Lustre service with no default layouts, a tier of it that gives no
# capacity rules and says nothing of EFA, and a PERSISTENT_2 variant marked as not EFA-capable (based_on
# keeps the base tier's storage per file server).
OVERLAY = """
[[storage]]
id = "lab-lustre"
name = "Lab Lustre service"
category = "service"
ena_client_bits_per_s = { value = "50Gbps", source = "test overlay" }

[[storage]]
id = "lab-lustre-tier"
name = "Lab Lustre tier"
category = "tier"
service = "lab-lustre"
deployment_type = "PERSISTENT_2"
network_baseline_bytes_per_s_per_tib = { value = "500MB/s", source = "test overlay" }

[[storage]]
id = "p2-1000-no-efa"
based_on = "fsx-persistent-2-1000"
name = "PERSISTENT_2 1000 without EFA"
efa_supported = { value = false, source = "test overlay" }
"""


@pytest.fixture(scope="module")
def overlay_catalog(tmp_path_factory):
    folder = tmp_path_factory.mktemp("catalog")
    (folder / "lab.toml").write_text(OVERLAY, encoding="utf-8")
    return load_catalog([folder], use_env=False)


def refusal(call, *args, **kwargs) -> ClusterSimError:
    with pytest.raises(ClusterSimError) as caught:
        call(*args, **kwargs)
    return caught.value


# --- layouts --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end", "end_bytes"),
    [("1G", GIB), ("1g", GIB), ("64k", 64 * 2**10), ("512M", 512 * 2**20), ("2T", 2 * 2**40),
     ("2GiB", 2 * GIB), ("1048576", 2**20)],
)  # fmt: skip
def test_extent_ends_read_as_lfs_reads_them(end, end_bytes):
    """lfs reads a one-letter suffix (either case) as binary; an explicit GiB stays GiB; no suffix is bytes."""
    layout = parse_layout(f"-E {end} -c 1 -E -1 -c 4")
    assert layout == (Extent(0.0, end_bytes, 1), Extent(end_bytes, math.inf, 4))


def test_an_unknown_size_unit_is_refused_echoing_what_was_written():
    """An extent end with a unit lfs does not know is refused as a layout error naming the text as written
    (not the rewrite to a binary unit) and the whole layout."""
    spec = "-E 1X -c 1 -E -1 -c 4"
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: extent end '1X' is not a size (e.g. 64M, 1G or 1GiB; a number alone is bytes)"
    assert err.field == "layout" and err.value == spec


@pytest.mark.parametrize("spec", ["-c -1", "-E 1G -c 1 -E -1 -c -1"])
def test_stripe_count_minus_one_means_all_targets(spec):
    """-1 (all storage targets) is a valid stripe count, alone or in the last extent."""
    assert parse_layout(spec)[-1].stripes == -1


@PROPERTY
@given(count=st.integers(-1000, 1000))
def test_stripe_counts_from_one_up_or_minus_one_are_accepted_the_rest_refused(count):
    """Counts >= 1 and -1 are taken as written; 0 and below -1 are refused naming the count."""
    if count >= 1 or count == -1:
        assert parse_layout(f"-c {count}") == (Extent(0.0, math.inf, count),)
        return
    spec = f"-c {count}"
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: stripe count must be >= 1 or -1 (all)"
    assert err.field == "layout" and err.value == count


@pytest.mark.parametrize(("count", "spec"), [(0, "-c 0"), (-2, "-c -2"), (-2, "-E 1G -c 1 -E -1 -c -2")])
def test_stripe_count_zero_or_below_minus_one_is_refused(count, spec):
    """0 and -2 are refused; the message quotes the whole layout and the error carries the count."""
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: stripe count must be >= 1 or -1 (all)"
    assert err.field == "layout" and err.value == count


@pytest.mark.parametrize(("spec", "text"), [("-c 1.5", "1.5"), ("-E 1G -c x -E -1 -c 4", "x")])
def test_a_stripe_count_that_is_not_a_whole_number_is_refused(spec, text):
    """A non-integer stripe count is refused naming the layout, the count as written and what is valid."""
    err = refusal(parse_layout, spec)
    assert str(err) == (
        f"layout {spec!r}: stripe count {text!r} is not a whole number (valid: 1 or more, or -1 for all targets)"
    )
    assert err.field == "layout" and err.value == text


FORMS = "'-c N' or '-E END -c N [-E END -c N ...]' (lfs setstripe's -E, -c and -S)"


@pytest.mark.parametrize(
    ("spec", "what"),
    [("-c 1 2", "unknown option or stray word '2'"), ("-s 4", "unknown option or stray word '-s'"),
     ("-c", "-c needs a value"), ("-E", "-E needs a value"), ("stripe", "unknown option or stray word 'stripe'"),
     ("-c 1 -c 2", "two stripe counts (-c) for one component"), ("", "every component needs a stripe count (-c)"),
     ("-E 1G -c 1 junk -E -1 -c 4", "unknown option or stray word 'junk'"),
     ("-c 8 -E -1 -c 2", "-c 8 comes before the first -E"),
     ("-E 1G -c 1 -E -1", "every component needs a stripe count (-c)"),
     ("-E 1G -c 1 -E -1 -c 4 -i 0", "unknown option or stray word '-i'")],
)  # fmt: skip
def test_a_layout_with_a_word_lfs_would_not_read_so_is_refused(spec, what):
    """Every word of a layout is read or refused, never skipped: a stray word, an option the model does not
    know, a missing value, two counts for one component, an option before the first -E, a component without
    -c. The message says what is wrong and both valid forms."""
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: {what}; expected {FORMS}"
    assert err.field == "layout" and err.value == spec


def test_a_stripe_size_is_read_and_checked_but_does_not_change_the_extents():
    """-S (stripe size) is part of lfs setstripe's syntax: taken in any component, its value checked, and the
    extents the same as without it (a stripe's rate is its target's share whatever the stripe size)."""
    assert parse_layout("-E 1G -S 4M -c 1 -E -1 -S 16M -c 4") == parse_layout("-E 1G -c 1 -E -1 -c 4")
    assert parse_layout("-S 1M -c 2") == (Extent(0.0, math.inf, 2),)
    assert parse_layout("-S 64K -c 2") == parse_layout("-S 65536 -c 2") == (Extent(0.0, math.inf, 2),)
    for spec, text in (("-S 0 -c 2", "0"), ("-E 1G -S 4Q -c 1 -E -1 -c 2", "4Q"), ("-S 1 -c 2", "1"),
                       ("-S 96K -c 2", "96K")):  # fmt: skip
        err = refusal(parse_layout, spec)
        assert err.field == "layout" and err.value == spec and f"stripe size {text!r}" in str(err)


@pytest.mark.parametrize("spec", ["-E 1G -c 1 -E 1G -c 2 -E -1 -c 4", "-E 1G -c 1 -E 1M -c 2 -E -1 -c 4"])
def test_extent_ends_that_do_not_increase_are_refused(spec):
    """An extent ending where the previous one ended (empty) or before it is refused."""
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: extent ends must increase"
    assert err.field == "layout" and err.value == spec


@pytest.mark.parametrize("spec", ["-E 1G -c 1", "-E 1G -c 1 -E 10G -c 4"])
def test_a_progressive_layout_must_end_at_eof(spec):
    """The last extent of a progressive layout must run to -1 (the end of the file)."""
    err = refusal(parse_layout, spec)
    assert str(err) == f"layout {spec!r}: the last extent must end at -1 (EOF)"
    assert err.field == "layout" and err.value == spec


def test_a_service_without_default_layouts_stripes_every_file_on_one_target(overlay_catalog):
    """A service the user's catalog gives no default layouts: one extent, the whole file, one stripe."""
    service = overlay_catalog.get("lab-lustre", "storage")
    assert isinstance(service, Storage) and not service.default_layouts
    assert default_layout(service) == (Extent(0.0, math.inf, 1),)


# --- tiers ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fsx-lustre", "fsx", "nvme", "instance-nvme"])
def test_the_service_and_local_nvme_are_not_tiers(name):
    """Only tier entries are tiers: the service and local NVMe are refused, listing each tier's first alias."""
    with pytest.raises(UnknownNameError) as caught:
        tier_by_name(CATALOG, name)
    err = caught.value
    assert err.field == "storage_tier" and err.value == name
    assert str(err).startswith(f"unknown storage tier {name!r}")
    assert err.valid == [
        "PERSISTENT_1-100", "PERSISTENT_1-12", "PERSISTENT_1-200", "PERSISTENT_1-40", "PERSISTENT_1-50",
        "PERSISTENT_2-1000", "PERSISTENT_2-125", "PERSISTENT_2-250", "PERSISTENT_2-500", "SCRATCH_1", "SCRATCH_2",
    ]  # fmt: skip


@pytest.mark.parametrize(
    "name", ["PERSISTENT_2-1000", "persistent_2_1000", " Persistent-2-1000 ", "fsx-persistent-2-1000"]
)
def test_a_tier_is_found_by_id_or_alias_whatever_the_case_and_separators(name):
    """Ids and aliases match case-insensitively, with '_' and '-' alike and outer spaces ignored."""
    assert tier_by_name(CATALOG, name).id == "fsx-persistent-2-1000"


# --- capacity -------------------------------------------------------------------------------------


def test_scratch_1_takes_twice_its_minimum_although_its_step_is_3600():
    """SCRATCH_1: 1,200 GiB, 2,400 GiB (twice the minimum, not a multiple of 3,600), then steps of 3,600."""
    for capacity in (1200.0, 2400.0, 3600.0, 7200.0):
        check_capacity(tier("SCRATCH_1"), capacity)
    err = refusal(check_capacity, tier("SCRATCH_1"), 4800.0)
    # 4,800 / 3,600 = 1.33: the multiples either side are 3,600 and 7,200.
    assert str(err) == (
        "capacity 4,800.00 GiB is off the FSx for Lustre SCRATCH_1 sizes (1,200 GiB, 2,400 GiB, then multiples of "
        "3,600 GiB); nearest valid: 3,600 GiB or 7,200 GiB"
    )
    assert err.field == "capacity" and err.value == 4800.0


@pytest.mark.parametrize(
    ("capacity", "nearest"), [(3000.0, "2,400 GiB or 3,600 GiB"), (1800.0, "1,200 GiB or 2,400 GiB")]
)
def test_the_nearest_valid_sizes_count_twice_the_minimum_off_the_steps(capacity, nearest):
    """SCRATCH_1's twice-the-minimum size (2,400 GiB) is not a multiple of its 3,600 GiB step, yet valid: it is
    the nearest valid size below 3,000 GiB and above 1,800 GiB, not 1,200 or 3,600."""
    err = refusal(check_capacity, tier("SCRATCH_1"), capacity)
    assert str(err).endswith(f"; nearest valid: {nearest}")


@PROPERTY
@given(capacity=st.floats(1200.5, 40000.0))
def test_the_nearest_valid_sizes_are_valid_and_nothing_valid_lies_between(capacity):
    """Whatever the capacity refused, the two sizes named are valid, bracket it, and no valid size lies
    strictly between them (SCRATCH_1: 1,200, 2,400, then multiples of 3,600)."""
    entry = tier("SCRATCH_1")
    valid = [1200.0, 2400.0, *(3600.0 * k for k in range(1, 13))]
    if any(abs(capacity - v) < 1e-6 for v in valid):
        return
    sizes = re.findall(r"nearest valid: ([\d,]+) GiB or ([\d,]+) GiB$", str(refusal(check_capacity, entry, capacity)))
    below, above = (float(x.replace(",", "")) for x in sizes[0])
    assert below in valid and above in valid and below < capacity < above
    assert not any(below < v < above for v in valid)


def test_a_capacity_that_is_not_a_size_is_refused_naming_the_capacity():
    """fsx:TIER:lots: the capacity field and the text as given, with what a size looks like."""
    err = refusal(parse_storage, CATALOG, "fsx:PERSISTENT_2-1000:lots")
    assert err.field == "capacity" and err.value == "lots"
    assert str(err).startswith("capacity: cannot read 'lots' as bytes")


@pytest.mark.parametrize(
    ("name", "capacity", "sizes", "nearest"),
    [
        # 1,200 minimum, 2,400 step: 3,000 lies between 1 x 2,400 and 2 x 2,400.
        ("PERSISTENT_2-1000", 3000.0, "1,200 GiB, 2,400 GiB, then multiples of 2,400 GiB", "2,400 GiB or 4,800 GiB"),
        # Between the minimum and twice it, the minimum is the nearest below (no multiple of 2,400 is lower).
        ("SCRATCH_2", 1800.0, "1,200 GiB, 2,400 GiB, then multiples of 2,400 GiB", "1,200 GiB or 2,400 GiB"),
        # HDD 40: minimum and step 1,800; 5,000 / 1,800 = 2.78, so 3,600 and 5,400.
        ("PERSISTENT_1-40", 5000.0, "1,800 GiB, 3,600 GiB, then multiples of 1,800 GiB", "3,600 GiB or 5,400 GiB"),
        # HDD 12: minimum and step 6,000; 9,000 lies between 6,000 and 12,000.
        ("PERSISTENT_1-12", 9000.0, "6,000 GiB, 12,000 GiB, then multiples of 6,000 GiB", "6,000 GiB or 12,000 GiB"),
        # A fraction of a GiB over a valid size: 2,400.25 GiB lies between 2,400 and 4,800.
        ("PERSISTENT_2-125", 2400.25, "1,200 GiB, 2,400 GiB, then multiples of 2,400 GiB", "2,400 GiB or 4,800 GiB"),
    ],
)
def test_capacity_off_the_sizes_names_the_rule_and_the_nearest_valid(name, capacity, sizes, nearest):
    """The refusal names the capacity, the tier's sizes and the valid sizes either side of it."""
    entry = tier(name)
    err = refusal(check_capacity, entry, capacity)
    assert str(err) == f"capacity {capacity:,.2f} GiB is off the {entry.name} sizes ({sizes}); nearest valid: {nearest}"
    assert err.field == "capacity" and err.value == capacity


def test_capacity_below_the_minimum_names_the_minimum():
    """Below the minimum: the capacity, the tier and its minimum (HDD 12: 6,000 GiB)."""
    err = refusal(check_capacity, tier("PERSISTENT_1-12"), 2400.0)
    assert (
        str(err) == "capacity 2,400 GiB is below the FSx for Lustre PERSISTENT_1 HDD 12 MB/s/TiB minimum of 6,000 GiB"
    )
    assert err.field == "capacity" and err.value == 2400.0


def test_capacity_within_a_millionth_of_a_gib_of_a_valid_size_is_that_size():
    """Rounding noise under 1e-6 GiB is forgiven; 2e-6 GiB or a quarter GiB off is not."""
    entry = tier("PERSISTENT_2-1000")
    check_capacity(entry, 2400.0 + 5e-7)
    check_capacity(entry, 4800.0 - 5e-7)
    for capacity in (2400.0 + 2e-6, 4800.25, 1200.5):
        assert refusal(check_capacity, entry, capacity).value == capacity


TIERS = [t for t in CATALOG.list("storage") if isinstance(t, Storage) and t.category == "tier"]


def minimum_and_step(entry: Storage) -> tuple[int, int]:
    assert entry.min_capacity_bytes and entry.capacity_increment_bytes  # every catalogued tier has both
    return round(entry.min_capacity_bytes.value / GIB), round(entry.capacity_increment_bytes.value / GIB)


@PROPERTY
@given(entry=st.sampled_from(TIERS), steps=st.integers(1, 500))
def test_every_multiple_of_the_increment_is_accepted(entry, steps):
    """Any whole number of increments at or above the minimum is a valid capacity on every tier."""
    low, step = minimum_and_step(entry)
    capacity = float(max(steps * step, math.ceil(low / step) * step))
    check_capacity(entry, capacity)
    fs = file_system(CATALOG, entry.id, f"{capacity:.0f}GiB")
    assert fs.capacity_gib == capacity and fs.tier is entry


@PROPERTY
@given(entry=st.sampled_from(TIERS), capacity=st.floats(1, 500_000, allow_nan=False))
def test_every_other_capacity_is_refused_between_two_valid_sizes(entry, capacity):
    """A capacity at or above the minimum that is not the minimum, twice it or a multiple of the increment
    is refused, naming two sizes the tier accepts: one at or below it, one above it."""
    low, step = minimum_and_step(entry)
    near = round(capacity)
    valid = abs(capacity - near) < 1e-6 and (near in (low, 2 * low) or near % step == 0)
    if capacity < low or valid:
        return
    err = refusal(check_capacity, entry, capacity)
    assert err.field == "capacity" and err.value == capacity
    found = re.search(r"nearest valid: ([\d,]+) GiB or ([\d,]+) GiB$", str(err))
    assert found, str(err)
    below, above = (float(group.replace(",", "")) for group in found.groups())
    assert below <= capacity < above and above - below <= step
    check_capacity(entry, below)
    check_capacity(entry, above)


def test_a_tier_without_capacity_rules_takes_1200_gib_steps(overlay_catalog):
    """A user tier with no minimum or increment: AWS's SSD minimum of 1,200 GiB, in steps of it."""
    entry = tier_by_name(overlay_catalog, "lab-lustre-tier")
    assert entry.min_capacity_bytes is None and entry.capacity_increment_bytes is None
    for capacity in (1200.0, 2400.0, 3600.0, 6000.0):
        check_capacity(entry, capacity)
    err = refusal(check_capacity, entry, 600.0)
    assert str(err) == "capacity 600 GiB is below the Lab Lustre tier minimum of 1,200 GiB"
    err = refusal(check_capacity, entry, 4000.0)
    # 4,000 / 1,200 = 3.33: 3,600 and 4,800 either side.
    assert str(err) == (
        "capacity 4,000.00 GiB is off the Lab Lustre tier sizes (1,200 GiB, 2,400 GiB, then multiples of "
        "1,200 GiB); nearest valid: 3,600 GiB or 4,800 GiB"
    )


def test_a_tier_is_built_against_its_own_service(overlay_catalog):
    """A tier of a user's service gets that service (its client ceilings), not FSx for Lustre's."""
    fs = file_system(overlay_catalog, "lab-lustre-tier", "2400GiB")
    assert fs.service.id == "lab-lustre" and fs.tier.id == "lab-lustre-tier"
    assert fs.client_bytes_per_s(ClientPath.ENA, None) == 50e9 / 8


# --- EFA ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SCRATCH_2", "PERSISTENT_1-200", "PERSISTENT_1-12"])
def test_efa_on_a_tier_without_it_is_refused_naming_the_tier(name):
    """Only PERSISTENT_2 tiers can be created EFA-enabled; the error names the tier by id."""
    entry = tier(name)
    err = refusal(check_efa, entry, 2400.0)
    assert str(err) == f"efa: {entry.name} cannot be created EFA-enabled (only PERSISTENT_2 SSD tiers can)"
    assert err.field == "efa" and err.value == entry.id


@pytest.mark.parametrize(
    ("name", "label"), [("p2-1000-no-efa", "PERSISTENT_2 1000 without EFA"), ("lab-lustre-tier", "Lab Lustre tier")]
)
def test_efa_is_refused_where_the_catalog_does_not_say_the_tier_has_it(overlay_catalog, name, label):
    """A user tier marked not EFA-capable (though it keeps a storage per file server), or one that says
    nothing of EFA, is refused as not EFA-capable."""
    entry = tier_by_name(overlay_catalog, name)
    err = refusal(check_efa, entry, 9600.0)
    assert str(err) == f"efa: {label} cannot be created EFA-enabled (only PERSISTENT_2 SSD tiers can)"
    assert err.field == "efa" and err.value == name
    err = refusal(parse_storage, overlay_catalog, f"fsx:{name}:9600GiB:efa")
    assert err.field == "efa"


@pytest.mark.parametrize(
    ("name", "capacity", "nearest"),
    [
        # 4,800 GiB per server: 10,000 / 4,800 = 2.08 servers, so 2 x 4,800 and 3 x 4,800.
        ("PERSISTENT_2-1000", 10000.0, "9,600 GiB or 14,400 GiB"),
        # 9,600 GiB per server: 40,800 / 9,600 = 4.25 servers, so 38,400 and 48,000.
        ("PERSISTENT_2-500", 40800.0, "38,400 GiB or 48,000 GiB"),
        # Below one server of 38,400 GiB, the nearest valid is one server.
        ("PERSISTENT_2-125", 2400.0, "38,400 GiB"),
    ],
)
def test_efa_capacity_off_whole_file_servers_names_the_nearest(name, capacity, nearest):
    """An EFA-enabled capacity that is not whole file servers names the server size and the nearest valid."""
    entry = tier(name)
    assert entry.efa_storage_per_server_bytes
    per_server = entry.efa_storage_per_server_bytes.value / GIB
    err = refusal(check_efa, entry, capacity)
    assert str(err) == (
        f"capacity {capacity:,.0f} GiB: an EFA-enabled {entry.name} file system grows in whole file servers of "
        f"{per_server:,.0f} GiB; nearest valid: {nearest}"
    )
    assert err.field == "capacity" and err.value == capacity


def test_efa_capacity_takes_the_same_rounding_either_side_of_whole_servers():
    """Whole file servers (38,400 GiB each) within a billionth of a server either side (3.84e-5 GiB) are whole;
    a thousandth of a GiB off either way is refused."""
    entry = tier("PERSISTENT_2-125")
    for capacity in (38400.0, 38400.0 - 1e-5, 38400.0 + 1e-5, 76800.0 - 3e-5, 76800.0 + 3e-5):
        check_efa(entry, capacity)
    for capacity in (38400.0 - 1e-3, 38400.0 + 1e-3, 76800.0 - 1e-3):
        assert refusal(check_efa, entry, capacity).value == capacity


# --- metadata IOPS --------------------------------------------------------------------------------

# PERSISTENT_2 SSD: 1,500, 3,000, 6,000, 12,000, then multiples of 12,000 up to 192,000.
P2_IOPS = [1500, 3000, 6000, 12000, *range(24000, 192001, 12000)]


def test_metadata_iops_off_the_options_lists_every_option():
    """An IOPS figure a PERSISTENT_2 tier does not offer is refused, listing all 19 it does."""
    entry = tier("PERSISTENT_2-1000")
    for iops in P2_IOPS:
        check_metadata_iops(entry, float(iops))
    err = refusal(check_metadata_iops, entry, 2000.0)
    listed = ", ".join(str(v) for v in P2_IOPS)
    assert (
        len(P2_IOPS) == 19 and listed.startswith("1500, 3000, 6000, 12000, 24000, 36000") and "180000, 192000" in listed
    )
    assert str(err) == f"metadata IOPS 2000 is not offered on {entry.name} (valid: {listed})"
    assert err.field == "metadata_iops" and err.value == 2000.0


@pytest.mark.parametrize("name", ["SCRATCH_2", "PERSISTENT_1-50"])
def test_metadata_iops_on_a_tier_without_metadata_configuration_is_refused(name):
    """Tiers with no metadata configuration offer no IOPS: the message says so."""
    entry = tier(name)
    err = refusal(check_metadata_iops, entry, 1500.0)
    assert str(err) == f"metadata IOPS 1500 is not offered on {entry.name} (valid: none (no metadata configuration))"
    assert err.field == "metadata_iops" and err.value == 1500.0
    assert refusal(parse_storage, CATALOG, f"fsx:{name}:2400GiB:mdiops=1500").field == "metadata_iops"


# --- storage specs --------------------------------------------------------------------------------

USAGE = "expected fsx:TIER:CAPACITY[:efa][:mdiops=N], e.g. fsx:PERSISTENT_2-1000:100800GiB:efa"


@pytest.mark.parametrize(
    "spec",
    ["efs:1200GiB", "fsx:PERSISTENT_2-1000", "nfs:PERSISTENT_2-1000:1200GiB", "nfs:PERSISTENT_2-1000:1200GiB:efa",
     "fsx:PERSISTENT_2-1000:4800GiB:efa:mdiops=6000:x"],
)  # fmt: skip
def test_a_spec_not_shaped_fsx_tier_capacity_is_refused_with_the_usage(spec):
    """Other services, too few parts or more than five are refused with the expected form and an example."""
    err = refusal(parse_storage, CATALOG, spec)
    assert str(err) == f"storage {spec!r}: {USAGE}"
    assert err.field == "storage" and err.value == spec


def test_a_spec_takes_efa_and_mdiops_in_any_case_and_order():
    """FSX, EFA and MDIOPS are read case-insensitively and the extras in either order."""
    fs = parse_storage(CATALOG, "FSX:PERSISTENT_2-1000:9600GiB:MDIOPS=24000:EFA")
    assert fs.efa and fs.provisioned_metadata_iops == 24000 and fs.capacity_gib == 9600


def test_mdiops_that_is_not_a_number_is_refused():
    """mdiops= must be followed by a number: the message quotes the spec and the part."""
    spec = "fsx:PERSISTENT_2-1000:4800GiB:mdiops=fast"
    err = refusal(parse_storage, CATALOG, spec)
    assert str(err) == f"storage {spec!r}: 'mdiops=fast' is not mdiops=NUMBER (e.g. mdiops=6000)"
    assert err.field == "storage" and err.value == spec


@pytest.mark.parametrize(
    ("spec", "part"),
    [("fsx:PERSISTENT_2-1000:4800GiB:fast", "fast"), ("fsx:PERSISTENT_2-1000:4800GiB:efa:efa", "efa"),
     ("fsx:PERSISTENT_2-1000:4800GiB:mdiops=1500:mdiops=3000", "mdiops=3000")],
)  # fmt: skip
def test_an_unknown_or_repeated_part_is_refused_with_the_usage(spec, part):
    """A part other than efa or mdiops=N, or one of them twice, is refused naming it, with the usage."""
    err = refusal(parse_storage, CATALOG, spec)
    assert str(err) == f"storage {spec!r}: unknown or repeated part {part!r}; {USAGE}"
    assert err.field == "storage" and err.value == spec


# --- client paths ---------------------------------------------------------------------------------


def test_gds_refused_on_trainium_names_the_chip_and_the_gpu_families():
    """GDS on Trainium, instance unknown: the message says 'this instance' and lists where GDS runs."""
    trn1 = CATALOG.instance("trn1.32xlarge")
    chip = CATALOG.accelerator(trn1.accelerator)
    assert path_refusal(ClientPath.EFA_GDS, chip, None) == (
        "path 'efa-gds': GPUDirect Storage moves data into GPU memory, and this instance has trainium1 (trainium) "
        "accelerators, not GPUs (GDS runs on ampere, hopper, blackwell); use efa or ena"
    )
    assert path_refusal(ClientPath.EFA, chip, trn1) is None and path_refusal(ClientPath.ENA, chip, None) is None


def test_client_path_refusal_names_the_path_asked_for():
    """A path the instance cannot take is refused with field 'path' and the path's value."""
    trn1 = CATALOG.instance("trn1.32xlarge")
    chip = CATALOG.accelerator(trn1.accelerator)
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "4800GiB", efa=True)
    err = refusal(client_path_for, fs, ClientPath.EFA_GDS, chip, trn1)
    assert err.field == "path" and err.value == "efa-gds"
    assert "trn1.32xlarge has trainium1 (trainium) accelerators, not GPUs" in str(err)
