"""The catalog's entry types: accelerators, links, switches, scale-up domains, network parts,
instances, storage (``storage_schema``) and cluster templates. Every number is a sourced ``Figure``."""

from __future__ import annotations

from enum import StrEnum
from typing import ClassVar

from pydantic import Field, model_validator

from clustersim.catalog.entry import Entry as Entry
from clustersim.catalog.entry import require_basis
from clustersim.catalog.figures import (
    Basis,
    BitsPerSFigure,
    BytesFigure,
    BytesPerSFigure,
    CountFigure,
    Fact,
    Flag,
    FlopPerSFigure,
    PerSFigure,
    Price,
    Record,
    SecondsFigure,
    WattsFigure,
)
from clustersim.catalog.kinds import Dtype as Dtype  # re-exported; defined stdlib-only for the command line
from clustersim.catalog.kinds import Kind as Kind
from clustersim.catalog.storage_schema import DeploymentType as DeploymentType
from clustersim.catalog.storage_schema import Storage as Storage
from clustersim.catalog.storage_schema import StorageCategory as StorageCategory
from clustersim.catalog.storage_schema import StorageClass as StorageClass
from clustersim.catalog.storage_schema import StoragePrice as StoragePrice
from clustersim.catalog.storage_schema import StripeLayout as StripeLayout

# --- accelerators -----------------------------------------------------------------------------


class Vendor(StrEnum):
    NVIDIA = "nvidia"
    AWS = "aws"


class FormFactor(StrEnum):
    SXM = "sxm"
    PCIE = "pcie"
    SUPERCHIP = "superchip"
    ASIC_MODULE = "asic_module"


class Accelerator(Entry):
    """One GPU or accelerator chip."""

    kind: ClassVar[Kind] = Kind.ACCELERATOR
    vendor: Vendor = Field(description="Who makes it.")
    family: str = Field(description="Architecture family (ampere, hopper, blackwell, trainium, ...).")
    form_factor: FormFactor = Field(description="Package: SXM module, PCIe card, superchip, ASIC module.")
    memory_type: str = Field(description="HBM generation, e.g. 'HBM3e'.")
    memory_bytes: BytesFigure = Field(description="Device memory capacity.")
    memory_bandwidth_bytes_per_s: BytesPerSFigure = Field(description="Device memory bandwidth.")
    dense_flop_per_s: dict[Dtype, FlopPerSFigure] = Field(description="Dense peak throughput per numeric format.")
    sparse_flop_per_s: dict[Dtype, FlopPerSFigure] = Field(
        default_factory=dict, description="2:4 structured-sparsity peak where the vendor quotes one."
    )
    exp_per_s: PerSFigure | None = Field(
        None,
        description=(
            "Exponentials per second of the special function units (softmax's exp2, MUFU.EX2 on NVIDIA GPUs): "
            "SMs x per-SM rate x boost clock; None: not recorded (attention is priced on the tensor rate alone)."
        ),
    )
    tdp_watts: WattsFigure | None = Field(None, description="Maximum board power.")
    mig_instances: CountFigure | None = Field(None, description="Multi-Instance GPU partitions (up to).")
    num_cores: CountFigure | None = Field(None, description="Compute cores per device (NeuronCores on Trainium).")
    core_type: str | None = Field(None, description="Core type, e.g. 'NeuronCore-v3'.")
    scaleup_link: str | None = Field(None, description="Link id of the scale-up fabric (NVLink, NeuronLink).")
    host_link: str | None = Field(
        None, description="Link id of the path to host memory (PCIe, NVLink-C2C); None: not recorded."
    )
    scaleup_bandwidth_per_direction_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="Scale-up bandwidth per device, each direction."
    )
    scaleup_bandwidth_bidirectional_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="Scale-up bandwidth per device as vendors quote it (both directions)."
    )

    @model_validator(mode="after")
    def _check_bases(self) -> Accelerator:
        for dtype, figure in self.dense_flop_per_s.items():
            require_basis(figure, Basis.DENSE, f"dense_flop_per_s.{dtype.value}")
        for dtype, figure in self.sparse_flop_per_s.items():
            require_basis(figure, Basis.SPARSE, f"sparse_flop_per_s.{dtype.value}")
        require_basis(
            self.scaleup_bandwidth_per_direction_bytes_per_s, Basis.PER_DIRECTION, "scaleup_bandwidth_per_direction"
        )
        require_basis(
            self.scaleup_bandwidth_bidirectional_bytes_per_s, Basis.BIDIRECTIONAL, "scaleup_bandwidth_bidirectional"
        )
        if not self.dense_flop_per_s:
            raise ValueError("dense_flop_per_s needs at least one numeric format")
        return self

    def dense_peak_flop_per_s(self, dtype: Dtype | str) -> float:
        """Dense peak FLOP/s for ``dtype``; raises ``KeyError`` listing the formats quoted."""
        dtype = Dtype(dtype)
        if dtype not in self.dense_flop_per_s:
            known = ", ".join(d.value for d in self.dense_flop_per_s)
            raise KeyError(f"{self.id} has no dense {dtype.value} figure (known: {known})")
        return self.dense_flop_per_s[dtype].value


# --- scale-up fabric --------------------------------------------------------------------------


class LinkType(StrEnum):
    NVLINK = "nvlink"
    NEURONLINK = "neuronlink"
    PCIE = "pcie"
    C2C = "c2c"


class Link(Entry):
    """A scale-up or host link generation (NVLink 4, NeuronLink v3, PCIe Gen5 x16, NVLink-C2C)."""

    kind: ClassVar[Kind] = Kind.LINK
    link_type: LinkType = Field(description="Link family.")
    generation: str = Field(description="Generation label, e.g. '4.0' or 'v3' or 'Gen5'.")
    num_links_per_device: CountFigure | None = Field(None, description="Links (or lanes) per device.")
    per_link_bandwidth_per_direction_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="One link (or lane), each direction."
    )
    per_device_bandwidth_per_direction_bytes_per_s: BytesPerSFigure = Field(
        description="All links of one device, each direction."
    )
    per_device_bandwidth_bidirectional_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="All links of one device, both directions (the vendors' headline figure)."
    )
    used_by: tuple[str, ...] = Field((), description="Accelerator ids that use this link generation.")

    @model_validator(mode="after")
    def _check_bases(self) -> Link:
        require_basis(
            self.per_link_bandwidth_per_direction_bytes_per_s, Basis.PER_DIRECTION, "per_link_bandwidth_per_direction"
        )
        require_basis(
            self.per_device_bandwidth_per_direction_bytes_per_s,
            Basis.PER_DIRECTION,
            "per_device_bandwidth_per_direction",
        )
        require_basis(
            self.per_device_bandwidth_bidirectional_bytes_per_s,
            Basis.BIDIRECTIONAL,
            "per_device_bandwidth_bidirectional",
        )
        return self


class Switch(Entry):
    """A scale-up switch chip or tray (NVSwitch, NVLink Switch tray)."""

    kind: ClassVar[Kind] = Kind.SWITCH
    generation: str = Field(description="Generation label.")
    link: str = Field(description="Link id of its ports.")
    num_ports: CountFigure = Field(description="Link ports.")
    num_chips: CountFigure | None = Field(None, description="Switch chips (for a tray).")
    bandwidth_bidirectional_bytes_per_s: BytesPerSFigure = Field(description="Switching capacity, both directions.")
    bandwidth_per_direction_bytes_per_s: BytesPerSFigure | None = Field(None, description="Each direction.")
    in_network_reduction: Flag | None = Field(
        None, description="The switch reduces data itself (NVLink SHARP, used by NCCL's NVLS algorithms)."
    )


class DomainTopology(StrEnum):
    CROSSBAR = "crossbar"
    TORUS_2D = "torus_2d"
    RING = "ring"


class Domain(Entry):
    """A scale-up domain: the devices one fabric joins without the network (HGX 8-GPU, NVL72)."""

    kind: ClassVar[Kind] = Kind.DOMAIN
    accelerator: str = Field(description="Accelerator id.")
    num_accelerators: CountFigure = Field(description="Devices in the domain.")
    topology: DomainTopology = Field(description="How the devices are joined.")
    link: str = Field(description="Link id.")
    switch: str | None = Field(None, description="Switch id, for switched domains.")
    num_switches: CountFigure | None = Field(None, description="Switch chips or trays.")
    aggregate_bandwidth_bidirectional_bytes_per_s: BytesPerSFigure = Field(
        description="Sum of every device's scale-up bandwidth, both directions."
    )
    memory_bytes: BytesFigure | None = Field(None, description="Total device memory of the domain.")
    dense_flop_per_s: dict[Dtype, FlopPerSFigure] = Field(default_factory=dict, description="Dense peak, total.")


# --- scale-out network ------------------------------------------------------------------------


class NetworkCategory(StrEnum):
    ADAPTER = "adapter"
    NITRO = "nitro"
    TRANSPORT = "transport"
    SOFTWARE = "software"


class Network(Entry):
    """A network adapter generation (ENA, EFA v1-v4, InfiniBand), Nitro card, transport or API."""

    kind: ClassVar[Kind] = Kind.NETWORK
    category: NetworkCategory = Field(description="Adapter, Nitro generation, transport protocol or software API.")
    generation: str | None = Field(None, description="Generation label.")
    max_card_bandwidth_bits_per_s: BitsPerSFigure | None = Field(None, description="Fastest card of this kind.")
    rdma_read: Flag | None = Field(None, description="Supports RDMA read.")
    rdma_write: Flag | None = Field(None, description="Supports RDMA write.")
    gpudirect_rdma: Flag | None = Field(None, description="The NIC reads and writes GPU memory directly.")
    os_bypass: Flag | None = Field(None, description="User space talks to the device without the kernel.")
    reliable: Flag | None = Field(None, description="The transport retransmits lost packets.")
    in_order_delivery: Flag | None = Field(None, description="Packets are delivered in order.")
    multipath: Flag | None = Field(None, description="One connection's packets take many paths.")
    latency_s: SecondsFigure | None = Field(None, description="Small-message latency where one is published.")
    nccl_ll_protocols: Flag | None = Field(
        None, description="NCCL's LL/LL128 protocols may cross this adapter (128-byte writes arrive in order)."
    )
    facts: tuple[Fact, ...] = Field((), description="Other sourced facts.")


# --- instances --------------------------------------------------------------------------------


class IntraNodeTopology(StrEnum):
    NVSWITCH = "nvswitch"
    TORUS_2D = "torus_2d"
    PCIE = "pcie"


class IntraNodeFabric(Record):
    """How the devices of one instance are joined."""

    topology: IntraNodeTopology = Field(description="NVSwitch crossbar, NeuronLink 2D torus, or PCIe only.")
    link: str = Field(description="Link id.")
    switch: str | None = Field(None, description="Switch id, for NVSwitch systems.")
    num_switches: CountFigure | None = Field(None, description="Switch chips.")
    domain: str | None = Field(None, description="Domain id of the scale-up domain this instance forms.")


class NetworkAttachment(Record):
    """The instance's scale-out network: cards x speed."""

    adapter: str = Field(description="Network id of the adapter generation (e.g. 'efa-v2').")
    num_cards: CountFigure = Field(description="Network cards usable by the scale-out fabric.")
    card_bandwidth_bits_per_s: BitsPerSFigure = Field(description="Each card.")
    total_bandwidth_bits_per_s: BitsPerSFigure = Field(description="All cards.")
    nitro: str | None = Field(None, description="Network id of the Nitro generation.")
    gpudirect_rdma: Flag = Field(description="GPUDirect RDMA between accelerator and NIC.")

    @model_validator(mode="after")
    def _check_total(self) -> NetworkAttachment:
        product = self.num_cards.value * self.card_bandwidth_bits_per_s.value
        total = self.total_bandwidth_bits_per_s.value
        if total > 0 and abs(product / total - 1) > 0.01:
            raise ValueError(
                f"total_bandwidth_bits_per_s ({total:.4g}) must equal num_cards x card_bandwidth ({product:.4g})"
            )
        return self


class LocalStorage(Record):
    """Local NVMe drives."""

    num_drives: CountFigure = Field(description="Drives.")
    drive_bytes: BytesFigure = Field(description="Capacity of each drive.")


class Provider(StrEnum):
    AWS = "aws"
    REFERENCE = "reference"


class Instance(Entry):
    """A server: an EC2 instance type or the reference server of a published run."""

    kind: ClassVar[Kind] = Kind.INSTANCE
    provider: Provider = Field(description="'aws' for EC2 types, 'reference' for published-run servers.")
    accelerator: str = Field(description="Accelerator id.")
    num_accelerators: CountFigure = Field(description="Accelerators per instance.")
    vcpus: CountFigure | None = Field(None, description="Virtual CPUs.")
    host_memory_bytes: BytesFigure | None = Field(None, description="Host memory.")
    intra_node: IntraNodeFabric = Field(description="Scale-up fabric inside the instance.")
    network: NetworkAttachment = Field(description="Scale-out network.")
    local_nvme: LocalStorage | None = Field(None, description="Instance-store NVMe.")
    on_demand: Price | None = Field(None, description="On-demand price; usd_per_hour null = no on-demand offer.")
    capacity_block: Price | None = Field(None, description="EC2 Capacity Block price; null = no such offer.")


# --- clusters ---------------------------------------------------------------------------------


class FabricTopology(StrEnum):
    FAT_TREE = "fat_tree"


class ClusterGeneration(Record):
    """One generation of a cluster template: which instance, how many accelerators at most."""

    instance: str = Field(description="Instance id.")
    max_accelerators: CountFigure = Field(description="Largest published cluster of this generation.")


class Cluster(Entry):
    """A cluster template that topology code builds from (the EC2 UltraCluster)."""

    kind: ClassVar[Kind] = Kind.CLUSTER
    provider: Provider = Field(description="Who runs it.")
    topology: FabricTopology = Field(description="Network topology.")
    oversubscription: CountFigure = Field(description="Uplink oversubscription ratio; 1 = non-blocking.")
    network_layers: CountFigure | None = Field(None, description="Switch layers above the instance.")
    placement: str = Field(description="How instances are placed (e.g. 'cluster placement group').")
    availability_zones: CountFigure = Field(description="Availability zones the cluster spans.")
    generations: tuple[ClusterGeneration, ...] = Field(min_length=1, description="Instance generations.")
    facts: tuple[Fact, ...] = Field((), description="Other sourced facts.")


ENTRY_TYPES: dict[Kind, type[Entry]] = {
    Kind.ACCELERATOR: Accelerator,
    Kind.LINK: Link,
    Kind.SWITCH: Switch,
    Kind.DOMAIN: Domain,
    Kind.NETWORK: Network,
    Kind.INSTANCE: Instance,
    Kind.STORAGE: Storage,
    Kind.CLUSTER: Cluster,
}

# Fields that name another entry, by kind of the entry that names it: (dotted field, kind named).
REFERENCES: dict[Kind, tuple[tuple[str, Kind], ...]] = {
    Kind.ACCELERATOR: (("scaleup_link", Kind.LINK), ("host_link", Kind.LINK)),
    Kind.SWITCH: (("link", Kind.LINK),),
    Kind.DOMAIN: (("accelerator", Kind.ACCELERATOR), ("link", Kind.LINK), ("switch", Kind.SWITCH)),
    Kind.INSTANCE: (
        ("accelerator", Kind.ACCELERATOR),
        ("intra_node.link", Kind.LINK),
        ("intra_node.switch", Kind.SWITCH),
        ("intra_node.domain", Kind.DOMAIN),
        ("network.adapter", Kind.NETWORK),
        ("network.nitro", Kind.NETWORK),
    ),
    Kind.STORAGE: (("service", Kind.STORAGE),),
    Kind.CLUSTER: (("generations.instance", Kind.INSTANCE),),
}
