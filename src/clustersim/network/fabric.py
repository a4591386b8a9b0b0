"""What one collective runs on: ranks in scale-up domains, their scale-up links and network share.

Built by ``clustersim.network.topology.Topology.group_fabric``, never from the catalog directly."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.errors import ClusterSimError


@dataclass(frozen=True, slots=True)
class Fabric:
    """What a collective runs on: ``num_nodes`` servers of ``devices_per_node`` devices.

    Bandwidths are datasheet figures (per device per direction inside the node; all network cards
    of one node, one direction); the model applies its achieved-bandwidth fractions to them.

    The network adapter adds what NCCL's InfiniBand-tuned tables leave out: ``network_latency_s``
    on every inter-node hop (what NCCL's tuner calls ``latencyInter``; 0 for InfiniBand), whether
    NCCL's LL/LL128 protocols may cross it (``network_ll_protocols``).
    ``network_flush``: a network receive must be flushed (a loopback read through the NIC) before
    the GPU may use it, as NCCL does before Hopper and on C2C superchips (``ncclTopoNeedFlush``).
    """

    name: str
    devices_per_node: int
    num_nodes: int
    scaleup_bytes_per_s: float
    network_bytes_per_s: float
    in_network_reduction: bool
    network_latency_s: float = 0.0
    network_ll_protocols: bool = True
    network_flush: bool = False
    scaleup_link: str = "NVLink"  # the scale-up fabric's name, for labels only (the catalog's link type)

    @property
    def num_ranks(self) -> int:
        """Devices taking part."""
        return self.devices_per_node * self.num_nodes

    def __post_init__(self) -> None:
        if self.devices_per_node < 1:
            raise ClusterSimError(f"devices per node must be at least 1, got {self.devices_per_node}")
        if self.num_nodes < 1:
            raise ClusterSimError(f"nodes must be at least 1, got {self.num_nodes}")
        if self.num_ranks < 2 and self.num_nodes == 1:
            raise ClusterSimError("a collective needs at least 2 devices")
        if self.scaleup_bytes_per_s <= 0:
            raise ClusterSimError(f"{self.name}: scale-up bandwidth must be positive")
        if self.num_nodes > 1 and self.network_bytes_per_s <= 0:
            raise ClusterSimError(f"{self.name}: more than one node needs a network bandwidth")
        if not self.network_latency_s >= 0:
            raise ClusterSimError(f"{self.name}: network latency must be at least 0 s, got {self.network_latency_s!r}")
