"""The communication fabric of a job, read from the catalog: devices per node, NVLink, network."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Instance, Switch
from clustersim.errors import ClusterSimError


@dataclass(frozen=True, slots=True)
class Fabric:
    """What a collective runs on: ``num_nodes`` servers of ``devices_per_node`` devices.

    Bandwidths are datasheet figures (per device per direction inside the node; all network cards
    of one node, one direction); the model applies its achieved-bandwidth fractions to them.
    """

    name: str
    devices_per_node: int
    num_nodes: int
    scaleup_bytes_per_s: float
    network_bytes_per_s: float
    in_network_reduction: bool

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


def fabric_for_instance(catalog: Catalog, instance: str | Instance, num_nodes: int) -> Fabric:
    """The fabric of ``num_nodes`` catalogued instances (e.g. ``p5.48xlarge``)."""
    entry = catalog.instance(instance) if isinstance(instance, str) else instance
    return fabric_for_system(
        catalog,
        accelerator=entry.accelerator,
        devices_per_node=int(entry.num_accelerators.value),
        num_nodes=num_nodes,
        network_bits_per_s=entry.network.total_bandwidth_bits_per_s.value,
        switch=entry.intra_node.switch,
        name=f"{num_nodes} x {entry.id}",
    )


def fabric_for_system(
    catalog: Catalog,
    *,
    accelerator: str,
    devices_per_node: int,
    num_nodes: int,
    network_bits_per_s: float | None,
    switch: str | None = None,
    name: str | None = None,
) -> Fabric:
    """A fabric from an accelerator id, devices per node and the per-node network bandwidth."""
    device = catalog.accelerator(accelerator)
    scaleup = device.scaleup_bandwidth_per_direction_bytes_per_s
    if scaleup is None:
        raise ClusterSimError(f"accelerator {device.id} has no scale-up bandwidth in the catalog")
    reduction = False
    if switch is not None:
        chip = catalog.typed(switch, Switch)
        reduction = chip.in_network_reduction is not None and chip.in_network_reduction.value
    if num_nodes > 1 and not network_bits_per_s:
        raise ClusterSimError(
            f"{num_nodes} nodes of {device.id} need a network bandwidth per node (an instance or inter_node_Gbps)"
        )
    return Fabric(
        name=name or f"{num_nodes} x {devices_per_node} {device.id}",
        devices_per_node=devices_per_node,
        num_nodes=num_nodes,
        scaleup_bytes_per_s=scaleup.value,
        network_bytes_per_s=(network_bits_per_s or 0.0) / 8,
        in_network_reduction=reduction,
    )
