"""The catalog's entry types: accelerators, links, switches, scale-up domains, network parts,
instances, storage and cluster templates. Every number is a sourced ``Figure``."""

from __future__ import annotations

import datetime as dt
import math
import re
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from clustersim.catalog.figures import (
    Basis,
    BitsPerSFigure,
    BytesFigure,
    BytesPerSFigure,
    Choices,
    Confidence,
    CountFigure,
    Fact,
    Figure,
    Flag,
    FlopPerSFigure,
    Price,
    Provenance,
    Record,
    SecondsFigure,
    WattsFigure,
)
from clustersim.catalog.kinds import Dtype as Dtype  # re-exported; defined stdlib-only for the command line
from clustersim.catalog.kinds import Kind as Kind

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Count figures that are whole numbers (the others, such as oversubscription, are ratios).
_WHOLE = ("vcpus", "max_accelerators", "availability_zones", "network_layers")
_AT_LEAST_ONE = ("oversubscription",)


def _check_numbers(item: Any, path: str) -> None:
    """Every figure of an entry is a positive finite number (a zero bandwidth or device count would turn
    every estimate into inf or nan), counts are whole, prices and choices finite and positive."""
    name = path.rsplit(".", 1)[-1].split("[")[0]
    if isinstance(item, Figure):
        if not (math.isfinite(item.value) and item.value > 0):
            raise ValueError(f"{path}: must be a positive number, got {item.value:g}")
        whole = name.startswith("num_") or name in _WHOLE
        if isinstance(item, CountFigure) and whole and item.value != int(item.value):
            raise ValueError(f"{path}: must be a whole number, got {item.value:g}")
        if name in _AT_LEAST_ONE and item.value < 1:
            raise ValueError(f"{path}: must be at least 1 (1 = non-blocking), got {item.value:g}")
    elif isinstance(item, Price):
        if item.usd_per_hour is not None and not math.isfinite(item.usd_per_hour):
            raise ValueError(f"{path}.usd_per_hour: must be a finite price, got {item.usd_per_hour!r}")
    elif isinstance(item, Choices):
        if not all(math.isfinite(v) and v > 0 for v in item.values):
            raise ValueError(f"{path}.values: must be positive finite numbers, got {list(item.values)!r}")
    elif isinstance(item, BaseModel):
        for field, value in item:
            _check_numbers(value, f"{path}.{field}" if path else field)
    elif isinstance(item, dict):
        for key, value in item.items():
            _check_numbers(value, f"{path}.{getattr(key, 'value', key)}")
    elif isinstance(item, tuple):
        for index, value in enumerate(item):
            _check_numbers(value, f"{path}[{index}]")


def _require_basis(figure: Figure | None, basis: Basis, field: str) -> None:
    if figure is not None and figure.basis not in (None, basis):
        raise ValueError(f"{field} must be a {basis.value} figure, got basis {figure.basis.value!r}")


class Entry(Record):
    """Fields every catalog entry has."""

    kind: ClassVar[Kind]
    id: str = Field(description="Unique lowercase id, e.g. 'h100-sxm'.")
    name: str = Field(min_length=2, description="Human-readable name.")
    aliases: tuple[str, ...] = Field((), description="Other names that find this entry (case-insensitive).")
    description: str | None = Field(None, description="One sentence on what this is.")
    notes: tuple[str, ...] = Field((), description="Commonly quoted figures that differ from ours, and why.")
    preliminary: bool = Field(False, description="Announced, not yet shipped or measured figures.")

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("an id is lowercase letters, digits, '.', '_' and '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _check_figures(self) -> Entry:
        _check_numbers(self, "")
        return self

    def figures(self) -> dict[str, Figure]:
        """Every top-level figure of the entry by field name (nested ones are reached by ``describe``)."""
        return {name: value for name, value in self if isinstance(value, Figure)}


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
    tdp_watts: WattsFigure | None = Field(None, description="Maximum board power.")
    mig_instances: CountFigure | None = Field(None, description="Multi-Instance GPU partitions (up to).")
    num_cores: CountFigure | None = Field(None, description="Compute cores per device (NeuronCores on Trainium).")
    core_type: str | None = Field(None, description="Core type, e.g. 'NeuronCore-v3'.")
    scaleup_link: str | None = Field(None, description="Link id of the scale-up fabric (NVLink, NeuronLink).")
    scaleup_bandwidth_per_direction_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="Scale-up bandwidth per device, each direction."
    )
    scaleup_bandwidth_bidirectional_bytes_per_s: BytesPerSFigure | None = Field(
        None, description="Scale-up bandwidth per device as vendors quote it (both directions)."
    )

    @model_validator(mode="after")
    def _check_bases(self) -> Accelerator:
        for dtype, figure in self.dense_flop_per_s.items():
            _require_basis(figure, Basis.DENSE, f"dense_flop_per_s.{dtype.value}")
        for dtype, figure in self.sparse_flop_per_s.items():
            _require_basis(figure, Basis.SPARSE, f"sparse_flop_per_s.{dtype.value}")
        _require_basis(
            self.scaleup_bandwidth_per_direction_bytes_per_s, Basis.PER_DIRECTION, "scaleup_bandwidth_per_direction"
        )
        _require_basis(
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


class Link(Entry):
    """A scale-up or host link generation (NVLink 4, NeuronLink v3, PCIe Gen5 x16)."""

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
        _require_basis(
            self.per_link_bandwidth_per_direction_bytes_per_s, Basis.PER_DIRECTION, "per_link_bandwidth_per_direction"
        )
        _require_basis(
            self.per_device_bandwidth_per_direction_bytes_per_s,
            Basis.PER_DIRECTION,
            "per_device_bandwidth_per_direction",
        )
        _require_basis(
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


# --- storage ----------------------------------------------------------------------------------


class StorageCategory(StrEnum):
    SERVICE = "service"
    TIER = "tier"
    LOCAL = "local"


class DeploymentType(StrEnum):
    SCRATCH_1 = "SCRATCH_1"
    SCRATCH_2 = "SCRATCH_2"
    PERSISTENT_1 = "PERSISTENT_1"
    PERSISTENT_2 = "PERSISTENT_2"


class StorageClass(StrEnum):
    SSD = "ssd"
    HDD = "hdd"


class StripeLayout(Record):
    """A default file layout (Lustre striping) and when it applies."""

    applies_to: str = Field(description="Which file systems use it, e.g. 'created after 2020-12-18'.")
    spec: str = Field(description="The layout as `lfs setstripe` arguments.")
    source: str = Field(min_length=3, description="Citation.")
    confidence: str = Field("verified", description="verified, secondary or recalled.")


class StoragePrice(Record):
    """A storage price per GB-month (AWS bills provisioned capacity by the GB-month, prorated by the second)."""

    usd_per_gb_month: float = Field(gt=0, description="US dollars per GB (GiB as AWS bills it) of capacity per month.")
    as_of: dt.date = Field(description="Date the price was read.")
    region: str = Field(min_length=3, description="AWS region the price applies to.")
    source: str = Field(min_length=3, description="Citation.")
    provenance: Provenance = Field(Provenance.PRICE_LIST, description="Kind of source.")
    confidence: Confidence = Field(Confidence.VERIFIED, description="How well the figure was checked.")
    note: str | None = Field(None, description="Caveat.")


class Storage(Entry):
    """A shared file system service (client ceilings, striping), one of its deployment tiers, or an
    instance's local NVMe ('local': per-drive rates; the instance gives the drives).

    Per-TiB figures (``*_per_tib``) scale with the provisioned capacity in TiB.
    """

    kind: ClassVar[Kind] = Kind.STORAGE
    category: StorageCategory = Field(description="'service' (client limits, layout) or 'tier'.")
    service: str | None = Field(None, description="For a tier: the service id.")
    deployment_type: DeploymentType | None = Field(None, description="FSx for Lustre deployment type.")
    storage_class: StorageClass | None = Field(None, description="SSD or HDD.")
    per_unit_storage_throughput_bytes_per_s_per_tib: BytesPerSFigure | None = Field(
        None, description="The tier's label (PerUnitStorageThroughput), MB/s per TiB."
    )
    network_baseline_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Network baseline.")
    network_burst_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Network burst.")
    disk_baseline_read_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Disk baseline, read.")
    disk_baseline_write_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Disk baseline, write.")
    disk_burst_read_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Disk burst, read.")
    disk_burst_write_bytes_per_s_per_tib: BytesPerSFigure | None = Field(None, description="Disk burst, write.")
    cache_memory_bytes_per_tib: BytesFigure | None = Field(None, description="Server RAM cache per TiB.")
    metadata_iops_options: Choices | None = Field(None, description="Provisionable metadata IOPS.")
    metadata_ops_per_iops: CountFigure | None = Field(None, description="File creates/opens/closes per s per IOPS.")
    metadata_automatic_capacities_gib: Choices | None = Field(None, description="Automatic mode: capacities, GiB.")
    metadata_automatic_iops: Choices | None = Field(None, description="Automatic mode: IOPS at those capacities.")
    burst_credit_s: SecondsFigure | None = Field(None, description="Seconds a full credit bucket sustains the burst.")
    efa_storage_per_server_bytes: BytesFigure | None = Field(None, description="EFA-enabled: storage per server.")
    min_capacity_bytes: BytesFigure | None = Field(None, description="Smallest file system.")
    capacity_increment_bytes: BytesFigure | None = Field(None, description="Capacity step.")
    replicated: Flag | None = Field(None, description="Data is replicated within the AZ (durability).")
    efa_supported: Flag | None = Field(None, description="Clients may reach it over EFA.")
    ena_client_bits_per_s: BitsPerSFigure | None = Field(None, description="Ceiling of one ENA client.")
    ena_connection_bits_per_s: BitsPerSFigure | None = Field(None, description="One client-to-server connection.")
    efa_client_bits_per_s: BitsPerSFigure | None = Field(None, description="Ceiling of one EFA client.")
    efa_gds_client_bits_per_s: BitsPerSFigure | None = Field(
        None, description="Ceiling of one EFA client with GPUDirect Storage."
    )
    default_stripe_size_bytes: BytesFigure | None = Field(None, description="Default Lustre stripe size.")
    storage_target_bytes: BytesFigure | None = Field(None, description="Approximate size of one OST.")
    default_layouts: tuple[StripeLayout, ...] = Field((), description="Default striping layouts by creation date.")
    price: StoragePrice | None = Field(None, description="Capacity price (tiers).")
    drive_read_bytes_per_s: BytesPerSFigure | None = Field(None, description="Local NVMe: a drive, sequential read.")
    drive_write_bytes_per_s: BytesPerSFigure | None = Field(None, description="Local NVMe: a drive, sequential write.")
    facts: tuple[Fact, ...] = Field((), description="Other sourced facts.")

    @model_validator(mode="after")
    def _check_category(self) -> Storage:
        if self.category is StorageCategory.TIER and (self.service is None or self.deployment_type is None):
            raise ValueError("a tier needs 'service' and 'deployment_type'")
        return self


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
    Kind.ACCELERATOR: (("scaleup_link", Kind.LINK),),
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
