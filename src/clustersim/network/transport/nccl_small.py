"""Small-message NCCL collectives over the host data paths: nccl-tests times from hop latencies.

At small sizes a collective's time is its latency: NCCL's fixed cost per launch plus the hops the
last byte crosses, one after another. Tree all-reduce on N nodes of P GPUs climbs a chain of P - 1
NVLink hops and log2(N) network hops to the root and comes back down (``2 (P - 1)`` NVLink and
``2 ceil(log2 N)`` network hops); ring all-reduce crosses ``2 (NP - 1)`` hops, ``2N`` of them over the
network (a run of NP - 1 hops around a ring that leaves each node once crosses up to N node
boundaries; aws-ofi-nccl's tuner counts the same); ring all-gather half of that.

Each network hop is the instance's EFA data path (``datapath.py``: GPUDirect RDMA where the catalog
gives it, else host-staged, with NCCL's proxy overhead) for one channel's chunk in the protocol's
wire format; each NVLink hop is NCCL's own per-hop latency. The message is split over channels as
NCCL does (one channel per ``threads x threshold`` bytes, up to the node's channels) and each channel's share
into pieces of at most one buffer step; the latency path carries one piece, and the busiest link
(a network link where there is one, else NVLink) carries the rest back to back: a ring's every
piece, ``2 (n - 1)`` of them for all-reduce, a tree's channel share once each way. Protocols: LL
(8-byte lines, half of them flags), LL128 (120 of 128 bytes), Simple (bulk, plus a completion
flush per network hop). NCCL's tuner picks the algorithm and protocol it thinks fastest; here the
pick is the fastest of these estimates unless one is forced.

What the network adds beyond one piece's data path, hop by hop:

- The proxy thread. NCCL's proxy thread posts, polls and completes every network operation of its
  rank's channels, one after another (aws-ofi-nccl turns each into libfabric calls). A tree's network
  end is taken to sit on the same rank in every channel, as NCCL's "Trees [c] ..." log lines of
  2-node jobs show it (rank 0 holding the other node's rank 8 in channels 0 and 1: "[0] 1/8/-1->0->-1
  [1] 1/-1/-1->0->8"; not seen for p5's 32 channels), so one proxy serves all the channels' pieces
  of a hop and the last waits for ``channels x pieces - 1`` operations before it (``proxy_ops``),
  each ``PROXY_OP_S``.
- Protocols on EFA v1 (p4d, p4de): aws-ofi-nccl sets ``NCCL_PROTO=simple`` there (``platform-aws.c``
  ``force_proto_simple``; later versions wherever the endpoint cannot promise 128-byte in-order
  delivery) and uses its SENDRECV protocol (no RDMA write on EFA v1), so the pick is among Simple only.
- Copies into GPU memory on EFA v1: for GPU buffers libfabric's EFA provider has only the eager and
  runting-read protocols (``prov/efa/src/efa_hmem.c``: ``max_medium_msg_size = 0``), so each packet
  (``EFA_PACKET_BYTES``, one MTU) of a send/recv lands in a host bounce buffer and is copied into
  GPU memory; NCCL forbids its plugin CUDA calls, so the copy is a local RDMA read through the NIC
  (``efa_rdm_pke_copy_payload_to_cuda``), ``local_read_s`` each, counted one after another.
- GPUDirect flush: before Hopper NCCL flushes every GPUDirect receive of LL128 and Simple (a read of
  the received buffer through the NIC, ``local_read_s``); on p5 and later aws-ofi-nccl sets
  ``NCCL_NET_FORCE_FLUSH=0``. LL's network buffers are in host memory and need none.
- ``AWS_SIMPLE_STEP_BYTES``: aws-ofi-nccl sets ``NCCL_BUFFSIZE=8388608`` on p4d, p4de, p5 and later
  (``platform-aws.cpp``), so a Simple step is 1 MiB there.

Constants and sources:

- ``BASE_LATENCY_S``, ``NVLINK_HOP_S``: NVIDIA/nccl ``src/graph/tuning.cc`` ``baseLat`` and
  ``hwLat[NVLINK]`` (unchanged from NCCL 2.19 to 2.30.7; /work/shared/reference/network.md 1.2).
- ``THREADS``, ``THREAD_THRESHOLD_BYTES``: ``src/include/comm.h`` (NCCL_LL/LL128/SIMPLE_THREAD_THRESHOLD
  8/8/64) and ``src/include/device.h`` (LL 512, LL128 640, Simple 512 threads); ring LL's threshold
  is multiplied by the rank count (``tuning.cc``).
- ``STEP_PAYLOAD_BYTES``: one step of a channel's buffer (``NCCL_STEPS`` 8): LL 8 lines of 8 payload
  bytes per thread x 512 threads, LL128 120 x 8 bytes x 640 threads (120 of 128 bytes payload),
  Simple ``DEFAULT_BUFFSIZE`` 4 MiB / 8 (``src/include/device.h``, ``src/init.cc``).
- ``SIMPLE_FLUSH_S``: aws-ofi-nccl ``TUNER_NET_COMP_OVERHEAD`` default, 3 us (``nccl_ofi_param.h``).
- ``NVLINK_CHANNEL_BYTES_PER_S``: NCCL's per-link NVLink speeds (``src/graph/topo.h``: SM80 20.0,
  SM90 20.6, SM100 40.1 GB/s; ``nvlinkBw`` gives every compute capability from 10.0 up SM100's, so B300's
  10.3 too).
- ``local_read_s``: composed of the data path's constants (``datapath.toml``), nothing fitted here.

Two constants are fitted, each on one case of ``nccl_published.toml`` (2 x p5.48xlarge all-reduce,
awsome-distributed-training's nccl-tests README); every other case is out of sample:
``PROXY_START_S``, the cost a multi-node collective pays once beyond NCCL's base latency (the host
enqueues the proxy's work and the proxy thread starts), on 8 B (69.12 us); ``PROXY_OP_S``, one
network operation of the proxy thread, on 256 KiB (128.0 us: 32 channels, 31 operations a hop).

Out of scope: NVLS and CollNet, NCCL's own pick where it differs from the fastest estimate, and the
EFA provider's copies overlapping one another (the serial count overstates p4de at 512 KiB and above).
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from clustersim.errors import ClusterSimError
from clustersim.network.transport.datapath import DataPath, PathKind, instance_paths, load_constants

if TYPE_CHECKING:
    from clustersim.catalog.schema import Instance

ALGORITHMS = ("tree", "ring")
PROTOCOLS = ("LL", "LL128", "Simple")
COLLECTIVES = ("all_reduce", "all_gather")
PUBLISHED_FILE = "nccl_published.toml"

BASE_LATENCY_S = {
    ("tree", "LL"): 6.8e-6,
    ("tree", "LL128"): 14.0e-6,
    ("tree", "Simple"): 8.4e-6,
    ("ring", "LL"): 6.6e-6,
    ("ring", "LL128"): 14.0e-6,
    ("ring", "Simple"): 8.4e-6,
}
NVLINK_HOP_S = {
    ("tree", "LL"): 0.6e-6,
    ("tree", "LL128"): 1.25e-6,
    ("tree", "Simple"): 4.0e-6,
    ("ring", "LL"): 0.6e-6,
    ("ring", "LL128"): 1.9e-6,
    ("ring", "Simple"): 3.4e-6,
}
WIRE_EFFICIENCY = {"LL": 0.5, "LL128": 120 / 128, "Simple": 1.0}
THREADS = {"LL": 512, "LL128": 640, "Simple": 512}
THREAD_THRESHOLD_BYTES = {"LL": 8, "LL128": 8, "Simple": 64}
STEP_PAYLOAD_BYTES = {"LL": 8 * 512 * 8, "LL128": 120 * 640 * 8 * 120 // 128, "Simple": (4 << 20) // 8}
SIMPLE_FLUSH_S = 3.0e-6
NVLINK_CHANNEL_BYTES_PER_S = {"a100": 20.0e9, "h100": 20.6e9, "h200": 20.6e9, "b200": 40.1e9, "b300": 40.1e9}
PROXY_START_S = 13.92e-6  # fitted: see the module docstring
PROXY_OP_S = 0.894e-6  # fitted: see the module docstring
PRE_HOPPER = ("a100",)  # NCCL flushes every GPUDirect receive before Hopper (NCCL_NET_FORCE_FLUSH)
MIN_CHANNELS = 8  # NCCL needs at least 8 channels to use a 4-NIC node (efa-cheatsheet)
AWS_SIMPLE_STEP_BYTES = (8 << 20) // 8  # aws-ofi-nccl sets NCCL_BUFFSIZE=8388608 on p4d, p4de, p5 and later
EFA_PACKET_BYTES = 8192  # EFA's MTU: one eager packet's payload (fi_efa(7))


@dataclass(frozen=True, slots=True)
class Hops:
    """One kind of hop on the critical path: how many, and the time of each."""

    name: str
    count: int
    each_s: float

    @property
    def total_s(self) -> float:
        return self.count * self.each_s


@dataclass(frozen=True, slots=True)
class Estimate:
    """The predicted time of one collective at one size, with the pick and its breakdown."""

    collective: str
    message_bytes: int
    num_ranks: int
    algorithm: str
    protocol: str
    num_channels: int
    chunk_bytes: float  # one channel's payload per step of the algorithm (a tree's share, a ring's 1/n of it)
    launch_s: float
    hops: tuple[Hops, ...]

    @property
    def time_s(self) -> float:
        return self.launch_s + sum(h.total_s for h in self.hops)

    @property
    def algbw_bytes_per_s(self) -> float:
        return self.message_bytes / self.time_s

    @property
    def busbw_bytes_per_s(self) -> float:
        """nccl-tests' bus bandwidth: 2(n-1)/n of algbw for all-reduce, (n-1)/n for all-gather."""
        n = self.num_ranks
        factor = 2 * (n - 1) / n if self.collective == "all_reduce" else (n - 1) / n
        return self.algbw_bytes_per_s * factor


@dataclass(frozen=True, slots=True)
class Fabric:
    """What the estimate needs of a cluster: nodes, GPUs per node, the network path, NVLink, channels."""

    num_nodes: int
    gpus_per_node: int
    net_path: DataPath
    nvlink_channel_bytes_per_s: float
    max_channels: int
    num_nics: int  # channels beyond this share a NIC
    protocols: tuple[str, ...] = PROTOCOLS  # what NCCL may pick (aws-ofi-nccl sets NCCL_PROTO=simple on EFA v1)
    simple_step_bytes: int = STEP_PAYLOAD_BYTES["Simple"]
    flush_s: float = 0.0  # a GPUDirect receive's flush (pre-Hopper GPUs), LL128 and Simple
    packet_copy_s: float = 0.0  # each received packet copied into GPU memory (send/recv over EFA v1)

    def __post_init__(self) -> None:
        for name in ("num_nodes", "gpus_per_node", "max_channels", "num_nics"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 1):
                raise ClusterSimError(f"{name}: {value!r} must be a whole number >= 1", field=name, value=value)
        if self.num_nodes * self.gpus_per_node < 2:
            raise ClusterSimError("num_nodes: a collective needs at least 2 ranks", field="num_nodes", value=1)
        if not self.protocols or any(p not in PROTOCOLS for p in self.protocols):
            valid = ", ".join(PROTOCOLS)
            raise ClusterSimError(
                f"protocols: {self.protocols!r} must name some of {valid}", field="protocols", value=self.protocols
            )


def _check(value: str, valid: tuple[str, ...], field: str) -> None:
    if value not in valid:
        raise ClusterSimError(f"{field}: {value!r} is not one of {', '.join(valid)}", field=field, value=value)


def _hop_counts(collective: str, algorithm: str, nodes: int, per_node: int) -> tuple[int, int]:
    """(NVLink hops, network hops) on the critical path."""
    ranks = nodes * per_node
    if algorithm == "tree":
        net = 2 * math.ceil(math.log2(nodes))
        return 2 * (per_node - 1), net
    steps = _passes(collective) * (ranks - 1)
    net = min(_passes(collective) * nodes, steps) if nodes > 1 else 0  # one GPU a node: every hop is network
    return steps - net, net


def _passes(collective: str) -> int:
    """Trips around a ring: reduce-scatter then all-gather for all-reduce, one for all-gather."""
    return 2 if collective == "all_reduce" else 1


def proxy_ops(channels: int, chunk_bytes: float, step_bytes: float) -> int:
    """Network operations one proxy thread serves before the last piece of a hop: every channel's
    pieces of one step of the algorithm (a tree's share, a ring's chunk), less the one the hop's
    latency already counts."""
    return channels * math.ceil(chunk_bytes / step_bytes) - 1


def estimate(fabric: Fabric, collective: str, message_bytes: int, algorithm: str, protocol: str) -> Estimate:
    """The time of ``collective`` on ``message_bytes`` with a given algorithm and protocol."""
    _check(collective, COLLECTIVES, "collective")
    _check(algorithm, ALGORITHMS, "algorithm")
    _check(protocol, PROTOCOLS, "protocol")
    if collective == "all_gather" and algorithm == "tree":
        raise ClusterSimError("algorithm: NCCL all-gather has no tree; use ring", field="algorithm", value=algorithm)
    if not (isinstance(message_bytes, int) and message_bytes >= 1):
        raise ClusterSimError(
            f"message_bytes: {message_bytes!r} must be a whole number >= 1", field="message_bytes", value=message_bytes
        )
    ranks = fabric.num_nodes * fabric.gpus_per_node
    threshold = THREAD_THRESHOLD_BYTES[protocol] * (ranks if algorithm == "ring" and protocol == "LL" else 1)
    channels = max(1, min(fabric.max_channels, math.ceil(message_bytes / (THREADS[protocol] * threshold))))
    per_channel = message_bytes / channels
    chunk = per_channel if algorithm == "tree" else per_channel / ranks  # a ring moves 1/n of it a step
    step = fabric.simple_step_bytes if protocol == "Simple" else STEP_PAYLOAD_BYTES[protocol]
    piece = min(chunk, step)
    wire = piece / WIRE_EFFICIENCY[protocol]
    nvlink_count, net_count = _hop_counts(collective, algorithm, fabric.num_nodes, fabric.gpus_per_node)
    flush = SIMPLE_FLUSH_S if protocol == "Simple" else 0.0
    if protocol != "LL":  # LL's network buffers sit in host memory: nothing in GPU memory to flush
        flush += fabric.flush_s
    copies = 0.0 if protocol == "LL" else math.ceil(wire / EFA_PACKET_BYTES) * fabric.packet_copy_s
    # the busiest link: every piece of a ring crosses every link; a tree's share crosses each link once
    pieces_per_link = _passes(collective) * (ranks - 1) if algorithm == "ring" else 1
    link_wire = chunk / WIRE_EFFICIENCY[protocol] * pieces_per_link
    rate = fabric.nvlink_channel_bytes_per_s
    if net_count:
        rate = min(rate, fabric.net_path.ceiling_bytes_per_s * min(1.0, fabric.num_nics / channels))
    hops = (
        Hops("NVLink hops", nvlink_count, NVLINK_HOP_S[algorithm, protocol]),
        Hops("NVLink fill (one piece)", 1 if nvlink_count else 0, wire / fabric.nvlink_channel_bytes_per_s),
        Hops(f"network hops ({fabric.net_path.kind.value})", net_count, fabric.net_path.one_way_s(wire) + flush),
        Hops("copies into GPU memory", net_count if copies else 0, copies),
        Hops("proxy: the other operations", net_count, proxy_ops(channels, chunk, step) * PROXY_OP_S),
        Hops("busiest link: the other pieces", 1, max(0.0, (link_wire - wire) / rate)),
    )
    launch = BASE_LATENCY_S[algorithm, protocol] + (PROXY_START_S if net_count else 0.0)
    return Estimate(collective, message_bytes, ranks, algorithm, protocol, channels, chunk, launch, hops)


def best(
    fabric: Fabric,
    collective: str,
    message_bytes: int,
    *,
    algorithm: str | None = None,
    protocol: str | None = None,
) -> Estimate:
    """The fastest estimate over the algorithms and the fabric's protocols (or the ones forced: a forced
    protocol is honoured even where aws-ofi-nccl would not choose it, as NCCL_PROTO set by the user is)."""
    if algorithm is not None:
        _check(algorithm, ALGORITHMS, "algorithm")
    if protocol is not None:
        _check(protocol, PROTOCOLS, "protocol")
    _check(collective, COLLECTIVES, "collective")
    algorithms = (
        [algorithm] if algorithm else [a for a in ALGORITHMS if not (collective == "all_gather" and a == "tree")]
    )
    protocols = [protocol] if protocol else list(fabric.protocols)
    return min(
        (estimate(fabric, collective, message_bytes, a, p) for a in algorithms for p in protocols),
        key=lambda e: e.time_s,
    )


def instance_fabric(instance: Instance, num_nodes: int, *, path: PathKind | str | None = None) -> Fabric:
    """The fabric of ``num_nodes`` of ``instance``: its EFA path per the catalog (``datapath.instance_paths``
    with NCCL's overhead; or ``path``, efa-gdr or efa-host), one NIC's line rate per network hop, NCCL's
    NVLink speed for its GPU, a channel per NIC (at least 8)."""
    network = instance.network
    paths = instance_paths(instance, nccl=True)
    by_kind = {p.kind.value: p for p in paths.paths if p.kind is not PathKind.TCP_ENA}
    kind = paths.efa_path.value if path is None else str(path)
    if kind not in by_kind:
        valid = ", ".join(by_kind)
        raise ClusterSimError(
            f"path: {kind!r} is not an EFA path {instance.id} has in the catalog (valid: {valid})",
            field="path",
            value=kind,
        )
    family = instance.accelerator.split("-")[0]
    if family not in NVLINK_CHANNEL_BYTES_PER_S:
        valid = ", ".join(sorted(NVLINK_CHANNEL_BYTES_PER_S))
        raise ClusterSimError(
            f"instance: {instance.id} has {instance.accelerator}, not an NVLink GPU this model covers (valid: {valid})",
            field="instance",
            value=instance.id,
        )
    gdr = by_kind[kind].kind is PathKind.EFA_GDR
    efa_v1 = network.adapter == "efa-v1"
    return Fabric(
        num_nodes=num_nodes,
        gpus_per_node=int(instance.num_accelerators.value),
        net_path=by_kind[kind],
        nvlink_channel_bytes_per_s=NVLINK_CHANNEL_BYTES_PER_S[family],
        max_channels=max(MIN_CHANNELS, int(network.num_cards.value)),
        num_nics=int(network.num_cards.value),
        protocols=("Simple",) if efa_v1 else PROTOCOLS,
        simple_step_bytes=AWS_SIMPLE_STEP_BYTES,
        flush_s=local_read_s() if gdr and family in PRE_HOPPER else 0.0,
        packet_copy_s=local_read_s() if gdr and efa_v1 else 0.0,
    )


def local_read_s() -> float:
    """One RDMA read by a node's NIC of its own memory into GPU memory: post, the NIC's processing on
    both sides of the read, a GPU-memory DMA each way, the completion (``datapath.toml`` constants).
    NCCL's GPUDirect flush is one (``ncclNetIflush``); so is the EFA provider's copy of a received
    packet into GPU memory where it has no RDMA write."""
    c = {name: constant.value for name, constant in load_constants().items()}
    return c["efa_post_s"] + 2 * c["efa_nic_s"] + 2 * c["gdr_dma_s"] + c["efa_completion_s"]


@dataclass(frozen=True, slots=True)
class PublishedCase:
    """One published nccl-tests time."""

    id: str
    instance: str
    num_nodes: int
    collective: str
    message_bytes: int
    time_s: float
    source: str
    in_scope: bool  # within the latency regime this model claims (see the module docstring)
    note: str = ""


@cache
def published_cases() -> tuple[PublishedCase, ...]:
    """The published small-message nccl-tests times of ``nccl_published.toml``."""
    text = resources.files(__package__).joinpath(PUBLISHED_FILE).read_text(encoding="utf-8")
    return tuple(
        PublishedCase(
            id=str(c["id"]),
            instance=str(c["instance"]),
            num_nodes=int(c["nodes"]),
            collective=str(c["collective"]),
            message_bytes=int(c["message_bytes"]),
            time_s=float(c["time_us"]) * 1e-6,
            source=str(c["source"]),
            in_scope=bool(c["in_scope"]),
            note=str(c.get("note", "")),
        )
        for c in tomllib.loads(text)["case"]
    )


def published_case(instance: str, num_nodes: int, collective: str, message_bytes: int) -> PublishedCase | None:
    """The first published case for exactly this instance, node count, collective and size, if any."""
    for case in published_cases():
        key = (case.instance, case.num_nodes, case.collective, case.message_bytes)
        if key == (instance, num_nodes, collective, message_bytes):
            return case
    return None
