"""The catalog's storage entries: a shared file system service (FSx for Lustre), its deployment tiers,
and an instance's local NVMe."""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import ClassVar

from pydantic import Field, model_validator

from clustersim.catalog.entry import Entry
from clustersim.catalog.figures import (
    BitsPerSFigure,
    BytesFigure,
    BytesPerSFigure,
    Choices,
    Confidence,
    CountFigure,
    Fact,
    Flag,
    Provenance,
    Record,
    SecondsFigure,
)
from clustersim.catalog.kinds import Kind

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
        caps, iops = self.metadata_automatic_capacities_gib, self.metadata_automatic_iops
        if caps is not None and iops is not None and len(caps.values) != len(iops.values):
            raise ValueError(
                f"metadata_automatic_iops: {len(iops.values)} values for the {len(caps.values)} capacities of "
                "metadata_automatic_capacities_gib (one IOPS figure a capacity)"
            )
        return self
