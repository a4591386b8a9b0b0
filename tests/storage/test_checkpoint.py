"""Checkpoint size and save/load time: each bound binding on a hand-derived case, modes, striping."""

import itertools
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
    plan_checkpoint,
    striping_sweep,
)
from clustersim.storage.dataload import bytes_per_token, data_loading
from clustersim.storage.fsx import ClientPath, file_system
from clustersim.system import device_host_copy_bytes_per_s
from clustersim.workload import zoo

CATALOG = load_catalog(use_env=False)
P5 = CATALOG.instance("p5.48xlarge")
NVME = CATALOG.get("instance-nvme")
MODEL = zoo.load_model("llama3.1-405b", use_env=False)
PARAMS = 405_853_388_800
BIG = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB")  # not EFA-enabled: 84 targets, ENA
BIG_EFA = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB", efa=True)  # 21 servers of 4,800 GiB
SMALL_MODEL = zoo.load_model("llama3-70b", use_env=False)
SMALL_PARAMS = SMALL_MODEL.num_params()


H100_COPY = device_host_copy_bytes_per_s(CATALOG, CATALOG.accelerator("h100-sxm"))


def plan(fs=BIG, nodes=2048, **kw):
    kw.setdefault("host_copy_bytes_per_s", H100_COPY)
    return plan_checkpoint(MODEL, fs, instance=P5, num_nodes=nodes, devices_per_node=8, nvme=NVME, **kw)


def test_size_per_format_uses_exact_parameters():
    assert MODEL.num_params() == PARAMS
    assert checkpoint_bytes(MODEL) == PARAMS * 14  # bf16 weights + fp32 master, momentum, variance
    assert checkpoint_bytes(MODEL, CheckpointFormat.TORCH_DCP) == PARAMS * 12
    assert checkpoint_bytes(MODEL, CheckpointFormat.WEIGHTS) == PARAMS * 2


def test_file_system_bound_binds_a_large_job():
    timing = plan(fs=BIG_EFA)
    assert timing.save.bound == "file system"
    assert timing.save.time_s == pytest.approx(PARAMS * 14 / 100.8e9)  # 56.4 s
    assert timing.num_files == 2048 * 8 and timing.path is ClientPath.EFA_GDS
    assert plan().path is ClientPath.ENA and plan().save.time_s == timing.save.time_s
    assert timing.stall_s == timing.save.time_s and timing.drain_s == 0


def test_stripes_bound_binds_one_file_on_one_stripe():
    timing = plan_checkpoint(SMALL_MODEL, BIG, instance=P5, num_nodes=16, devices_per_node=8,
                             pattern=WritePattern.AGGREGATED, stripes=1)  # fmt: skip
    assert timing.save.bound == "stripes" and timing.num_files == 1
    assert timing.save.time_s == pytest.approx(SMALL_PARAMS * 14 / (5e9 / 8))  # one ENA connection, 5 Gbps
    efa = plan_checkpoint(SMALL_MODEL, BIG_EFA, instance=P5, num_nodes=16, devices_per_node=8,
                          pattern=WritePattern.AGGREGATED, stripes=1)  # fmt: skip
    assert efa.save.bound == "stripes" and efa.save.time_s == pytest.approx(SMALL_PARAMS * 14 / 4.8e9)  # one target


def test_clients_bound_binds_one_ena_client():
    timing = plan_checkpoint(SMALL_MODEL, BIG, instance=P5, num_nodes=16, devices_per_node=8,
                             pattern=WritePattern.AGGREGATED, stripes=84, path=ClientPath.ENA)  # fmt: skip
    # 84 stripes x 5 Gbps = 52.5 GB/s of connections; the one ENA client carries 12.5 GB/s.
    assert timing.save.bound == "clients"
    assert timing.save.time_s == pytest.approx(SMALL_PARAMS * 14 / 12.5e9)


def test_aggregating_more_than_one_host_holds_is_refused():
    with pytest.raises(ClusterSimError, match="write a file per rank") as err:
        plan(pattern=WritePattern.AGGREGATED)
    assert err.value.field == "pattern"


def test_load_reads_from_every_node():
    small = file_system(CATALOG, "SCRATCH_2", "2400GiB")  # no EFA: ENA by default
    timing = plan(fs=small, nodes=1)
    assert timing.path is ClientPath.ENA
    assert timing.save.time_s == pytest.approx(PARAMS * 14 / 240e6)  # disk write 100 MB/s/TiB
    assert timing.load.time_s == pytest.approx(PARAMS * 14 / 480e6)  # disk read 200 MB/s/TiB


def test_async_stalls_for_the_host_copy_and_a_slow_drain():
    timing = plan(mode=SaveMode.ASYNC)
    assert timing.bound == "host copy"
    assert timing.stall_s == pytest.approx(PARAMS * 14 / (2048 * 8) / (63e9 * 0.88))  # PCIe Gen5 x16 as copies reach it
    assert timing.drain_s == timing.save.time_s
    assert timing.stall_at(3600) == timing.stall_s
    assert timing.stall_at(10) == pytest.approx(timing.stall_s + timing.save.time_s - 10)


def test_async_copies_over_each_devices_own_host_link():
    gb200 = device_host_copy_bytes_per_s(CATALOG, CATALOG.accelerator("gb200"))
    a100 = device_host_copy_bytes_per_s(CATALOG, CATALOG.accelerator("a100-sxm4-80gb"))
    assert gb200 == pytest.approx(225e9 * 0.88) and a100 == pytest.approx(31.5e9 * 0.88)
    fast, slow = (
        plan(mode=SaveMode.ASYNC, host_copy_bytes_per_s=gb200),
        plan(mode=SaveMode.ASYNC, host_copy_bytes_per_s=a100),
    )
    assert slow.stall_s / fast.stall_s == pytest.approx(225 / 31.5)


def test_async_without_a_recorded_host_link_is_refused():
    assert device_host_copy_bytes_per_s(CATALOG, CATALOG.accelerator("trainium2")) is None
    with pytest.raises(ClusterSimError, match=r"mode async: no host link is recorded for trainium2"):
        plan(mode=SaveMode.ASYNC, host_copy_bytes_per_s=None, accelerator=CATALOG.accelerator("trainium2"))
    assert plan(host_copy_bytes_per_s=None).stall_s > 0  # a synchronous save needs no host link


def test_nvme_stalls_for_the_local_write():
    timing = plan(nodes=128, mode=SaveMode.NVME)
    assert timing.bound == "local NVMe"
    assert timing.stall_s == pytest.approx(PARAMS * 14 / (128 * 8 * 3.5e9))
    assert timing.drain_s == timing.save.time_s


def test_async_host_copy_that_does_not_fit_is_refused():
    with pytest.raises(ClusterSimError, match=r"host memory of p5\.48xlarge"):
        plan(nodes=2, mode=SaveMode.ASYNC)


def test_stripes_above_targets_refused():
    with pytest.raises(ClusterSimError, match="85 is not between 1 and the 84"):
        plan(stripes=85)


def test_striping_rises_by_one_target_until_the_client_stops_it():
    sweep = striping_sweep(BIG_EFA, 100e9, ClientPath.EFA, P5)
    rates = [t.bytes_per_s for t in sweep]
    client = 700e9 / 8
    knee = math.ceil(client / 4.8e9)  # an EFA-enabled target: 4,800 GiB x 1,000 MB/s/TiB
    assert len(sweep) == 21 and knee == 19
    for count, t in enumerate(sweep, start=1):
        if count < knee:
            assert t.bound == "stripes" and t.bytes_per_s == pytest.approx(count * 4.8e9)
        else:
            assert t.bound == "clients" and t.bytes_per_s == pytest.approx(client)
    assert all(b >= a for a, b in itertools.pairwise(rates))


@settings(max_examples=20, deadline=None)
@given(stripes=st.integers(1, 83), nodes=st.sampled_from([1, 4, 64, 2048]))
def test_more_stripes_are_never_slower(stripes, nodes):
    fewer = plan(nodes=nodes, stripes=stripes)
    more = plan(nodes=nodes, stripes=stripes + 1)
    assert more.save.time_s <= fewer.save.time_s * (1 + 1e-12)


@settings(max_examples=20, deadline=None)
@given(steps=st.integers(1, 100))
def test_more_capacity_never_saves_slower(steps):
    small = file_system(CATALOG, "PERSISTENT_2-250", f"{2400 * steps}GiB")
    large = file_system(CATALOG, "PERSISTENT_2-250", f"{2400 * (steps + 1)}GiB")
    assert plan(fs=large, nodes=64).save.time_s <= plan(fs=small, nodes=64).save.time_s


def test_data_loading_need_against_supply():
    assert bytes_per_token(32_000) == 2 and bytes_per_token(MODEL.vocab) == 4
    loading = data_loading(BIG_EFA, tokens_per_s=2e6, token_bytes=4, num_nodes=2048, path=ClientPath.EFA, instance=P5)
    assert loading.need_bytes_per_s == 8e6
    assert loading.supply.bound == "file system" and loading.headroom == pytest.approx(100.8e9 / 8e6)


def test_burst_write_while_credits_last():
    slow = file_system(CATALOG, "PERSISTENT_2-125", "100800GiB")  # disk 125 baseline, 500 burst MB/s/TiB
    timing = plan(fs=slow)
    assert timing.save.time_s == pytest.approx(PARAMS * 14 / (125e6 * 100.8))
    assert timing.save_at_burst.time_s == pytest.approx(PARAMS * 14 / (500e6 * 100.8))
    assert timing.save_at_burst.bound == "file system"
    fastest = plan()  # PERSISTENT_2-1000 publishes no burst
    assert fastest.save_at_burst.time_s == fastest.save.time_s
