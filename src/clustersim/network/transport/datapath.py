"""The host data paths: each step of a one-way transfer, with its latency and bandwidth.

Three paths (the chapter's "GPU -> CPU -> kernel -> NIC -> network -> NIC -> kernel -> CPU -> GPU"):

- ``tcp-ena``: kernel TCP over ENA. GPU data is copied to host memory, a system call hands it to the
  kernel (a copy from user to kernel memory), the TCP/IP stack and ENA send it; the receiver's
  interrupt, stack, copy to user memory, wake-up and copy back to the GPU undo it.
- ``efa-host``: libfabric over EFA with OS bypass: no system call, no kernel copy; GPU buffers are
  staged through host memory (one copy each side).
- ``efa-gdr``: EFA with GPUDirect RDMA: the NIC reads and writes GPU memory directly.

Copies to and from the GPU are staged in chunks (NCCL's and the MPI libraries' pipelines): the first
chunk must cross each staging copy before the network sees it and the last must cross the copy back,
and the rest overlaps; so a message takes the sum of every step's fixed latency, one chunk through
each staging copy, and its bytes over the slowest step. Every constant lives in ``datapath.toml``
beside this module with its source. Which EFA path an instance gets follows ``network.gpudirect_rdma``
in the catalog.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.schema import Instance

CONSTANTS_FILE = "datapath.toml"
HEADER_FRACTION = {"tcp-ena": 8949 / (8949 + 90), "efa-host": 8192 / (8192 + 84), "efa-gdr": 8192 / (8192 + 84)}
LINE_RATE_FRACTION = 0.9  # the crossover: where one message reaches this share of line rate


class PathKind(StrEnum):
    TCP_ENA = "tcp-ena"
    EFA_HOST = "efa-host"
    EFA_GDR = "efa-gdr"


@dataclass(frozen=True, slots=True)
class Constant:
    """One data-path constant with its source."""

    name: str
    value: float
    kind: str  # measured | prior | fitted
    source: str


@cache
def load_constants() -> dict[str, Constant]:
    """The constants of ``datapath.toml``, by name."""
    text = resources.files(__package__).joinpath(CONSTANTS_FILE).read_text(encoding="utf-8")
    raw = tomllib.loads(text)
    return {
        name: Constant(name, float(entry["value"]), str(entry["kind"]), str(entry["source"]))
        for name, entry in raw.items()
    }


@dataclass(frozen=True, slots=True)
class Step:
    """One step of a transfer: a fixed latency, and a bandwidth where bytes cross it."""

    name: str
    fixed_s: float
    bytes_per_s: float | None = None
    staged: bool = False  # a staging copy: a chunk crosses it before the next step starts

    def transfer_s(self, message_bytes: float) -> float:
        """Time for ``message_bytes`` to cross this step at its bandwidth (0 for a fixed step)."""
        return 0.0 if self.bytes_per_s is None else message_bytes / self.bytes_per_s


@dataclass(frozen=True, slots=True)
class DataPath:
    """The steps of one path, the line rate of the NIC it leaves by, and the staging chunk."""

    kind: PathKind
    steps: tuple[Step, ...]
    line_bits_per_s: float
    chunk_bytes: float = 131072.0

    @property
    def ceiling_bytes_per_s(self) -> float:
        """The slowest step: the rate a large message streams at."""
        return min(s.bytes_per_s for s in self.steps if s.bytes_per_s is not None)

    def _fixed_s(self) -> float:
        return sum(s.fixed_s for s in self.steps)

    def _staged_per_byte(self) -> float:
        return sum(1 / s.bytes_per_s for s in self.steps if s.staged and s.bytes_per_s)

    def one_way_s(self, message_bytes: float) -> float:
        """Time from the sender's call to the data in the receiver's buffer."""
        first_chunk = min(message_bytes, self.chunk_bytes)
        return self._fixed_s() + first_chunk * self._staged_per_byte() + message_bytes / self.ceiling_bytes_per_s

    def breakdown(self, message_bytes: float) -> list[tuple[str, float]]:
        """Each step's share of ``one_way_s``: its fixed latency, one chunk through a staging copy, and
        the whole message through the slowest step (the other transfers overlap it)."""
        slowest = self.ceiling_bytes_per_s
        first_chunk = min(message_bytes, self.chunk_bytes)
        out = []
        bottleneck_taken = False
        for step in self.steps:
            time_s = step.fixed_s
            if step.staged:
                time_s += step.transfer_s(first_chunk)
            if step.bytes_per_s == slowest and not bottleneck_taken:
                time_s += step.transfer_s(message_bytes)
                bottleneck_taken = True
            out.append((step.name, time_s))
        return out

    def bytes_per_s(self, message_bytes: float) -> float:
        """What one message of ``message_bytes`` achieves: its size over its one-way time."""
        return message_bytes / self.one_way_s(message_bytes)

    def crossover_bytes(self, fraction: float = LINE_RATE_FRACTION) -> float | None:
        """The message size at which one message reaches ``fraction`` of line rate; ``None`` where the
        path's ceiling lies below it."""
        target = fraction * self.line_bits_per_s / 8
        if self.ceiling_bytes_per_s <= target:
            return None
        fixed, staged, ceiling = self._fixed_s(), self._staged_per_byte(), self.ceiling_bytes_per_s
        # m / (fixed + m * (staged + 1 / ceiling)) = target, for m within one chunk
        headroom = 1 - target * (staged + 1 / ceiling)
        if headroom > 0 and target * fixed / headroom <= self.chunk_bytes:
            return target * fixed / headroom
        # m / (fixed + chunk * staged + m / ceiling) = target, beyond it
        return target * (fixed + self.chunk_bytes * staged) / (1 - target / ceiling)


def build_path(
    kind: PathKind | str,
    *,
    line_bits_per_s: float,
    buffer: str = "gpu",
    adapter: str = "",
    pcie_gen4: bool = False,
    nccl: bool = False,
    device: str = "GPU",
) -> DataPath:
    """The steps of path ``kind`` for a NIC of ``line_bits_per_s``: ``buffer`` 'gpu' (copies to and
    from accelerator memory where the path needs them) or 'host'; ``adapter`` the catalog's adapter
    id (EFA v1 has a single-endpoint ceiling); ``pcie_gen4`` for A100-class hosts; ``nccl`` adds
    NCCL's own overhead around the send; ``device`` names the accelerator in the steps (GPU, Trainium: labels
    only)."""
    try:
        kind = PathKind(kind)
    except ValueError:
        valid = ", ".join(k.value for k in PathKind)
        raise ClusterSimError(f"path: {kind!r} is not a data path (valid: {valid})", field="path", value=kind) from None
    if buffer not in ("gpu", "host"):
        raise ClusterSimError(f"buffer: {buffer!r} is not 'gpu' or 'host'", field="buffer", value=buffer)
    if kind is PathKind.EFA_GDR and buffer != "gpu":
        raise ClusterSimError("buffer: GPUDirect RDMA moves GPU buffers; use 'gpu'", field="buffer", value=buffer)
    if not line_bits_per_s > 0:
        raise ClusterSimError(
            f"line_bits_per_s: {line_bits_per_s!r} must be > 0", field="line_bits_per_s", value=line_bits_per_s
        )
    c = {name: constant.value for name, constant in load_constants().items()}
    wire_bytes_per_s = line_bits_per_s / 8 * HEADER_FRACTION[kind.value]
    copy_rate = c["gpu_copy_bytes_per_s_gen4"] if pcie_gen4 else c["gpu_copy_bytes_per_s"]
    staged = buffer == "gpu" and kind is not PathKind.EFA_GDR
    steps: list[Step] = []
    if staged:
        steps.append(Step(f"copy {device} to host", c["gpu_copy_s"], copy_rate, staged=True))
    if nccl:
        steps.append(Step("NCCL proxy and flags", c["nccl_overhead_s"]))
    if kind is PathKind.TCP_ENA:
        steps += [
            Step("send system call", c["syscall_s"]),
            Step("copy user to kernel", 0.0, c["kernel_copy_bytes_per_s"]),
            Step("kernel TCP/IP transmit", c["tcp_tx_stack_s"]),
            Step("ENA and Nitro, send side", c["ena_nic_s"], c["ena_flow_bits_per_s"] / 8),
            Step("wire and switches", c["fabric_latency_s"], wire_bytes_per_s),
            Step("ENA and Nitro, receive side", c["ena_nic_s"]),
            Step("kernel TCP/IP receive", c["tcp_rx_stack_s"]),
            Step("copy kernel to user", 0.0, c["kernel_copy_bytes_per_s"]),
            Step("receiver wake-up", c["recv_wakeup_s"]),
            Step("recv system call", c["syscall_s"]),
        ]
    else:
        endpoint = c["efa_v1_endpoint_bytes_per_s"] if adapter == "efa-v1" else None
        gdr = kind is PathKind.EFA_GDR
        steps += [
            Step("libfabric post (no system call)", c["efa_post_s"]),
            Step(
                f"EFA read from {device} memory" if gdr else "EFA read from host memory",
                c["gdr_dma_s"] if gdr else 0.0,
                endpoint,
            ),
            Step("EFA and SRD, send side", c["efa_nic_s"]),
            Step("wire and switches", c["fabric_latency_s"], wire_bytes_per_s),
            Step("EFA and SRD, receive side", c["efa_nic_s"]),
            Step(
                f"EFA write to {device} memory" if gdr else "EFA write to host memory", c["gdr_dma_s"] if gdr else 0.0
            ),
            Step("completion polled", c["efa_completion_s"]),
        ]
    if staged:
        steps.append(Step(f"copy host to {device}", c["gpu_copy_s"], copy_rate, staged=True))
    return DataPath(kind, tuple(steps), line_bits_per_s, c["staging_chunk_bytes"])


@dataclass(frozen=True, slots=True)
class InstancePaths:
    """The data paths an instance has, and the EFA one its catalog entry gives it."""

    instance: str
    nitro: str | None
    gpudirect_rdma: bool
    efa_path: PathKind
    paths: tuple[DataPath, ...]
    device: str = "GPU"  # the accelerator as the labels name it (GPU, Trainium)


def instance_paths(instance: Instance, *, nccl: bool = False, device: str = "GPU") -> InstancePaths:
    """Kernel TCP over ENA, and the instance's EFA path: GPUDirect RDMA where the catalog says the
    instance has it, else host-staged; per NIC of the instance's scale-out network. ``device``: the
    accelerator's name in the labels (Trainium's EFA DMA to device memory is not called GPUDirect)."""
    network = instance.network
    gdr = bool(network.gpudirect_rdma.value)
    line = float(network.card_bandwidth_bits_per_s.value)
    gen4 = instance.accelerator.startswith("a100")
    efa_kind = PathKind.EFA_GDR if gdr else PathKind.EFA_HOST
    kinds = [PathKind.TCP_ENA, PathKind.EFA_HOST] + ([PathKind.EFA_GDR] if gdr else [])
    paths = tuple(
        build_path(k, line_bits_per_s=line, adapter=network.adapter, pcie_gen4=gen4, nccl=nccl, device=device)
        for k in kinds
    )
    return InstancePaths(instance.id, network.nitro, gdr, efa_kind, paths, device)
