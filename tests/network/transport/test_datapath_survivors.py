"""Tests that kill what mutation testing of ``datapath`` left alive (benchmarks/mutation.py).

``load_constants`` is cached, so only the first test to call it reached it: here it is read afresh and
checked against the TOML it comes from."""

import tomllib
from importlib import resources

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.transport import datapath
from clustersim.network.transport.datapath import (
    CONSTANTS_FILE,
    DataPath,
    PathKind,
    Step,
    build_path,
    instance_paths,
    load_constants,
)


def test_a_fresh_read_of_the_constants_keeps_name_value_kind_and_source():
    load_constants.cache_clear()
    constants = load_constants()
    text = resources.files(datapath.__package__).joinpath(CONSTANTS_FILE).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    assert list(constants) == list(raw) and len(raw) >= 15
    for name, entry in raw.items():
        constant = constants[name]
        assert constant.name == name and constant.value == pytest.approx(float(entry["value"]), rel=1e-15)
        assert (constant.kind, constant.source) == (entry["kind"], entry["source"])
        assert isinstance(constant.value, float)
    assert constants["syscall_s"].value == 0.5e-6 and constants["kernel_copy_bytes_per_s"].value == 10.0e9


CATALOG = load_catalog(use_env=False)
C = {name: constant.value for name, constant in load_constants().items()}


def _without_gpudirect(instance_id: str):
    instance = CATALOG.instance(instance_id)
    network = instance.network
    flag = network.gpudirect_rdma.model_copy(update={"value": False})
    return instance.model_copy(update={"network": network.model_copy(update={"gpudirect_rdma": flag})})


def test_instance_paths_stage_through_the_hosts_pcie_and_add_nccl_only_when_asked():
    p4d, p5 = (instance_paths(CATALOG.instance(i)) for i in ("p4d.24xlarge", "p5.48xlarge"))
    assert (p4d.instance, p5.instance) == ("p4d.24xlarge", "p5.48xlarge")
    for paths, rate in ((p4d, C["gpu_copy_bytes_per_s_gen4"]), (p5, C["gpu_copy_bytes_per_s"])):
        host = next(p for p in paths.paths if p.kind is PathKind.EFA_HOST)
        copies = [s for s in host.steps if s.staged]
        assert [(s.name, s.bytes_per_s) for s in copies] == [("copy GPU to host", rate), ("copy host to GPU", rate)]
    assert not any(s.name.startswith("NCCL") for p in p5.paths for s in p.steps)  # nccl is off by default
    nccl = instance_paths(CATALOG.instance("p5.48xlarge"), nccl=True)
    assert all(any(s.name == "NCCL proxy and flags" for s in p.steps) for p in nccl.paths)


def test_an_instance_without_gpudirect_gets_the_host_staged_efa_path_only():
    paths = instance_paths(_without_gpudirect("p5.48xlarge"))
    assert not paths.gpudirect_rdma and paths.efa_path is PathKind.EFA_HOST
    assert [p.kind for p in paths.paths] == [PathKind.TCP_ENA, PathKind.EFA_HOST]


def test_build_path_stages_gpu_buffers_by_default():
    staged = build_path("efa-host", line_bits_per_s=100e9)
    assert [s.name for s in staged.steps if s.staged] == ["copy GPU to host", "copy host to GPU"]
    assert staged.steps == build_path("efa-host", line_bits_per_s=100e9, buffer="gpu", adapter="efa-v2").steps
    host = build_path("efa-host", line_bits_per_s=100e9, buffer="host")
    assert not any(s.staged for s in host.steps)


def test_a_step_without_a_bandwidth_takes_no_time_to_cross():
    assert Step("libfabric post", 0.3e-6).transfer_s(1 << 20) == 0.0
    assert Step("wire", 1e-6, 12.5e9).transfer_s(12.5e9) == 1.0


def test_the_breakdown_charges_the_message_once_where_two_steps_share_the_slowest_rate():
    path = DataPath(PathKind.EFA_GDR, (Step("send", 1e-6, 10e9), Step("receive", 2e-6, 10e9)), 100e9)
    m = 1 << 20
    assert path.breakdown(m) == [("send", pytest.approx(1e-6 + m / 10e9)), ("receive", 2e-6)]
    assert sum(t for _, t in path.breakdown(m)) == pytest.approx(path.one_way_s(m), rel=1e-12)


def test_the_crossover_inside_the_first_chunk_reaches_exactly_the_target():
    # 80 Gb/s line (target 9 GB/s), a 100 GB/s staging copy and a 12.5 GB/s wire, 2 us fixed: the target is
    # met at m = 9e9 x 2e-6 / (1 - 9e9 (1e-11 + 8e-11)) = 94,737 B, inside the 131,072 B chunk.
    path = DataPath(PathKind.EFA_HOST, (Step("copy", 1e-6, 100e9, staged=True), Step("wire", 1e-6, 12.5e9)), 80e9)
    crossover = path.crossover_bytes()
    assert crossover == pytest.approx(9e9 * 2e-6 / (1 - 9e9 * 9e-11), rel=1e-12)
    assert crossover < path.chunk_bytes
    assert path.bytes_per_s(crossover) == pytest.approx(9e9, rel=1e-12)
    assert path.bytes_per_s(0.99 * crossover) < 9e9


def test_a_path_whose_ceiling_is_exactly_the_target_never_reaches_it():
    path = DataPath(PathKind.EFA_GDR, (Step("wire", 1e-6, 12.5e9),), 100e9)
    assert path.crossover_bytes(fraction=1.0) is None
    assert path.crossover_bytes(fraction=0.5) == pytest.approx(6.25e9 * 1e-6 / 0.5, rel=1e-12)


@pytest.mark.parametrize(
    ("kwargs", "field", "value", "message"),
    [
        ({"kind": "rdma"}, "path", "rdma", "path: 'rdma' is not a data path (valid: tcp-ena, efa-host, efa-gdr)"),
        ({"kind": "tcp-ena", "buffer": "disk"}, "buffer", "disk", "buffer: 'disk' is not 'gpu' or 'host'"),
        ({"kind": "efa-gdr", "buffer": "host"}, "buffer", "host", "buffer: GPUDirect RDMA moves GPU buffers"),
        ({"kind": "tcp-ena", "line_bits_per_s": -1.0}, "line_bits_per_s", -1.0, "line_bits_per_s: -1.0 must be > 0"),
    ],
)
def test_refusals_name_the_field_and_the_value(kwargs, field, value, message):
    args = {"line_bits_per_s": 100e9, **kwargs}
    kind = args.pop("kind")
    with pytest.raises(ClusterSimError) as err:
        build_path(kind, **args)
    assert (err.value.field, err.value.value) == (field, value)
    assert str(err.value).startswith(message)


def test_the_kernel_tcp_path_is_the_chapters_steps_in_order():
    path = build_path("tcp-ena", line_bits_per_s=100e9, nccl=True)
    wire = 100e9 / 8 * 8949 / (8949 + 90)
    assert [(s.name, s.fixed_s, s.bytes_per_s, s.staged) for s in path.steps] == [
        ("copy GPU to host", C["gpu_copy_s"], C["gpu_copy_bytes_per_s"], True),
        ("NCCL proxy and flags", C["nccl_overhead_s"], None, False),
        ("send system call", C["syscall_s"], None, False),
        ("copy user to kernel", 0.0, C["kernel_copy_bytes_per_s"], False),
        ("kernel TCP/IP transmit", C["tcp_tx_stack_s"], None, False),
        ("ENA and Nitro, send side", C["ena_nic_s"], C["ena_flow_bits_per_s"] / 8, False),
        ("wire and switches", C["fabric_latency_s"], pytest.approx(wire, rel=1e-15), False),
        ("ENA and Nitro, receive side", C["ena_nic_s"], None, False),
        ("kernel TCP/IP receive", C["tcp_rx_stack_s"], None, False),
        ("copy kernel to user", 0.0, C["kernel_copy_bytes_per_s"], False),
        ("receiver wake-up", C["recv_wakeup_s"], None, False),
        ("recv system call", C["syscall_s"], None, False),
        ("copy host to GPU", C["gpu_copy_s"], C["gpu_copy_bytes_per_s"], True),
    ]
    gen4 = build_path("tcp-ena", line_bits_per_s=100e9, pcie_gen4=True)
    assert [s.bytes_per_s for s in gen4.steps if s.staged] == [C["gpu_copy_bytes_per_s_gen4"]] * 2


def test_any_positive_line_rate_is_accepted():
    assert build_path("efa-gdr", line_bits_per_s=0.5).line_bits_per_s == 0.5


def test_the_efa_paths_are_the_chapters_steps_in_order():
    wire = pytest.approx(100e9 / 8 * 8192 / (8192 + 84), rel=1e-15)
    gdr = build_path("efa-gdr", line_bits_per_s=100e9, adapter="efa-v1")
    assert [(s.name, s.fixed_s, s.bytes_per_s, s.staged) for s in gdr.steps] == [
        ("libfabric post (no system call)", C["efa_post_s"], None, False),
        ("EFA read from GPU memory", C["gdr_dma_s"], C["efa_v1_endpoint_bytes_per_s"], False),
        ("EFA and SRD, send side", C["efa_nic_s"], None, False),
        ("wire and switches", C["fabric_latency_s"], wire, False),
        ("EFA and SRD, receive side", C["efa_nic_s"], None, False),
        ("EFA write to GPU memory", C["gdr_dma_s"], None, False),
        ("completion polled", C["efa_completion_s"], None, False),
    ]
    host = build_path("efa-host", line_bits_per_s=100e9, buffer="host", adapter="efa-v2")
    assert [(s.name, s.fixed_s, s.bytes_per_s) for s in host.steps] == [
        ("libfabric post (no system call)", C["efa_post_s"], None),
        ("EFA read from host memory", 0.0, None),  # only EFA v1 has a single-endpoint ceiling
        ("EFA and SRD, send side", C["efa_nic_s"], None),
        ("wire and switches", C["fabric_latency_s"], wire),
        ("EFA and SRD, receive side", C["efa_nic_s"], None),
        ("EFA write to host memory", 0.0, None),
        ("completion polled", C["efa_completion_s"], None),
    ]
    assert (gdr.kind, host.kind, gdr.chunk_bytes) == (PathKind.EFA_GDR, PathKind.EFA_HOST, C["staging_chunk_bytes"])


def test_the_crossover_beyond_the_first_chunk_reaches_exactly_the_target():
    # As inside the chunk but 20 us fixed: 9e9 x 20e-6 / 0.19 = 947 kB would lie beyond the 131,072 B chunk,
    # so the staging copy is charged one chunk: m = 9e9 (20e-6 + 131072 x 1e-11) / (1 - 9e9 x 8e-11).
    path = DataPath(PathKind.EFA_HOST, (Step("copy", 10e-6, 100e9, staged=True), Step("wire", 10e-6, 12.5e9)), 80e9)
    crossover = path.crossover_bytes()
    assert crossover == pytest.approx(9e9 * (20e-6 + 131072 * 1e-11) / (1 - 9e9 * 8e-11), rel=1e-12)
    assert crossover > path.chunk_bytes
    assert path.bytes_per_s(crossover) == pytest.approx(9e9, rel=1e-12)
