"""The system a job runs on: the device's figures and the topology (``clustersim.network.topology``).

A *device* is what one rank drives: a GPU, or one NeuronCore where a Trainium chip's cores are
counted as devices (``devices_per_node = chips x cores``); a core gets its share of the chip's
compute, memory and NeuronLink bandwidth. Ranks are numbered with tensor parallel innermost,
then context, data, and pipeline parallel outermost (Megatron-LM's order).
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.catalog.figures import Price
from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator, Dtype, Instance, Kind, Link, LinkType
from clustersim.errors import ClusterSimError
from clustersim.network.fabric import Fabric
from clustersim.network.topology import Topology, build_topology, check_cluster_size

# A power-capped chip's sustained clock on compute-bound work goes about as the cube root of its board power:
# dynamic power is C V^2 f with the voltage following the clock on the DVFS curve (the serving calibration's
# power_clock_exponent holds the same prior, checked there on MLPerf's H200 at 700 W vs 1000 W).
POWER_CLOCK_EXPONENT = 1.0 / 3.0


def power_clock_ratio(board_watts: float | None, tdp_watts: float | None, exponent: float) -> float:
    """Sustained compute clock at ``board_watts`` relative to the catalogued TDP's: ``(board / TDP) ** exponent``;
    1 without a board power of its own or a catalogued TDP."""
    if board_watts is None or tdp_watts is None:
        return 1.0
    return float((board_watts / tdp_watts) ** exponent)


# Copy-engine copies between a device and host memory reach about this share of its host link each way: nvbandwidth
# on an HGX H100 measures 55.2 GB/s device-to-host and 55.4 host-to-device per GPU over PCIe Gen5 x16's 63 (the
# catalog's pcie-gen5 note). One measurement: a prior, assumed as well for PCIe Gen4 and NVLink-C2C.
HOST_COPY_FRACTION = 0.88


def host_copy_bytes_per_s(link_bytes_per_s: float | None) -> float | None:
    """What a copy to or from host memory reaches over a host link of ``link_bytes_per_s`` each way
    (``HOST_COPY_FRACTION`` of it; None where no link is recorded)."""
    return None if link_bytes_per_s is None else link_bytes_per_s * HOST_COPY_FRACTION


@dataclass(frozen=True, slots=True)
class System:
    """Devices of one accelerator type on a ``Topology``; per-device figures are datasheet figures
    (a core's share of a chip where cores count as devices)."""

    name: str
    accelerator: Accelerator
    cores_per_device: int  # NeuronCores a device stands for (1: a whole chip or GPU)
    topology: Topology
    instance: Instance | None = None
    network_note: str = ""
    board_power_watts: float | None = None  # a device's power limit other than its TDP (None: the TDP)
    host_bytes_per_s: float | None = None  # a device's link to host memory, each direction (None: not recorded)
    host_link_shared: bool = True  # the host link also carries the NICs' traffic (PCIe switches); False: NVLink-C2C

    @property
    def host_copy_bytes_per_s(self) -> float | None:
        """A copy to or from host memory over the device's host link, each way (None: no link recorded)."""
        return host_copy_bytes_per_s(self.host_bytes_per_s)

    @property
    def num_devices(self) -> int:
        """Devices (ranks) of the system."""
        return self.topology.num_devices

    @property
    def devices_per_node(self) -> int:
        """Devices per server."""
        return self.topology.devices_per_node

    @property
    def num_nodes(self) -> int:
        """Servers used."""
        return self.topology.num_nodes

    @property
    def scaleup_devices(self) -> int:
        """Devices one scale-up fabric joins: a node, or a multi-node NVLink domain (NVL72)."""
        return self.topology.scaleup_devices

    @property
    def network_bytes_per_s(self) -> float:
        """Scale-out bandwidth of one server, one direction."""
        return self.topology.network_bytes_per_s

    def group_fabric(self, num_ranks: int, stride: int) -> Fabric | None:
        """The fabric a group of ``num_ranks`` ranks spaced ``stride`` apart sees (``Topology.group_fabric``)."""
        return self.topology.group_fabric(num_ranks, stride)

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
    def fp32_flop_per_s(self) -> float:
        """Dense FP32 rate of one device (the CUDA cores on an NVIDIA GPU); NaN where the catalog records none."""
        figure = self.accelerator.dense_flop_per_s.get(Dtype.FP32)
        return float("nan") if figure is None else figure.value * self.share

    @property
    def exp_per_s(self) -> float:
        """Exponentials per second of one device's special function units (softmax); infinite where the
        catalog records none, so that attention is priced on its tensor rate alone."""
        figure = self.accelerator.exp_per_s
        return float("inf") if figure is None else figure.value * self.share

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
        return self.topology.scaleup_bytes_per_s

    @property
    def power_watts(self) -> float | None:
        """Board power of one device (its share of a chip), if catalogued."""
        tdp = self.accelerator.tdp_watts
        return None if tdp is None else tdp.value * self.share

    @property
    def compute_clock_ratio(self) -> float:
        """Sustained clock on compute-bound work at ``board_power_watts`` against the catalogued TDP's."""
        return power_clock_ratio(self.board_power_watts, self.power_watts, POWER_CLOCK_EXPONENT)

    def price(self, offer: str) -> Price | None:
        """The instance's ``on_demand`` or ``capacity_block`` price, if any."""
        if self.instance is None:
            return None
        if offer not in ("on_demand", "capacity_block"):
            raise ClusterSimError(f"unknown price offer {offer!r} (valid: on_demand, capacity_block)")
        price: Price | None = getattr(self.instance, offer)
        return price


def system_for_instance(
    catalog: Catalog, instance: str, num_nodes: int, *, devices_per_node: int | None = None
) -> System:
    """``num_nodes`` catalogued instances (``p5.48xlarge``), one device per accelerator, or
    ``devices_per_node`` ranks per instance that split its chips' cores (32 NeuronCores on a
    trn1.32xlarge, as the Neuron SDK counts ranks)."""
    if num_nodes < 1:
        raise ClusterSimError(f"nodes must be at least 1, got {num_nodes}")
    entry = catalog.instance(instance)
    check_cluster_size(catalog, entry, num_nodes)
    chips = int(entry.num_accelerators.value)
    per_node = devices_per_node or chips
    accelerator = catalog.accelerator(entry.accelerator)
    cores = int(accelerator.num_cores.value) if accelerator.num_cores else 1
    if per_node % chips or cores % (per_node // chips):
        valid = ", ".join(str(chips * k) for k in range(1, cores + 1) if cores % k == 0)
        raise ClusterSimError(
            f"devices per node {per_node} does not split the {chips} x {cores}-core {accelerator.id} of "
            f"{entry.id} evenly (valid: {valid})",
            field="devices_per_node",
            value=per_node,
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
    host = host_link(catalog, device)
    topology = build_topology(
        catalog,
        name=name,
        accelerator=device,
        num_devices=devices,
        devices_per_node=per_node,
        share=cores_per_device / cores,
        instance=instance,
        network_bytes_per_s=network_bytes_per_s,
    )
    return System(
        name=name,
        accelerator=device,
        cores_per_device=cores_per_device,
        topology=topology,
        instance=instance,
        network_note=note,
        host_bytes_per_s=None if host is None else host.per_device_bandwidth_per_direction_bytes_per_s.value,
        host_link_shared=host is None or host.link_type is not LinkType.C2C,
    )


def host_link(catalog: Catalog, accelerator: Accelerator) -> Link | None:
    """The accelerator's link to host memory (its catalogued ``host_link``; None: not recorded)."""
    if accelerator.host_link is None:
        return None
    link = catalog.get(accelerator.host_link, Kind.LINK)
    assert isinstance(link, Link)
    return link


def device_host_copy_bytes_per_s(catalog: Catalog, accelerator: Accelerator) -> float | None:
    """A copy between one of ``accelerator``'s devices and host memory, each way, over its catalogued host link
    (None: no host link recorded)."""
    link = host_link(catalog, accelerator)
    return host_copy_bytes_per_s(None if link is None else link.per_device_bandwidth_per_direction_bytes_per_s.value)


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
