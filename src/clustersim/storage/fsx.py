"""An FSx for Lustre file system from the catalog: capacity, storage targets, aggregate throughput,
client ceilings by path, and file layouts (stripe count, progressive layouts).

AWS's rules, as the catalog records them (``catalog/data/storage.toml``):

* capacity is provisioned in GiB, at the deployment type's minimum, twice it, or a multiple of its
  increment (SSD: 1,200, 2,400, then steps of 2,400 GiB);
* per-TiB rates scale with ``capacity_gib / 1000`` (AWS's provisioning "TiB" is 1,000 GiB);
* writes and uncached reads run at the lower of the network and disk figures, cached reads at the
  network figure; burst figures hold while credits last (``storage/burst.py``);
* the file system has one storage target (OST) per ~1,200 GiB, each with an equal share of the
  aggregate; a file striped over ``c`` targets writes at most ``c`` shares; an EFA-enabled
  file system (PERSISTENT_2, set at creation) has one file server per 4.8 to 38.4 TiB by tier, grows
  in those steps, and the model gives it one target per server;
* metadata: PERSISTENT_2 file systems have metadata IOPS (Automatic mode: by capacity; or provisioned),
  each worth two file creates, opens or closes per second: a file written costs one IOPS;
* burst (``storage/burst.py``): a credit bucket, a prior of 30 minutes at the burst rate when full;
* one client reaches at most 100 Gbps over ENA (5 Gbps per client-to-server connection), 700 Gbps
  over EFA, 1,200 Gbps over EFA with GPUDirect Storage, and never more than its own NICs;
* GPUDirect Storage needs GPUs and the instance's GPUDirect RDMA (``PATH_NEEDS``): it is refused on
  Trainium, and the default path there is plain EFA (ENA where the file system is not EFA-enabled).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from clustersim.catalog.figures import BitsPerSFigure
from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator, Instance, Storage, StorageCategory
from clustersim.errors import ClusterSimError, UnitError, UnknownNameError
from clustersim.storage.layouts import Extent, parse_layout
from clustersim.units import parse_bytes

GIB = 2**30
AWS_TIB_GIB = 1000.0  # AWS scales per-TiB throughput by StorageCapacity_GiB / 1000 (see storage.toml notes)
SERVICE = "fsx-lustre"


class ClientPath(StrEnum):
    """How a client reaches the file system."""

    ENA = "ena"
    EFA = "efa"
    EFA_GDS = "efa-gds"


@dataclass(frozen=True)
class PathNeeds:
    """What a client path needs of the client instance: its accelerator family and GPUDirect RDMA."""

    accelerator_families: tuple[str, ...]
    gpudirect_rdma: bool
    source: str


# The client paths that are not open to every instance, and what they need (the others need nothing).
PATH_NEEDS: dict[ClientPath, PathNeeds] = {
    ClientPath.EFA_GDS: PathNeeds(
        accelerator_families=("ampere", "hopper", "blackwell"),
        gpudirect_rdma=True,
        source="GPUDirect Storage is NVIDIA's direct path between storage and GPU memory (cuFile and the "
        "nvidia-fs driver; NVIDIA GPUDirect Storage overview guide), over the NIC's GPUDirect RDMA; FSx for "
        "Lustre supports it from EFA-enabled file systems to NVIDIA GPU instances (AWS FSx for Lustre User "
        "Guide, EFA-enabled file systems: P5-class instances with GDS). Trainium has no GPU memory for cuFile "
        "and the Neuron SDK has no GDS path: its clients read over EFA into host memory.",
    )
}


def path_refusal(path: ClientPath, accelerator: Accelerator | None, instance: Instance | None) -> str | None:
    """Why ``path`` cannot run on ``instance`` with ``accelerator`` (None: it can, or what is unknown is not
    held against it)."""
    needs = PATH_NEEDS.get(path)
    if needs is None:
        return None
    where = instance.id if instance is not None else "this instance"
    if accelerator is not None and accelerator.family not in needs.accelerator_families:
        return (
            f"path {path.value!r}: GPUDirect Storage moves data into GPU memory, and {where} has "
            f"{accelerator.id} ({accelerator.family}) accelerators, not GPUs (GDS runs on "
            f"{', '.join(needs.accelerator_families)}); use efa or ena"
        )
    if needs.gpudirect_rdma and instance is not None and not instance.network.gpudirect_rdma.value:
        return (
            f"path {path.value!r}: GPUDirect Storage needs GPUDirect RDMA, which the catalog does not give "
            f"{instance.id} (network.gpudirect_rdma); use efa or ena"
        )
    return None


def client_path_for(
    fs: FileSystem, path: ClientPath | None, accelerator: Accelerator | None, instance: Instance | None
) -> ClientPath:
    """The client path: ``path`` where the file system and the instance can take it (else an error naming
    both); none given, EFA with GPUDirect Storage where both can, plain EFA where the file system is
    EFA-enabled (Trainium, or no GPUDirect RDMA), else ENA."""
    if path is None:
        if not fs.efa:
            return ClientPath.ENA
        gds = path_refusal(ClientPath.EFA_GDS, accelerator, instance) is None
        return ClientPath.EFA_GDS if gds else ClientPath.EFA
    fs.check_path(path)
    why = path_refusal(path, accelerator, instance)
    if why is not None:
        raise ClusterSimError(why, field="path", value=path.value)
    return path


@dataclass(frozen=True)
class FileSystem:
    """A provisioned FSx for Lustre file system of one deployment tier."""

    tier: Storage
    service: Storage
    capacity_gib: float
    efa: bool = False  # created EFA-enabled (PERSISTENT_2 only)
    provisioned_metadata_iops: float | None = None  # None: Automatic mode, by capacity

    @property
    def capacity_bytes(self) -> float:
        """Provisioned capacity, bytes."""
        return self.capacity_gib * GIB

    @property
    def scale(self) -> float:
        """Multiplier of the per-TiB rates: capacity in AWS's provisioning TiB (1,000 GiB)."""
        return self.capacity_gib / AWS_TIB_GIB

    @property
    def target_gib(self) -> float:
        """Size of one storage target: ~1,200 GiB, or an EFA-enabled tier's storage per file server."""
        if self.efa and self.tier.efa_storage_per_server_bytes is not None:
            return self.tier.efa_storage_per_server_bytes.value / GIB
        target = self.service.storage_target_bytes
        return target.value / GIB if target else 1200.0

    @property
    def num_targets(self) -> int:
        """Storage targets (OSTs), one per ``target_gib`` (at least one)."""
        return max(1, round(self.capacity_gib / self.target_gib))

    @property
    def metadata_iops(self) -> float | None:
        """Metadata IOPS: as provisioned, or Automatic mode's for the capacity; None where the tier has no
        metadata configuration (all but PERSISTENT_2)."""
        if self.tier.metadata_iops_options is None:
            return None
        if self.provisioned_metadata_iops is not None:
            return self.provisioned_metadata_iops
        caps, iops = self.service.metadata_automatic_capacities_gib, self.service.metadata_automatic_iops
        if caps is None or iops is None:
            return None
        if self.capacity_gib >= caps.values[-1]:  # past the last threshold: in proportion, whole steps of 12,000
            per_step_gib = caps.values[-1] * 12000.0 / iops.values[-1]
            return 12000.0 * math.floor(self.capacity_gib / per_step_gib + 1e-9)
        below = [n for cap, n in zip(caps.values, iops.values, strict=True) if cap <= self.capacity_gib + 1e-9]
        return below[-1] if below else iops.values[0]

    def metadata_files_per_s(self, ops_per_file: int = 2) -> float | None:
        """Files created and closed (or opened and closed) per second: IOPS x operations per IOPS / 2."""
        iops = self.metadata_iops
        per = self.service.metadata_ops_per_iops
        return None if iops is None or per is None else iops * per.value / ops_per_file

    def _rate(self, name: str) -> float | None:
        figure = getattr(self.tier, name)
        return None if figure is None else float(figure.value) * self.scale

    @property
    def network_bytes_per_s(self) -> float:
        """Aggregate network baseline."""
        rate = self._rate("network_baseline_bytes_per_s_per_tib")
        if rate is None:
            raise ClusterSimError(
                f"storage tier {self.tier.id} has no network_baseline_bytes_per_s_per_tib in the catalog",
                field="storage",
                value=self.tier.id,
            )
        return rate

    @property
    def write_bytes_per_s(self) -> float:
        """Aggregate baseline for writes: the lower of network and disk."""
        disk = self._rate("disk_baseline_write_bytes_per_s_per_tib")
        return self.network_bytes_per_s if disk is None else min(self.network_bytes_per_s, disk)

    @property
    def read_bytes_per_s(self) -> float:
        """Aggregate baseline for uncached reads: the lower of network and disk."""
        disk = self._rate("disk_baseline_read_bytes_per_s_per_tib")
        return self.network_bytes_per_s if disk is None else min(self.network_bytes_per_s, disk)

    @property
    def burst_write_bytes_per_s(self) -> float:
        """Aggregate burst for writes while credits last (the baseline where no burst is published)."""
        network = self._rate("network_burst_bytes_per_s_per_tib") or self.network_bytes_per_s
        disk = self._rate("disk_burst_write_bytes_per_s_per_tib") or self._rate(
            "disk_baseline_write_bytes_per_s_per_tib"
        )
        return network if disk is None else min(network, disk)

    def aggregate_bytes_per_s(self, *, write: bool, burst: bool = False) -> float:
        """The file system's aggregate for writes or uncached reads, at the baseline or (writes) the burst."""
        if burst and write:
            return self.burst_write_bytes_per_s
        return self.write_bytes_per_s if write else self.read_bytes_per_s

    def target_bytes_per_s(self, *, write: bool, burst: bool = False) -> float:
        """One storage target's share of the aggregate."""
        return self.aggregate_bytes_per_s(write=write, burst=burst) / self.num_targets

    @property
    def price_usd_per_hour(self) -> float | None:
        """Capacity price per hour (a month is 730 hours, as AWS prorates), if catalogued."""
        price = self.tier.price
        return None if price is None else price.usd_per_gb_month * self.capacity_gib / 730.0

    def _client_ceilings(self) -> dict[ClientPath, BitsPerSFigure | None]:
        return {
            ClientPath.ENA: self.service.ena_client_bits_per_s,
            ClientPath.EFA: self.service.efa_client_bits_per_s,
            ClientPath.EFA_GDS: self.service.efa_gds_client_bits_per_s,
        }

    def client_bytes_per_s(self, path: ClientPath, instance: Instance | None) -> float:
        """One client's ceiling on ``path``, never above the instance's own NICs."""
        ceilings = self._client_ceilings()
        figure = ceilings[path]
        if figure is None:
            known = [p.value for p, f in ceilings.items() if f is not None]
            raise ClusterSimError(
                f"path {path.value!r}: {self.service.id} has no client ceiling for it in the catalog (paths with one: "
                f"{', '.join(known) or 'none'})",
                field="path",
                value=path.value,
            )
        bits = figure.value
        if instance is not None:
            bits = min(bits, instance.network.total_bandwidth_bits_per_s.value)
        return bits / 8

    def stripe_bytes_per_s(self, path: ClientPath, *, write: bool, burst: bool = False) -> float:
        """What one stripe of a file carries: a target's share, and on ENA one 5 Gbps connection."""
        rate = self.target_bytes_per_s(write=write, burst=burst)
        connection = self.service.ena_connection_bits_per_s
        if path is ClientPath.ENA and connection is not None:
            rate = min(rate, connection.value / 8)
        return rate

    def check_path(self, path: ClientPath) -> None:
        """EFA (with or without GDS) needs a file system created EFA-enabled (PERSISTENT_2)."""
        if path is not ClientPath.ENA and not self.efa:
            hint = (
                f"create it EFA-enabled (fsx:{self.tier.aliases[0]}:CAPACITY:efa)"
                if self.tier.efa_supported and self.tier.efa_supported.value
                else "only PERSISTENT_2 file systems created EFA-enabled can be"
            )
            raise ClusterSimError(
                f"path {path.value!r}: this {self.tier.name} file system is not EFA-enabled; {hint}, or use --path ena",
                field="path",
                value=path.value,
            )

    def stripes_of(self, extent: Extent) -> int:
        """An extent's stripe count on this file system (-1 or more than the targets: all targets)."""
        return self.num_targets if extent.stripes == -1 else min(extent.stripes, self.num_targets)

    def check_stripes(self, stripes: int) -> None:
        """A stripe count the file system can hold."""
        if not 1 <= stripes <= self.num_targets:
            raise ClusterSimError(
                f"stripes: {stripes} is not between 1 and the {self.num_targets} storage targets of this "
                f"{self.capacity_gib:,.0f} GiB file system (one per ~{self.target_gib:,.0f} GiB)",
                field="stripes",
                value=stripes,
            )

    def describe(self) -> str:
        """E.g. 'FSx for Lustre PERSISTENT_2 1000 MB/s/TiB, 100,800 GiB (84 targets)'."""
        efa = ", EFA-enabled" if self.efa else ""
        return f"{self.tier.name}, {self.capacity_gib:,.0f} GiB{efa} ({self.num_targets} targets)"


def default_layout(service: Storage) -> tuple[Extent, ...]:
    """The newest default layout the service records (file systems created after August 2023)."""
    if not service.default_layouts:
        return (Extent(0.0, math.inf, 1),)
    return parse_layout(service.default_layouts[-1].spec)


def _tiers(catalog: Catalog) -> list[Storage]:
    return [e for e in catalog.list("storage") if isinstance(e, Storage) and e.category is StorageCategory.TIER]


def tier_by_name(catalog: Catalog, name: str) -> Storage:
    """A tier by id or alias (``PERSISTENT_2-1000``, ``fsx-scratch-2``)."""
    tiers = _tiers(catalog)
    wanted = name.strip().lower().replace("_", "-")
    for tier in tiers:
        names = [tier.id, *tier.aliases]
        if any(wanted == n.lower().replace("_", "-") for n in names):
            return tier
    raise UnknownNameError("storage_tier", name, sorted(a for t in tiers for a in t.aliases[:1]))


def check_capacity(tier: Storage, capacity_gib: float) -> None:
    """AWS's valid capacities: the minimum, twice it, or a multiple of the increment at or above it."""
    low = tier.min_capacity_bytes.value / GIB if tier.min_capacity_bytes else 1200.0
    step = tier.capacity_increment_bytes.value / GIB if tier.capacity_increment_bytes else low
    if capacity_gib < low - 1e-6:
        raise ClusterSimError(
            f"capacity {_gib(capacity_gib)} GiB is below the {tier.name} minimum of {low:,.0f} GiB",
            field="capacity",
            value=capacity_gib,
        )
    whole = abs(capacity_gib - round(capacity_gib)) < 1e-6
    if whole and (round(capacity_gib) in (round(low), round(2 * low)) or round(capacity_gib) % round(step) == 0):
        return
    # the valid sizes either side: the minimum, twice it, and the multiples of the step from the minimum up
    valid = (low, 2 * low, math.floor(capacity_gib / step) * step, math.ceil(capacity_gib / step) * step)
    below = max((v for v in valid if low <= v <= capacity_gib), default=low)
    above = min(v for v in valid if v >= capacity_gib)
    raise ClusterSimError(
        f"capacity {capacity_gib:,.2f} GiB is off the {tier.name} sizes ({low:,.0f} GiB, {2 * low:,.0f} GiB, then "
        f"multiples of {step:,.0f} GiB); nearest valid: {below:,.0f} GiB or {above:,.0f} GiB",
        field="capacity",
        value=capacity_gib,
    )


def _gib(value: float) -> str:
    """A capacity as a message shows it: whole GiB, or two decimals where it is not whole."""
    return f"{value:,.0f}" if abs(value - round(value)) < 1e-6 else f"{value:,.2f}"


def check_efa(tier: Storage, capacity_gib: float) -> None:
    """An EFA-enabled file system: a PERSISTENT_2 tier, in whole file servers of the tier's size."""
    if not (tier.efa_supported and tier.efa_supported.value) or tier.efa_storage_per_server_bytes is None:
        raise ClusterSimError(
            f"efa: {tier.name} cannot be created EFA-enabled (only PERSISTENT_2 SSD tiers can)",
            field="efa",
            value=tier.id,
        )
    step = tier.efa_storage_per_server_bytes.value / GIB
    servers = capacity_gib / step
    if servers < 1 - 1e-9 or abs(servers - round(servers)) > 1e-9:  # the same relative tolerance either side
        below, above = max(step, math.floor(servers) * step), max(step, math.ceil(servers) * step)
        nearest = f"{below:,.0f} GiB" + (f" or {above:,.0f} GiB" if above > below else "")
        raise ClusterSimError(
            f"capacity {_gib(capacity_gib)} GiB: an EFA-enabled {tier.name} file system grows in whole file servers "
            f"of {step:,.0f} GiB; nearest valid: {nearest}",
            field="capacity",
            value=capacity_gib,
        )


def check_metadata_iops(tier: Storage, iops: float) -> None:
    """A provisioned metadata IOPS the tier offers."""
    options = tier.metadata_iops_options
    if options is None or iops not in options.values:
        valid = "none (no metadata configuration)" if options is None else ", ".join(f"{v:g}" for v in options.values)
        raise ClusterSimError(
            f"metadata IOPS {iops:g} is not offered on {tier.name} (valid: {valid})", field="metadata_iops", value=iops
        )


def file_system(
    catalog: Catalog, tier: str, capacity: str | float, *, efa: bool = False, metadata_iops: float | None = None
) -> FileSystem:
    """A file system of ``tier`` and ``capacity`` (bytes, or text such as '100800GiB' or '98.4TiB'),
    EFA-enabled or not, with Automatic (None) or provisioned metadata IOPS."""
    entry = tier_by_name(catalog, tier)
    service = catalog.get(entry.service or SERVICE, "storage")
    assert isinstance(service, Storage)
    try:
        capacity_gib = parse_bytes(capacity) / GIB
    except UnitError as exc:
        raise ClusterSimError(f"capacity: {exc}", field="capacity", value=capacity) from None
    check_capacity(entry, capacity_gib)
    if efa:
        check_efa(entry, capacity_gib)
    if metadata_iops is not None:
        check_metadata_iops(entry, metadata_iops)
    return FileSystem(
        tier=entry, service=service, capacity_gib=capacity_gib, efa=efa, provisioned_metadata_iops=metadata_iops
    )


def parse_storage(catalog: Catalog, spec: str) -> FileSystem:
    """``fsx:TIER:CAPACITY[:efa][:mdiops=N]``, e.g. ``fsx:PERSISTENT_2-1000:100800GiB:efa``."""
    parts = spec.split(":")
    usage = "expected fsx:TIER:CAPACITY[:efa][:mdiops=N], e.g. fsx:PERSISTENT_2-1000:100800GiB:efa"
    if not 3 <= len(parts) <= 5 or parts[0].lower() != "fsx":
        raise ClusterSimError(f"storage {spec!r}: {usage}", field="storage", value=spec)
    efa, iops = False, None
    for extra in parts[3:]:
        word = extra.strip().lower()
        if word == "efa" and not efa:
            efa = True
        elif word.startswith("mdiops=") and iops is None:
            try:
                iops = float(word.removeprefix("mdiops="))
            except ValueError:
                raise ClusterSimError(
                    f"storage {spec!r}: {extra!r} is not mdiops=NUMBER (e.g. mdiops=6000)", field="storage", value=spec
                ) from None
        else:
            raise ClusterSimError(
                f"storage {spec!r}: unknown or repeated part {extra!r}; {usage}", field="storage", value=spec
            )
    return file_system(catalog, parts[1], parts[2], efa=efa, metadata_iops=iops)
