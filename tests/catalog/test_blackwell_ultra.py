"""Blackwell Ultra (B300 on p6-b300.48xlarge and HGX B300; GB300 in GB300 NVL72): each figure against its published
relation to Blackwell, and the model running on it end to end."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.catalog.kinds import Dtype, Kind
from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.execution import Layout
from clustersim.ingest.cases import accelerator_from_name
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.system import system_for_accelerator, system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

GIB = 2**30


@pytest.fixture(scope="module")
def catalog():
    return load_catalog()


def test_blackwell_ultra_keeps_blackwells_bf16_and_fp8_and_raises_fp4_and_memory(catalog):
    b200, b300 = catalog.accelerator("b200"), catalog.accelerator("b300")
    gb200, gb300 = catalog.accelerator("gb200"), catalog.accelerator("gb300")
    for old, new in ((b200, b300), (gb200, gb300)):
        assert new.family == old.family == "blackwell"
        for dtype in (Dtype.BF16, Dtype.FP8):
            assert new.dense_peak_flop_per_s(dtype) == old.dense_peak_flop_per_s(dtype)
        assert new.memory_bytes.value == 268 * GIB > old.memory_bytes.value  # 288 GB of 12-high HBM3e
        assert new.scaleup_bandwidth_bidirectional_bytes_per_s.value == 1.8e12
    # FP4: HGX B300 105 PF dense per 8 GPUs, GB300 NVL72 1,080 PF per 72
    assert b300.dense_peak_flop_per_s(Dtype.FP4) == pytest.approx(105e15 / 8)
    assert gb300.dense_peak_flop_per_s(Dtype.FP4) == pytest.approx(1080e15 / 72)
    assert gb300.tdp_watts.value == 1400 > gb200.tdp_watts.value
    # every sparse figure is twice the dense one where both are quoted (FP4's 144 | 105 excepted)
    for dtype, sparse in b300.sparse_flop_per_s.items():
        if dtype is not Dtype.FP4:
            assert sparse.value == pytest.approx(2 * b300.dense_peak_flop_per_s(dtype))


def test_cuda_and_vendor_names_find_blackwell_ultra(catalog):
    assert accelerator_from_name(catalog, "NVIDIA B300 SXM6 AC") == "b300"  # nvidia-smi on p6-b300
    assert accelerator_from_name(catalog, "NVIDIA GB300") == "gb300"
    assert catalog.get("HGX B300 NVL16", Kind.DOMAIN).id == "hgx-b300-8"


def test_p6_b300_is_eight_b300_with_800_gbps_of_efa_per_gpu(catalog):
    node = catalog.instance("p6-b300")
    assert node.id == "p6-b300.48xlarge" and node.accelerator == "b300" and node.num_accelerators.value == 8
    assert node.network.total_bandwidth_bits_per_s.value == 6.4e12 == 16 * node.network.card_bandwidth_bits_per_s.value
    b200 = catalog.instance("p6-b200.48xlarge")
    assert node.network.total_bandwidth_bits_per_s.value == 2 * b200.network.total_bandwidth_bits_per_s.value
    assert node.on_demand.usd_per_hour == pytest.approx(142.416) and node.on_demand.usd_per_hour / 8 == pytest.approx(
        17.802, abs=1e-3
    )
    assert node.capacity_block.usd_per_hour == pytest.approx(112.32)
    system = system_for_instance(catalog, "p6-b300.48xlarge", 4)
    assert system.topology.devices_per_node == 8 and system.topology.scaleup_devices == 8
    assert system.topology.network_bytes_per_s == pytest.approx(6.4e12 / 8)


def test_a_gb300_tray_sits_in_a_72_gpu_nvlink_domain(catalog):
    system = system_for_accelerator(catalog, "gb300", devices=256, devices_per_node=4, network_bits_per_s=3.2e12)
    assert system.topology.scaleup_devices == 72
    domain = catalog.get("gb300-nvl72", Kind.DOMAIN)
    assert domain.dense_flop_per_s[Dtype.FP4].value == pytest.approx(72 * 15e15)
    assert domain.memory_bytes.value == 72 * 268 * GIB


def test_the_extra_memory_holds_more_kv_and_the_same_peaks_train_alike(catalog):
    model = load_model("llama3.1-70b")
    request = Request(input_tokens=2048, output_tokens=512, precision=Dtype.FP8)
    names = ("p6-b200.48xlarge", "p6-b300.48xlarge")
    systems = {name: serving_system_for_instance(catalog, name, tp=8) for name in names}
    kv = {name: estimate_offline(model, s, request).kv_capacity_tokens_per_device for name, s in systems.items()}
    # the same weights in more HBM: the KV room grows by the memory added (268 vs 180 GiB a GPU, 8.5 GiB of weights)
    assert kv["p6-b300.48xlarge"] / kv["p6-b200.48xlarge"] == pytest.approx((268 - 8.5) / (180 - 8.5), rel=0.05)
    layout, job = Layout(tp=4, dp=16, zero=1, sequence_parallel=True), TrainingJob(global_batch=256, seq_len=8192)
    steps = {
        name: estimate_training(model, system_for_instance(catalog, name, 8), layout, job).step_s
        for name in ("p6-b200.48xlarge", "p6-b300.48xlarge")
    }
    # BF16 peaks and HBM bandwidth within 4% of each other: a training step within 5%, not faster by FP4's 1.46x
    assert steps["p6-b300.48xlarge"] == pytest.approx(steps["p6-b200.48xlarge"], rel=0.05)


def test_twice_the_efa_per_gpu_carries_a_large_all_reduce_across_nodes_about_twice_as_fast():
    busbw = {}
    for name in ("p6-b200.48xlarge", "p6-b300.48xlarge"):
        args = ["collective", "all_reduce", "--instance", name, "--nodes", "4", "--min", "8G", "--max", "8G", "--json"]
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)["rows"]
        assert row["bound"].startswith("network")  # 8 GiB over 4 nodes: the EFA, not NVLink, sets the pace
        busbw[name] = row["busbw_GBps"]
    assert 1.6 < busbw["p6-b300.48xlarge"] / busbw["p6-b200.48xlarge"] <= 2.0 + 1e-9
