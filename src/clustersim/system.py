"""The system a job runs on: per-device figures and the fabric each parallel group sees.

A *device* is what one rank drives: a GPU, or one NeuronCore where a Trainium chip's cores are
counted as devices (``devices_per_node = chips x cores``); a core gets its share of the chip's
compute, memory and NeuronLink bandwidth. Ranks are numbered with tensor parallel innermost,
then context, data, and pipeline parallel outermost (Megatron-LM's order), so a group whose members
are ``stride`` ranks apart has ``devices_per_node / stride`` members in a node (at least one).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.catalog.figures import Price
from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator, Domain, Dtype, Instance, Kind, Switch
from clustersim.errors import ClusterSimError
from clustersim.network.fabric import Fabric


@dataclass(frozen=True, slots=True)
class System:
    """``num_devices`` devices, ``devices_per_node`` per server; bandwidths are datasheet figures."""

    name: str
    accelerator: Accelerator
    num_devices: int
    devices_per_node: int
    cores_per_device: int  # NeuronCores a device stands for (1: a whole chip or GPU)
    network_bytes_per_s: float  # scale-out, one node, one direction
    in_network_reduction: bool
    instance: Instance | None = None
    network_note: str = ""
    domain_devices: int = 0  # devices one scale-up fabric joins (0: one node; NVL72: 72 across 18 servers)

    def __post_init__(self) -> None:
        if self.num_devices < 1:
            raise ClusterSimError(f"devices must be at least 1, got {self.num_devices}")
        if self.devices_per_node < 1:
            raise ClusterSimError(f"devices_per_node must be at least 1, got {self.devices_per_node}")
        if self.num_devices > self.devices_per_node and self.num_devices % self.devices_per_node:
            raise ClusterSimError(
                f"devices {self.num_devices} is not a whole number of nodes of {self.devices_per_node} devices"
            )

    @property
    def num_nodes(self) -> int:
        """Servers used."""
        return max(1, self.num_devices // self.devices_per_node)

    @property
    def scaleup_devices(self) -> int:
        """Devices one scale-up fabric joins: a node, or a multi-node NVLink domain (NVL72)."""
        return max(self.domain_devices, self.devices_per_node)

    @property
    def share(self) -> float:
        """Fraction of a chip one device is (1 / cores per device split)."""
        cores = self.accelerator.num_cores.value if self.accelerator.num_cores else 1
        return self.cores_per_device / cores

    def peak_flop_per_s(self, dtype: Dtype) -> float:
        """Dense peak of one device for ``dtype``."""
        try:
            return self.accelerator.dense_peak_flop_per_s(dtype) * self.share
        except KeyError as exc:
            raise ClusterSimError(str(exc.args[0])) from None

    @property
    def memory_bytes(self) -> float:
        """Device memory of one device."""
        return self.accelerator.memory_bytes.value * self.share

    @property
    def memory_bandwidth_bytes_per_s(self) -> float:
        """Device memory bandwidth of one device."""
        return self.accelerator.memory_bandwidth_bytes_per_s.value * self.share

    @property
    def scaleup_bytes_per_s(self) -> float:
        """Scale-up (NVLink, NeuronLink) bandwidth of one device, one direction."""
        figure = self.accelerator.scaleup_bandwidth_per_direction_bytes_per_s
        if figure is None:
            raise ClusterSimError(f"accelerator {self.accelerator.id} has no scale-up bandwidth in the catalog")
        return figure.value * self.share

    @property
    def power_watts(self) -> float | None:
        """Board power of one device (its share of a chip), if catalogued."""
        tdp = self.accelerator.tdp_watts
        return None if tdp is None else tdp.value * self.share

    def price(self, offer: str) -> Price | None:
        """The instance's ``on_demand`` or ``capacity_block`` price, if any."""
        if self.instance is None:
            return None
        if offer not in ("on_demand", "capacity_block"):
            raise ClusterSimError(f"unknown price offer {offer!r} (valid: on_demand, capacity_block)")
        price: Price | None = getattr(self.instance, offer)
        return price

    def group_fabric(self, num_ranks: int, stride: int) -> Fabric | None:
        """The fabric of a group of ``num_ranks`` ranks spaced ``stride`` apart; None for one rank.

        A "node" of the fabric is a scale-up domain. The group gets its members' share of the
        domain's network (the other groups in the domain use the rest at the same time, as every
        data-parallel or pipeline group does).
        """
        if num_ranks <= 1:
            return None
        domain = self.scaleup_devices
        per_node = max(1, min(num_ranks, domain // max(stride, 1)))
        nodes = -(-num_ranks // per_node)
        return Fabric(
            name=f"{num_ranks} ranks of {self.name}",
            devices_per_node=per_node,
            num_nodes=nodes,
            scaleup_bytes_per_s=self.scaleup_bytes_per_s,
            network_bytes_per_s=self.network_bytes_per_s * per_node / self.devices_per_node,
            in_network_reduction=self.in_network_reduction and per_node > 2,
        )


def system_for_instance(
    catalog: Catalog, instance: str, num_nodes: int, *, devices_per_node: int | None = None
) -> System:
    """``num_nodes`` catalogued instances (``p5.48xlarge``), one device per accelerator, or
    ``devices_per_node`` ranks per instance that split its chips' cores (32 NeuronCores on a
    trn1.32xlarge, as the Neuron SDK counts ranks)."""
    if num_nodes < 1:
        raise ClusterSimError(f"nodes must be at least 1, got {num_nodes}")
    entry = catalog.instance(instance)
    chips = int(entry.num_accelerators.value)
    per_node = devices_per_node or chips
    accelerator = catalog.accelerator(entry.accelerator)
    cores = int(accelerator.num_cores.value) if accelerator.num_cores else 1
    if per_node % chips or cores % (per_node // chips):
        valid = ", ".join(str(chips * k) for k in range(1, cores + 1) if cores % k == 0)
        raise ClusterSimError(
            f"devices per node {per_node} does not split the {chips} x {cores}-core {accelerator.id} of "
            f"{entry.id} evenly (valid: {valid})"
        )
    return _system(catalog, entry, per_node * num_nodes, per_node, f"{num_nodes} x {entry.id}")


def system_for_accelerator(
    catalog: Catalog,
    accelerator: str,
    *,
    devices: int,
    devices_per_node: int,
    instance: str | None = None,
    network_bits_per_s: float | None = None,
) -> System:
    """``devices`` devices of an accelerator id, ``devices_per_node`` per server. The network is the
    instance's, or ``network_bits_per_s`` per server, or (neither given) that of a catalogued server
    with this accelerator, said so in ``network_note``."""
    device = catalog.accelerator(accelerator)
    for name, value in (("devices", devices), ("devices_per_node", devices_per_node)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ClusterSimError(f"{name} must be a positive integer, got {value!r}")
    entry = catalog.instance(instance) if instance else None
    if entry is not None and entry.accelerator != device.id:
        raise ClusterSimError(f"instance {entry.id} has {entry.accelerator}, not {device.id}")
    if network_bits_per_s is not None and not network_bits_per_s > 0:
        raise ClusterSimError(f"network bandwidth per node must be positive, got {network_bits_per_s!r} bits/s")
    network = network_bits_per_s / 8 if network_bits_per_s else None
    return _system(catalog, entry, devices, devices_per_node, f"{devices} x {device.id}", device, network)


def system_from_case(catalog: Catalog, system: dict[str, object]) -> System:
    """The system of a ground-truth case (``shared/validation`` format)."""
    devices = _positive_int(system, "devices")
    per_node = _positive_int(system, "devices_per_node") if system.get("devices_per_node") else min(devices, 8)
    gbps = system.get("inter_node_Gbps_per_node")
    return system_for_accelerator(
        catalog,
        str(system.get("accelerator")),
        devices=devices,
        devices_per_node=per_node,
        instance=str(system["instance"]) if system.get("instance") else None,
        network_bits_per_s=float(gbps) * 1e9 if isinstance(gbps, int | float) and gbps > 0 else None,
    )


def _positive_int(data: dict[str, object], key: str) -> int:
    value = data.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ClusterSimError(f"system.{key} must be a positive integer, got {value!r}")
    return value


def _system(
    catalog: Catalog,
    instance: Instance | None,
    devices: int,
    per_node: int,
    name: str,
    accelerator: Accelerator | None = None,
    network_bytes_per_s: float | None = None,
) -> System:
    note = ""
    if instance is None:
        assert accelerator is not None
        if network_bytes_per_s is None:
            instance = _reference_instance(catalog, accelerator, per_node)
            if instance is not None:
                note = f"network of {instance.id} assumed (none given)"
    device = accelerator or catalog.accelerator(instance.accelerator if instance else "")
    chips = int(instance.num_accelerators.value) if instance else per_node
    cores = int(device.num_cores.value) if device.num_cores else 1
    cores_per_device = cores if per_node <= chips else max(1, cores * chips // per_node)
    if network_bytes_per_s is None:
        network_bytes_per_s = instance.network.total_bandwidth_bits_per_s.value / 8 if instance else 0.0
    domain = _multi_node_domain(catalog, device, per_node) if cores_per_device == cores else 0
    if devices > max(per_node, domain) and network_bytes_per_s <= 0:
        raise ClusterSimError(f"{name}: more than one node needs a network bandwidth (an instance or inter_node_Gbps)")
    return System(
        name=name,
        accelerator=device,
        num_devices=devices,
        devices_per_node=per_node,
        cores_per_device=cores_per_device,
        network_bytes_per_s=network_bytes_per_s,
        in_network_reduction=_in_network_reduction(catalog, device, instance),
        instance=instance,
        network_note=note,
        domain_devices=domain,
    )


def _reference_instance(catalog: Catalog, accelerator: Accelerator, per_node: int) -> Instance | None:
    """A catalogued server with this accelerator and ``per_node`` devices: its chips, or groups of
    their cores (a whole number of devices per chip)."""
    cores = int(accelerator.num_cores.value) if accelerator.num_cores else 1
    for entry in catalog.list(Kind.INSTANCE):
        assert isinstance(entry, Instance)
        chips = int(entry.num_accelerators.value)
        if entry.accelerator == accelerator.id and per_node % chips == 0 and cores % (per_node // chips) == 0:
            return entry
    return None


def _multi_node_domain(catalog: Catalog, accelerator: Accelerator, per_node: int) -> int:
    """Devices of a catalogued scale-up domain of this accelerator that spans several servers of
    ``per_node`` devices (GB200 NVL72 over 4-GPU trays), else 0."""
    sizes = [
        int(d.num_accelerators.value)
        for d in catalog.list(Kind.DOMAIN)
        if isinstance(d, Domain) and d.accelerator == accelerator.id
    ]
    spanning = [n for n in sizes if n > per_node and n % per_node == 0]
    return max(spanning, default=0)


def _in_network_reduction(catalog: Catalog, accelerator: Accelerator, instance: Instance | None) -> bool:
    switch = instance.intra_node.switch if instance else None
    if switch is None:
        domains = [d for d in catalog.list(Kind.DOMAIN) if isinstance(d, Domain) and d.accelerator == accelerator.id]
        switch = next((d.switch for d in domains if d.switch), None)
    if switch is None:
        return False
    chip = catalog.typed(switch, Switch)
    return bool(chip.in_network_reduction is not None and chip.in_network_reduction.value)
