"""The network a job runs on, built once from the catalog: servers, their scale-up domain, the
network cards (rails) of each server, and the switch tiers above them.

A ``Topology`` answers one question for the models: what fabric does a group of ranks see? Ranks
are numbered with tensor parallel innermost (Megatron-LM's order), so a group whose members are
``stride`` ranks apart has ``domain / stride`` members in one scale-up domain (at least one). The
analytic collective model reads the returned ``Fabric``; a flow-level simulator reads the same
topology down to rails and tiers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import (
    Accelerator,
    Cluster,
    Domain,
    FormFactor,
    Instance,
    Kind,
    Link,
    LinkType,
    Network,
    Switch,
)
from clustersim.errors import ClusterSimError
from clustersim.network.fabric import Fabric, Torus
from clustersim.network.torus_catalog import instance_torus


@dataclass(frozen=True, slots=True)
class Rails:
    """A server's scale-out network cards: ``num_nics`` of ``nic_bits_per_s`` each, one direction."""

    num_nics: int
    nic_bits_per_s: float

    @property
    def total_bits_per_s(self) -> float:
        """All cards of one server."""
        return self.num_nics * self.nic_bits_per_s


@dataclass(frozen=True, slots=True)
class SwitchTiers:
    """The switch layers above the servers (leaf, spine, core) and their uplink oversubscription."""

    cluster: str  # catalog id of the cluster template
    num_layers: int
    oversubscription: float  # 1 = non-blocking


def ranks_per_domain(
    scaleup_devices: npt.ArrayLike, stride: npt.ArrayLike, num_ranks: npt.ArrayLike
) -> npt.NDArray[np.int64]:
    """Ranks of a group of ``num_ranks`` ranks ``stride`` apart that share one scale-up domain of
    ``scaleup_devices`` (at least 1, at most the group): the "node" of the group's fabric."""
    spacing = np.maximum(np.asarray(stride, dtype=np.int64), 1)
    return np.asarray(np.clip(np.asarray(scaleup_devices, dtype=np.int64) // spacing, 1, num_ranks), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Topology:
    """``num_devices`` devices, ``devices_per_node`` per server, joined by a scale-up fabric of
    ``domain_devices`` devices (a server, or an NVL72 rack over several) and a scale-out network.

    Bandwidths are datasheet figures: scale-up per device and direction, network per server and
    direction; the collective model applies its achieved fractions. The network adapter's latency
    per inter-node hop and whether NCCL's LL/LL128 protocols may cross it, and whether the devices
    flush network receives, pass to every ``Fabric`` (see there).
    """

    name: str
    num_devices: int
    devices_per_node: int
    scaleup_bytes_per_s: float
    network_bytes_per_s: float
    in_network_reduction: bool
    domain_devices: int = 0  # 0: one server
    rails: Rails | None = None
    tiers: SwitchTiers | None = None
    network_latency_s: float = 0.0
    network_ll_protocols: bool = True
    network_flush: bool = False
    scaleup_link: str = "NVLink"  # the scale-up fabric's name, for labels only (the catalog's link type)
    torus: Torus | None = None  # NeuronLink's torus of one instance (network.torus prices it); None: switched
    family: str = ""  # the accelerator's family (catalog ``family``): NCCL's NVLS constants differ per generation
    _fabrics: dict[tuple[int, int], Fabric] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )  # group_fabric's answers: a planner asks for the same few groups over and over

    def __post_init__(self) -> None:
        if self.num_devices < 1:
            raise ClusterSimError(f"devices must be at least 1, got {self.num_devices}")
        if self.devices_per_node < 1:
            raise ClusterSimError(f"devices_per_node must be at least 1, got {self.devices_per_node}")
        if self.num_devices > self.devices_per_node and self.num_devices % self.devices_per_node:
            raise ClusterSimError(
                f"devices {self.num_devices} is not a whole number of nodes of {self.devices_per_node} devices"
            )
        if self.num_devices > self.scaleup_devices and self.network_bytes_per_s <= 0:
            raise ClusterSimError(
                f"{self.name}: more than one node needs a network bandwidth (an instance or inter_node_Gbps)"
            )

    @property
    def num_nodes(self) -> int:
        """Servers used."""
        return max(1, self.num_devices // self.devices_per_node)

    @property
    def scaleup_devices(self) -> int:
        """Devices one scale-up fabric joins: a node, or a multi-node NVLink domain (NVL72)."""
        return max(self.domain_devices, self.devices_per_node)

    def group_fabric(self, num_ranks: int, stride: int) -> Fabric | None:
        """The fabric of a group of ``num_ranks`` ranks spaced ``stride`` apart; None for one rank.

        A "node" of the fabric is a scale-up domain. The group gets its members' share of the
        domain's network (the other groups in the domain use the rest at the same time, as every
        data-parallel or pipeline group does).
        """
        if num_ranks <= 1:
            return None
        known = self._fabrics.get((num_ranks, stride))
        if known is None:
            known = self._fabrics[num_ranks, stride] = self._group_fabric(num_ranks, stride)
        return known

    def _group_fabric(self, num_ranks: int, stride: int) -> Fabric:
        per_node = int(ranks_per_domain(self.scaleup_devices, stride, num_ranks))
        return Fabric(
            name=f"{num_ranks} ranks of {self.name}",
            devices_per_node=per_node,
            num_nodes=-(-num_ranks // per_node),
            scaleup_bytes_per_s=self.scaleup_bytes_per_s,
            network_bytes_per_s=self.network_bytes_per_s * per_node / self.devices_per_node,
            in_network_reduction=self.in_network_reduction and per_node > 2,
            network_latency_s=self.network_latency_s,
            network_ll_protocols=self.network_ll_protocols,
            network_flush=self.network_flush,
            scaleup_link=self.scaleup_link,
            torus=self.torus.group(per_node, max(stride, 1)) if self.torus else None,
            family=self.family,
            # A group spanning servers of one NVLink domain (NVL72): NCCL fuses them into one node (MNNVL).
            servers_per_node=-(-per_node // self.devices_per_node),
        )

    def fabric(self) -> Fabric:
        """The fabric of every device together (what nccl-tests measures over the whole job)."""
        fabric = self.group_fabric(self.num_devices, 1)
        if fabric is None:
            raise ClusterSimError(f"{self.name}: a collective needs at least 2 devices")
        return replace(fabric, name=self.name)


def build_topology(
    catalog: Catalog,
    *,
    name: str,
    accelerator: Accelerator,
    num_devices: int,
    devices_per_node: int,
    share: float,
    instance: Instance | None,
    network_bytes_per_s: float,
) -> Topology:
    """The topology of ``num_devices`` devices (each ``share`` of a chip) from the catalog: the
    scale-up domain and its switch, the instance's rails, and the cluster template of the instance."""
    scaleup = accelerator.scaleup_bandwidth_per_direction_bytes_per_s
    if scaleup is None:
        raise ClusterSimError(f"accelerator {accelerator.id} has no scale-up bandwidth in the catalog")
    rails = None
    adapter: Network | None = None
    if instance is not None:
        rails = Rails(int(instance.network.num_cards.value), instance.network.card_bandwidth_bits_per_s.value)
        adapter = catalog.typed(instance.network.adapter, Network)
    torus = instance_torus(catalog, accelerator, instance, devices_per_node)
    return Topology(
        name=name,
        num_devices=num_devices,
        devices_per_node=devices_per_node,
        scaleup_bytes_per_s=scaleup.value * share,
        network_bytes_per_s=network_bytes_per_s,
        in_network_reduction=_in_network_reduction(catalog, accelerator, instance),
        # A torus's instances are joined by its own ring (an UltraServer) or by the network, never one domain.
        domain_devices=(
            _multi_node_domain(catalog, accelerator, devices_per_node, instance) if share == 1 and not torus else 0
        ),
        rails=rails,
        tiers=_tiers(catalog, instance),
        # What the collective model reads of the adapter: its per-message latency (none listed: 0, as
        # NCCL's tables hold InfiniBand's), whether LL/LL128 may cross it (unlisted: yes, NCCL's default).
        network_latency_s=adapter.latency_s.value if adapter and adapter.latency_s else 0.0,
        network_ll_protocols=bool(adapter.nccl_ll_protocols.value) if adapter and adapter.nccl_ll_protocols else True,
        network_flush=_needs_flush(accelerator),
        scaleup_link=scaleup_link_name(catalog, accelerator),
        torus=torus,
        family=accelerator.family or "",
    )


# How each link family is written in output (the catalog's link_type).
LINK_NAMES = {LinkType.NVLINK: "NVLink", LinkType.NEURONLINK: "NeuronLink", LinkType.PCIE: "PCIe"}


def scaleup_link_name(catalog: Catalog, accelerator: Accelerator) -> str:
    """The name of ``accelerator``'s scale-up fabric as output writes it (NVLink, NeuronLink), from the
    catalog's link type; NVLink where the catalog names no link."""
    if accelerator.scaleup_link is None or accelerator.scaleup_link not in catalog:
        return LINK_NAMES[LinkType.NVLINK]
    return LINK_NAMES[catalog.typed(accelerator.scaleup_link, Link).link_type]


# GPU families whose network receives NCCL flushes before use (NVIDIA/nccl src/graph/paths.cc,
# ncclTopoNeedFlush: "Flush is required on Ampere and earlier", compute capability < 9.0).
_FLUSHING_FAMILIES = frozenset(("kepler", "maxwell", "pascal", "volta", "turing", "ampere"))


def _needs_flush(accelerator: Accelerator) -> bool:
    """Whether NCCL flushes GPUDirect receives on this device: before Hopper, and on superchips whose
    CPU reaches the GPU over C2C while the NIC sits on PCIe (ncclTopoNeedFlush forces it there)."""
    return accelerator.family in _FLUSHING_FAMILIES or accelerator.form_factor is FormFactor.SUPERCHIP


def _multi_node_domain(catalog: Catalog, accelerator: Accelerator, per_node: int, instance: Instance | None) -> int:
    """Devices of the scale-up domain that spans several servers of ``per_node`` devices (GB200 NVL72
    over 4-GPU trays), else 0: the instance's own domain where it names one (a tray of a 36-GPU
    UltraServer is in a 36-GPU domain, not the 72-GPU rack), else the largest catalogued domain of
    the accelerator that spans servers."""
    if instance is not None and instance.intra_node.domain is not None and instance.intra_node.domain in catalog:
        size = int(catalog.typed(instance.intra_node.domain, Domain).num_accelerators.value)
        return size if size > per_node and size % per_node == 0 else 0
    sizes = [
        int(d.num_accelerators.value)
        for d in catalog.list(Kind.DOMAIN)
        if isinstance(d, Domain) and d.accelerator == accelerator.id
    ]
    spanning = [n for n in sizes if n > per_node and n % per_node == 0]
    return max(spanning, default=0)


def _in_network_reduction(catalog: Catalog, accelerator: Accelerator, instance: Instance | None) -> bool:
    """Whether the scale-up switch reduces in the network (NVLink SHARP on NVSwitch gen 3+)."""
    switch = instance.intra_node.switch if instance else None
    if switch is None:
        domains = [d for d in catalog.list(Kind.DOMAIN) if isinstance(d, Domain) and d.accelerator == accelerator.id]
        switch = next((d.switch for d in domains if d.switch), None)
    if switch is None:
        return False
    chip = catalog.typed(switch, Switch)
    return bool(chip.in_network_reduction is not None and chip.in_network_reduction.value)


def _tiers(catalog: Catalog, instance: Instance | None) -> SwitchTiers | None:
    """The switch tiers of the cluster template that lists this instance, if any."""
    if instance is None:
        return None
    for entry in catalog.list(Kind.CLUSTER):
        if isinstance(entry, Cluster) and any(g.instance == instance.id for g in entry.generations):
            layers = int(entry.network_layers.value) if entry.network_layers else 1
            return SwitchTiers(entry.id, layers, float(entry.oversubscription.value))
    return None


@dataclass(frozen=True)
class ClusterLimit:
    """The largest catalogued cluster of an instance: the template, its published size and source."""

    cluster: str
    instance: str
    max_accelerators: int
    max_nodes: int
    source: str


def cluster_limit(catalog: Catalog, instance: str | Instance) -> ClusterLimit | None:
    """The largest cluster any catalogued template publishes for ``instance`` (None: no template lists
    it); a user's catalog file with a larger cluster entry raises it."""
    entry = catalog.instance(instance) if isinstance(instance, str) else instance
    per_host = int(entry.num_accelerators.value)
    best: ClusterLimit | None = None
    for cluster in catalog.list(Kind.CLUSTER):
        if not isinstance(cluster, Cluster):
            continue
        for generation in cluster.generations:
            size = int(generation.max_accelerators.value)
            if generation.instance == entry.id and (best is None or size > best.max_accelerators):
                source = generation.max_accelerators.source
                best = ClusterLimit(cluster.id, entry.id, size, size // per_host, source)
    return best


def check_cluster_size(catalog: Catalog, instance: str | Instance, num_nodes: int) -> None:
    """Refuse a job of more instances than the largest catalogued cluster of ``instance`` holds."""
    limit = cluster_limit(catalog, instance)
    if limit is not None and num_nodes > limit.max_nodes:
        raise ClusterSimError(
            f"nodes: {num_nodes:,} x {limit.instance} is more than its largest catalogued cluster holds: "
            f"{limit.cluster} publishes {limit.max_accelerators:,} accelerators, {limit.max_nodes:,} instances "
            f"({limit.source}); give at most {limit.max_nodes:,} nodes, or a catalog file (--catalog DIR) with a "
            f"larger [[cluster]] entry for {limit.instance}",
            field="nodes",
            value=num_nodes,
        )


def topology_for_instance(catalog: Catalog, instance: str | Instance, num_nodes: int) -> Topology:
    """``num_nodes`` catalogued instances (e.g. ``p5.48xlarge``), one device per accelerator, no more
    than the instance's largest catalogued cluster holds."""
    entry = catalog.instance(instance) if isinstance(instance, str) else instance
    if num_nodes < 1:
        raise ClusterSimError(f"nodes must be at least 1, got {num_nodes}")
    check_cluster_size(catalog, entry, num_nodes)
    per_node = int(entry.num_accelerators.value)
    return build_topology(
        catalog,
        name=f"{num_nodes} x {entry.id}",
        accelerator=catalog.accelerator(entry.accelerator),
        num_devices=per_node * num_nodes,
        devices_per_node=per_node,
        share=1.0,
        instance=entry,
        network_bytes_per_s=entry.network.total_bandwidth_bits_per_s.value / 8,
    )


def fabric_for_instance(catalog: Catalog, instance: str | Instance, num_nodes: int) -> Fabric:
    """The fabric of every device of ``num_nodes`` catalogued instances."""
    return topology_for_instance(catalog, instance, num_nodes).fabric()
