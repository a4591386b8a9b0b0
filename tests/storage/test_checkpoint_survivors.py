"""Checkpoints at their edges: each refusal with its field, value and figures; sizes exactly at a limit;
what ``instance`` changes (its NICs cap the clients bound, its memory and drives the checks); writes
against reads and baseline against burst in every bound; the credit bucket only where the file system
bursts; idle time between saves; and the striping sweep stripe by stripe."""

import dataclasses
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.storage.checkpoint import (
    CheckpointFormat,
    SaveMode,
    WritePattern,
    checkpoint_bytes,
    file_rate,
    fsx_transfer,
    nvme_bytes_per_s,
    plan_checkpoint,
    striping_sweep,
)
from clustersim.storage.fsx import ClientPath, default_layout, file_system
from clustersim.storage.layouts import Extent
from clustersim.system import device_host_copy_bytes_per_s
from clustersim.workload import zoo
from clustersim.workload.transformer import Quantization

CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")  # 8 x H100 80 GiB, 2 TiB host, 8 x 3.84 TB NVMe, 3,200 Gbps of NICs
P4D = CATALOG.instance("p4d.24xlarge")  # 400 Gbps of NICs: under the 700 Gbps EFA and 1,200 Gbps GDS ceilings
B300 = CATALOG.instance("p6-b300.48xlarge")  # no local NVMe in the catalog
TETON = CATALOG.instance("grand-teton-h100-96gb")  # no host memory in the catalog
H100 = CATALOG.accelerator("h100-sxm")
NVME = CATALOG.get("instance-nvme")  # a drive writes 3.5 GB/s and reads 6.8 GB/s
H100_COPY = device_host_copy_bytes_per_s(CATALOG, H100)  # PCIe Gen5 x16 as copies reach it: 63 GB/s x 0.88

MODEL = zoo.load_model("llama3.1-405b", use_env=False)  # 405,853,388,800 parameters
SIZE = MODEL.num_params() * 14.0  # megatron: 5,681,947,443,200 bytes
M70 = zoo.load_model("llama3-70b", use_env=False)
SIZE70 = M70.num_params() * 14.0  # 987,751,890,944 bytes

BIG = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB")  # 84 targets of 1.2 GB/s; ENA only
BIG_EFA = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB", efa=True)  # 21 servers of 4.8 GB/s
SLOW = file_system(CATALOG, "PERSISTENT_2-125", "100800GiB")  # 12.6 GB/s baseline, 50.4 GB/s burst (disk)
SCRATCH = file_system(CATALOG, "SCRATCH_2", "24000GiB")  # 20 targets; disk writes 2.4 GB/s, reads 4.8 GB/s

ENA_CONNECTION = 5e9 / 8  # one ENA client-to-server connection: what an ENA stripe carries at most
ENA_CLIENT = 100e9 / 8
EXAMPLES = settings(max_examples=50, deadline=None, derandomize=True)


def figure(entry, name: str, value: float):
    """``entry`` with its figure ``name`` set to ``value`` (a catalog overlay in miniature)."""
    return entry.model_copy(update={name: getattr(entry, name).model_copy(update={"value": value})})


def plan(model=MODEL, fs=BIG_EFA, *, instance=P5, nodes=1, **kw):
    return plan_checkpoint(model, fs, instance=instance, num_nodes=nodes, devices_per_node=8, **kw)


# --- refusals ---------------------------------------------------------------------------------------------


def test_nodes_or_devices_below_one_are_refused_each_on_its_own():
    """Either count below 1 is refused naming that count, its field and its value; one device per node is
    enough."""
    with pytest.raises(ClusterSimError, match=r"^nodes: must be at least 1, got 0$") as err:
        plan_checkpoint(M70, BIG, instance=P5, num_nodes=0, devices_per_node=8)
    assert err.value.field == "nodes" and err.value.value == 0
    with pytest.raises(ClusterSimError, match=r"^devices_per_node: must be at least 1, got 0$") as err:
        plan_checkpoint(M70, BIG, instance=P5, num_nodes=2, devices_per_node=0)
    assert err.value.field == "devices_per_node" and err.value.value == 0
    one = plan_checkpoint(
        M70, BIG, instance=P5, num_nodes=2, devices_per_node=1, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY
    )
    assert one.num_files == 2
    assert one.host_copy_s == pytest.approx(SIZE70 / 2 / H100_COPY)  # two writers, one per node


def test_a_quantized_model_is_refused_naming_what_is_priced():
    """The refusal says a checkpoint is priced for 16-bit weights, and names the model."""
    model = M70.model_copy(update={"quantization": Quantization(method="gptq", bits=4, group_size=128)})
    with pytest.raises(ClusterSimError, match=r"checkpoint; a checkpoint is priced for 16-bit weights") as err:
        plan(model)
    assert err.value.field == "model" and err.value.value == model.name


def test_nodes_that_cannot_hold_the_checkpoint_are_refused_with_their_memory():
    """DeepSeek-V3: 671.0e9 params x 14 B = 8.54 TiB; a p5 holds 8 x 80 GiB + 2,048 GiB = 2.62 TiB, so 3
    hold 7.88 TiB and 4 are needed."""
    model = zoo.load_model("deepseek-v3", use_env=False)
    with pytest.raises(ClusterSimError) as err:
        plan(model, nodes=3, accelerator=H100)
    assert str(err.value) == (
        "nodes: 3 x p5.48xlarge hold 7.88 TiB (8 x 80 GiB device + 2,048 GiB host memory each), less than the "
        "8.54 TiB megatron checkpoint (14 B/param); use at least 4 nodes"
    )
    assert err.value.field == "nodes" and err.value.value == 3
    assert plan(model, nodes=4, accelerator=H100).checkpoint_bytes == checkpoint_bytes(model)


def test_a_checkpoint_exactly_filling_the_nodes_memory_is_accepted():
    """Boundary: device + host memory equal to the checkpoint holds it; one byte less does not."""
    host = P5.host_memory_bytes.value
    exact = figure(H100, "memory_bytes", (SIZE - host) / 8)  # 8 chips + 2 TiB = 5.68 TB exactly
    assert 8 * exact.memory_bytes.value + host == SIZE
    assert plan(accelerator=exact).checkpoint_bytes == SIZE
    short = figure(H100, "memory_bytes", (SIZE - host - 1) / 8)
    with pytest.raises(ClusterSimError, match=r"use at least 2 nodes") as err:
        plan(accelerator=short)
    assert err.value.field == "nodes" and err.value.value == 1


def test_an_instance_without_host_memory_holds_only_its_devices():
    """No host memory in the catalog counts as none: 8 x 96 GiB = 0.75 TiB holds the 405B weights (0.81 TB)
    but not its 5.17 TiB training checkpoint; device memory one byte short of the weights is refused."""
    acc = CATALOG.accelerator(TETON.accelerator)
    with pytest.raises(ClusterSimError, match=r"\(8 x 96 GiB device \+ 0 GiB host memory each\).*at least 7 nodes"):
        plan(instance=TETON, accelerator=acc)
    weights = checkpoint_bytes(MODEL, CheckpointFormat.WEIGHTS)
    assert plan(instance=TETON, accelerator=acc, fmt=CheckpointFormat.WEIGHTS).checkpoint_bytes == weights
    exact = figure(acc, "memory_bytes", weights / 8)
    assert plan(instance=TETON, accelerator=exact, fmt=CheckpointFormat.WEIGHTS).checkpoint_bytes == weights
    short = figure(acc, "memory_bytes", (weights - 1) / 8)
    with pytest.raises(ClusterSimError, match=r"use at least 2 nodes"):
        plan(instance=TETON, accelerator=short, fmt=CheckpointFormat.WEIGHTS)


def test_aggregating_more_than_one_host_holds_names_the_size_and_the_host():
    """5.68 TB gathered on one p5 of 2,048 GiB is refused, naming both and the instance."""
    with pytest.raises(ClusterSimError) as err:
        plan(pattern=WritePattern.AGGREGATED)
    assert str(err.value) == (
        "pattern aggregated: one instance gathers the whole 5,292 GiB checkpoint, more than the 2,048 GiB host "
        "memory of p5.48xlarge; write a file per rank"
    )  # 5.68e12 B / 2**30 = 5,292 GiB, in the host memory's unit
    assert err.value.field == "pattern" and err.value.value == "aggregated"


def test_aggregating_exactly_one_hosts_memory_is_accepted():
    """Boundary: a host memory equal to the checkpoint holds the gathered file."""
    roomy = figure(P5, "host_memory_bytes", SIZE)
    timing = plan(instance=roomy, pattern=WritePattern.AGGREGATED)
    assert timing.num_files == 1 and timing.checkpoint_bytes == SIZE


def test_nvme_drive_rates_read_and_write():
    """A p5's local NVMe: 8 drives x 3.5 GB/s writing, x 6.8 GB/s reading."""
    assert nvme_bytes_per_s(P5, NVME, write=True) == pytest.approx(8 * 3.5e9)
    assert nvme_bytes_per_s(P5, NVME, write=False) == pytest.approx(8 * 6.8e9)


def test_nvme_rate_of_an_instance_without_drives_or_a_drive_without_figures_is_refused():
    """No drives on the instance is refused naming the instance; a drive entry without the direction's figure
    is refused naming the drive entry and the missing figure."""
    with pytest.raises(ClusterSimError, match=r"^p6-b300\.48xlarge has no local NVMe in the catalog$") as err:
        nvme_bytes_per_s(B300, NVME, write=True)
    assert err.value.field == "instance" and err.value.value == "p6-b300.48xlarge"
    write_only = NVME.model_copy(update={"drive_read_bytes_per_s": None})
    assert nvme_bytes_per_s(P5, write_only, write=True) == pytest.approx(8 * 3.5e9)
    with pytest.raises(ClusterSimError) as err:
        nvme_bytes_per_s(P5, write_only, write=False)
    assert str(err.value) == (
        "local NVMe drive instance-nvme has no drive_read_bytes_per_s in the catalog, so its reads cannot be timed"
    )
    assert err.value.field == "nvme" and err.value.value == "instance-nvme"
    read_only = NVME.model_copy(update={"drive_write_bytes_per_s": None})
    with pytest.raises(ClusterSimError) as err:
        nvme_bytes_per_s(P5, read_only, write=True)
    assert str(err.value) == (
        "local NVMe drive instance-nvme has no drive_write_bytes_per_s in the catalog, so its writes cannot be timed"
    )


@pytest.mark.parametrize(
    ("instance", "drive", "message"),
    [(None, NVME, "mode nvme: a local NVMe checkpoint needs a catalogued instance with local NVMe"),
     (P5, None, "mode nvme: no local NVMe drive entry to time the write with (the catalog's storage of category "
      "'local', instance-nvme)")],
    ids=["no instance", "no drive"],
)  # fmt: skip
def test_nvme_mode_needs_both_an_instance_and_a_drive(instance, drive, message):
    """Mode nvme without the instance or without the drive entry is refused on field mode, saying which."""
    with pytest.raises(ClusterSimError) as err:
        plan(M70, instance=instance, mode=SaveMode.NVME, nvme=drive)
    assert str(err.value) == message
    assert err.value.field == "mode" and err.value.value == "nvme"


def test_nvme_mode_refuses_a_checkpoint_larger_than_the_drives():
    """No drives is 0 GB of room (no node count helps); DeepSeek-V3's 9,394.4 GB on one p4d exceeds its
    8 x 1 TB: ceil(9,394.4 / 8,000) = 2 nodes would hold it."""
    with pytest.raises(ClusterSimError) as err:
        plan(instance=B300, mode=SaveMode.NVME, nvme=NVME)
    assert str(err.value) == (
        "mode nvme: 5,681.9 GB per instance does not fit its 0.0 GB of NVMe; save to the file system (sync or async)"
    )
    assert err.value.field == "mode" and err.value.value == "nvme"
    model = zoo.load_model("deepseek-v3", use_env=False)
    with pytest.raises(ClusterSimError) as err:
        plan(model, instance=P4D, mode=SaveMode.NVME, nvme=NVME)
    assert str(err.value) == (
        "mode nvme: 9,394.4 GB per instance does not fit its 8,000.0 GB of NVMe; use at least 2 nodes or save to "
        "the file system (sync or async)"
    )
    assert err.value.field == "mode"
    assert plan(model, instance=P4D, nodes=2, mode=SaveMode.NVME, nvme=NVME).bound == "local NVMe"


def test_nvme_drives_exactly_the_checkpoints_size_hold_it():
    """Boundary: 8 drives of one eighth of the checkpoint hold it; the stall is the local write."""
    local = P5.local_nvme
    fitted = P5.model_copy(update={"local_nvme": figure(local, "drive_bytes", SIZE / 8)})
    timing = plan(instance=fitted, mode=SaveMode.NVME, nvme=NVME)
    assert timing.bound == "local NVMe"
    assert timing.stall_s == pytest.approx(SIZE / (8 * 3.5e9))  # 203 s


def test_async_host_copy_up_to_half_the_host_memory_is_accepted():
    """405B on 6 p5: 947 GB per node, under half of 2 TiB (1,100 GB) though over a third; exactly half is
    accepted too."""
    six = plan(nodes=6, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY)
    assert six.stall_s == pytest.approx(SIZE / 48 / H100_COPY)
    half = figure(P5, "host_memory_bytes", 2 * SIZE / 4)
    assert plan(instance=half, nodes=4, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY).bound == "host copy"


def test_async_host_copy_over_half_the_host_memory_names_both():
    """405B on 4 p5: 1,322.9 GiB per node against the 2,048 GiB host: refused on field mode."""
    with pytest.raises(ClusterSimError) as err:
        plan(nodes=4, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY)
    assert str(err.value) == (
        "mode async: a 1,322.9 GiB host copy per instance needs more than half of the 2,048 GiB host memory "
        "of p5.48xlarge; use more nodes or a synchronous save"
    )
    assert err.value.field == "mode" and err.value.value == "async"


def test_async_without_a_host_link_names_the_device_or_says_the_device():
    """No host copy rate: refused on field mode, naming the accelerator where one is given."""
    with pytest.raises(ClusterSimError, match=r"^mode async: no host link is recorded for the device, so") as err:
        plan(M70, mode=SaveMode.ASYNC)
    assert err.value.field == "mode" and err.value.value == "async"
    with pytest.raises(ClusterSimError, match=r"recorded for trainium2, so") as err:
        plan(M70, instance=CATALOG.instance("trn2.48xlarge"), mode=SaveMode.ASYNC,
             accelerator=CATALOG.accelerator("trainium2"))  # fmt: skip
    assert err.value.field == "mode"


# --- what a plan holds ------------------------------------------------------------------------------------


def test_a_synchronous_plan_has_no_local_write_and_no_host_copy():
    """Sync without a host link: no local transfer, a zero host copy, the stall is the save, and the
    save and load carry the checkpoint's bytes."""
    timing = plan(M70)
    assert timing.local is None and timing.host_copy_s == 0.0
    assert timing.stall_s == timing.save.time_s
    assert timing.save.num_bytes == timing.load.num_bytes == timing.save_at_burst.num_bytes == SIZE70


def test_an_aggregated_async_save_copies_through_one_device():
    """One rank gathers the whole 70B checkpoint (988 GB, under half the 2 TiB host): one writer's copy."""
    timing = plan(M70, nodes=2, pattern=WritePattern.AGGREGATED, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY)
    assert timing.stall_s == pytest.approx(SIZE70 / H100_COPY)  # 17.8 s
    assert timing.bound == "host copy"


def test_a_stripe_count_gives_one_extent_from_the_first_byte():
    """``stripes`` replaces the progressive layout with one extent over the whole file."""
    assert plan(M70, stripes=4).layout == (Extent(0.0, math.inf, 4),)
    assert plan(M70).layout == default_layout(BIG_EFA.service)


def test_without_gpudirect_rdma_the_default_path_is_plain_efa():
    """The instance decides the path: a p5 without GPUDirect RDMA gets EFA, and GDS is refused on path."""
    no_rdma = P5.model_copy(update={"network": figure(P5.network, "gpudirect_rdma", False)})
    assert plan(M70).path is ClientPath.EFA_GDS
    assert plan(M70, instance=no_rdma).path is ClientPath.EFA
    with pytest.raises(ClusterSimError, match="GPUDirect RDMA") as err:
        plan(M70, instance=no_rdma, path=ClientPath.EFA_GDS)
    assert err.value.field == "path" and err.value.value == "efa-gds"


def test_the_instances_nics_cap_save_burst_and_load_clients():
    """One p4d (400 Gbps = 50 GB/s of NICs) binds the save, the burst save and the load below the 100.8 GB/s
    file system; without an instance the client is GDS's 1,200 Gbps (150 GB/s) and the file system binds."""
    timing = plan(M70, instance=P4D)
    for move in (timing.save, timing.save_at_burst, timing.load):
        assert move.bound == "clients" and move.bytes_per_s == 50e9
        assert move.time_s == pytest.approx(SIZE70 / 50e9)  # 19.8 s
    free = plan(M70, instance=None)
    for move in (free.save, free.save_at_burst, free.load):
        assert move.bounds_bytes_per_s["clients"] == 150e9 and move.bound == "file system"


def test_without_an_instance_no_host_is_checked():
    """``instance=None``: no host memory to refuse an aggregated 5.68 TB file or an async copy against."""
    timing = plan(instance=None, pattern=WritePattern.AGGREGATED, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY)
    assert timing.stall_s == pytest.approx(SIZE / H100_COPY)


def test_load_reads_from_every_node_and_saves_write_at_the_write_rate():
    """SCRATCH_2, one file on one stripe: a target writes 100 MB/s/TiB x 1.2 = 120 MB/s and reads 240 MB/s;
    the aggregated save has one client, the load all four."""
    timing = plan(M70, SCRATCH, nodes=4, pattern=WritePattern.AGGREGATED, stripes=1)
    assert timing.save.bound == "stripes" and timing.save.bytes_per_s == pytest.approx(120e6)
    assert timing.save.time_s == pytest.approx(SIZE70 / 120e6)
    assert timing.load.bound == "stripes" and timing.load.bytes_per_s == pytest.approx(240e6)
    assert timing.save.bounds_bytes_per_s["clients"] == ENA_CLIENT
    assert timing.load.bounds_bytes_per_s["clients"] == 4 * ENA_CLIENT


def test_files_split_the_bytes_and_small_files_keep_one_stripe():
    """400 MB in 8 files of 50 MB: each inside the first 100 MiB extent, on one ENA connection: 8 x 625 MB/s."""
    move = fsx_transfer(BIG, 400e6, num_files=8, num_clients=1, layout=default_layout(BIG.service),
                        path=ClientPath.ENA, instance=P5, write=True)  # fmt: skip
    assert move.bound == "stripes" and move.bytes_per_s == pytest.approx(8 * ENA_CONNECTION)


def test_a_progressive_layouts_extents_each_run_at_their_stripes():
    """A 1 KB file runs at one stripe (the extents past its end add nothing); 1 GiB runs its first 100 MiB on
    one stripe and the rest on 8."""
    layout = default_layout(BIG.service)
    assert file_rate(BIG, 1e3, layout, ClientPath.ENA, write=True) == pytest.approx(ENA_CONNECTION, rel=1e-12)
    first, rest = 100 * 2**20, 2**30 - 100 * 2**20
    expected = 2**30 / (first / ENA_CONNECTION + rest / (8 * ENA_CONNECTION))
    assert file_rate(BIG, 2**30, layout, ClientPath.ENA, write=True) == pytest.approx(expected)


def test_metadata_bound_is_bytes_per_file_times_files_per_second():
    """16,384 small files on 1,500 metadata IOPS (PERSISTENT_2 at 1,200 GiB) take 16,384 / 1,500 = 10.9 s."""
    fs = file_system(CATALOG, "PERSISTENT_2-1000", "1200GiB")
    move = fsx_transfer(fs, 1e9, num_files=16384, num_clients=2048, layout=default_layout(fs.service),
                        path=ClientPath.ENA, instance=P5, write=True)  # fmt: skip
    assert move.bound == "metadata" and move.bytes_per_s == pytest.approx(1e9 / 16384 * 1500)
    assert move.time_s == pytest.approx(16384 / 1500)


# --- burst credits ----------------------------------------------------------------------------------------


def test_a_burst_save_runs_each_stripe_at_the_burst_share():
    """PERSISTENT_2-125, one file on one stripe: a target carries 125 MB/s/TiB x 1.2 = 150 MB/s at the
    baseline and 500 x 1.2 = 600 MB/s at the burst (both under one 625 MB/s ENA connection)."""
    timing = plan(M70, SLOW, pattern=WritePattern.AGGREGATED, stripes=1)
    assert timing.save.bound == timing.save_at_burst.bound == "stripes"
    assert timing.save.bytes_per_s == pytest.approx(150e6)
    assert timing.save_at_burst.bytes_per_s == pytest.approx(600e6)
    assert timing.bucket is not None
    assert timing.bucket.capacity_bytes == pytest.approx((50.4e9 - 12.6e9) * 1800)  # 30 minutes of the excess
    assert timing.bucket.burst_rate_bytes_per_s == pytest.approx(600e6)


def test_no_bucket_where_the_burst_buys_the_save_nothing():
    """One p5 on ENA (12.5 GB/s) binds the save at the baseline and at the burst alike: no bucket, and the
    save time at any interval is the baseline's."""
    timing = plan(M70, SLOW)
    assert timing.save.bound == timing.save_at_burst.bound == "clients"
    assert timing.save_at_burst.bytes_per_s == timing.save.bytes_per_s == ENA_CLIENT
    assert timing.bucket is None and timing.first_save is None and timing.save_at(600.0) is None
    assert timing.save_time_at(600.0) == timing.save.time_s


def test_no_bucket_without_a_credit_prior_in_the_catalog():
    """A service that records no burst_credit_s gives no bucket, though its tier bursts and the save gains."""
    service = SLOW.service.model_copy(update={"burst_credit_s": None})
    timing = plan(fs=dataclasses.replace(SLOW, service=service), nodes=2048)
    assert timing.save_at_burst.time_s < timing.save.time_s
    assert timing.bucket is None and timing.first_save is None


def test_a_burst_just_above_the_baseline_still_fills_a_bucket():
    """Boundary: a disk burst 0.5 B/s per TiB above the 125 MB/s baseline, on 1,200 GiB (x 1.2), bursts
    0.6 B/s above it: a bucket of 0.6 x 1,800 s."""
    base = file_system(CATALOG, "PERSISTENT_2-125", "1200GiB")
    tier = figure(base.tier, "disk_burst_write_bytes_per_s_per_tib", 125e6 + 0.5)
    timing = plan(M70, dataclasses.replace(base, tier=tier))
    assert timing.save.bound == "file system" and timing.save.bytes_per_s == pytest.approx(150e6)
    assert timing.bucket is not None
    assert timing.bucket.capacity_bytes == pytest.approx(0.6 * 1800, rel=1e-6)


# --- idle time between saves ------------------------------------------------------------------------------


@EXAMPLES
@given(interval=st.floats(0.0, 1e5))
def test_idle_between_saves(interval):
    """Sync: the interval. Async and nvme: the interval plus the stall less the drain, never below 0."""
    sync = plan(nodes=2048)
    assert sync.idle_s_at(interval) == interval
    for timing in (
        plan(nodes=2048, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY),
        plan(nodes=128, mode=SaveMode.NVME, nvme=NVME),
    ):
        expected = max(0.0, interval + timing.stall_s - timing.save.time_s)
        assert timing.idle_s_at(interval) == pytest.approx(expected)


def test_idle_after_a_drain_at_hand_computed_intervals():
    """2,048 p5 async: the 56.4 s drain (5.68 TB at 100.8 GB/s) after a 6.3 ms host copy (5.68 TB over
    16,384 copies at 55.4 GB/s); a 10 s interval leaves no idle time, 600 s leave 543.6 s."""
    timing = plan(nodes=2048, mode=SaveMode.ASYNC, host_copy_bytes_per_s=H100_COPY)
    drain = SIZE / 100.8e9
    copy = SIZE / 16384 / H100_COPY
    assert timing.drain_s == pytest.approx(drain) and timing.stall_s == pytest.approx(copy)
    assert timing.idle_s_at(600.0) == pytest.approx(600.0 + copy - drain)
    assert timing.idle_s_at(10.0) == 0.0
    assert timing.stall_at(10.0) == pytest.approx(copy + drain - 10.0)


# --- the striping sweep -----------------------------------------------------------------------------------


def test_sweep_on_ena_rises_by_one_connection_until_the_client():
    """BIG over ENA: a stripe carries one 5 Gbps connection (625 MB/s, under the 1.2 GB/s target), so 20
    stripes reach the 12.5 GB/s client."""
    sweep = striping_sweep(BIG, 100e9, ClientPath.ENA, P5)
    assert len(sweep) == 84
    for count, step in enumerate(sweep, start=1):
        expected = min(count * ENA_CONNECTION, ENA_CLIENT)
        assert step.bytes_per_s == pytest.approx(expected)
        assert step.bound == ("stripes" if count < 20 else "clients")


def test_sweep_writes_by_default_and_reads_at_the_read_baseline():
    """SCRATCH_2: a target writes 120 MB/s and reads 240 MB/s; the file system bound is the write (2.4 GB/s)
    or read (4.8 GB/s) baseline; without ``write`` the sweep writes."""
    writes = striping_sweep(SCRATCH, 10e9, ClientPath.ENA, P5, write=True)
    reads = striping_sweep(SCRATCH, 10e9, ClientPath.ENA, P5, write=False)
    assert striping_sweep(SCRATCH, 10e9, ClientPath.ENA, P5) == writes
    for count, (w, r) in enumerate(zip(writes, reads, strict=True), start=1):
        assert w.bounds_bytes_per_s["file system"] == SCRATCH.write_bytes_per_s == 2.4e9
        assert r.bounds_bytes_per_s["file system"] == SCRATCH.read_bytes_per_s == 4.8e9
        assert w.bounds_bytes_per_s["stripes"] == pytest.approx(count * 120e6)
        assert r.bounds_bytes_per_s["stripes"] == pytest.approx(count * 240e6)
        assert set(w.bounds_bytes_per_s) == {"file system", "clients", "stripes"}


def test_sweep_stripes_at_the_baseline_share_of_a_bursting_tier():
    """PERSISTENT_2-125: the sweep's stripes carry the 150 MB/s baseline share, not the 600 MB/s burst."""
    sweep = striping_sweep(SLOW, 100e9, ClientPath.ENA, P5)
    assert sweep[0].bytes_per_s == pytest.approx(150e6) and sweep[0].bound == "stripes"
    assert sweep[9].bytes_per_s == pytest.approx(1.5e9)


def test_sweep_client_ceiling_is_the_instances_nics():
    """A p4d's 50 GB/s of NICs stop the EFA sweep at 11 stripes of 4.8 GB/s (the path's 87.5 GB/s would
    let it reach 19)."""
    sweep = striping_sweep(BIG_EFA, 100e9, ClientPath.EFA, P4D)
    knee = math.ceil(50e9 / 4.8e9)
    assert knee == 11
    assert [s.bound for s in sweep] == ["stripes"] * (knee - 1) + ["clients"] * (21 - knee + 1)
    assert sweep[-1].bytes_per_s == 50e9


def test_sweep_refuses_efa_on_a_file_system_without_it():
    """The sweep checks the path it is given: EFA on a file system not created EFA-enabled."""
    with pytest.raises(ClusterSimError, match="not EFA-enabled") as err:
        striping_sweep(BIG, 100e9, ClientPath.EFA, P5)
    assert err.value.field == "path" and err.value.value == "efa"


@EXAMPLES
@given(file_bytes=st.floats(1.0, 1e13), count=st.integers(1, 21))
def test_sweep_rate_does_not_depend_on_the_files_size(file_bytes, count):
    """Every byte of the file, from the first, is on ``count`` stripes: the rate is count x 4.8 GB/s (up to
    the client), whatever the size."""
    step = striping_sweep(BIG_EFA, file_bytes, ClientPath.EFA, P5)[count - 1]
    assert step.bounds_bytes_per_s["stripes"] == pytest.approx(count * 4.8e9, rel=1e-9)
    assert step.time_s == pytest.approx(file_bytes / min(count * 4.8e9, 700e9 / 8), rel=1e-9)
