"""Checkpoints: their size from the model and the optimizer layout, and the time to save and load them
on an FSx for Lustre file system or the instances' local NVMe, naming the bound that binds.

Size (bytes per parameter, the model's exact parameter count, ``Transformer.num_params``):

* ``megatron``: Megatron-LM and NeMo distributed checkpoints (torch_dist) hold the 16-bit weights (2)
  and the optimizer's FP32 master weights, Adam momentum and variance (12), as ``compute/memory.py``
  keeps them: 14 bytes; the FP32 gradients are not saved. ZeRO sharding changes who writes, not the size.
* ``torch-dcp``: torch.distributed.checkpoint of an FSDP model with FP32 sharded parameters and
  Adam: 4 + 8 = 12 bytes.
* ``weights``: the 16-bit weights only (an inference export): 2 bytes.

Write pattern: ``per-rank`` (each rank writes its share to its own file, as DCP and Megatron's fully
parallel save do) or ``aggregated`` (one rank gathers and writes one file). A save runs at the lowest of

* ``clients``: the writing instances x one client's ceiling on the path (ENA, EFA, EFA+GDS);
* ``stripes``: the files x each file's rate, its extents' stripes x one stripe's rate (at most every
  target once);
* ``file system``: the aggregate baseline of the file system;
* ``metadata``: the files over the file system's metadata rate (PERSISTENT_2: a file created and closed
  per metadata IOPS; 16,384 files on 1,500 IOPS take 11 s);
* ``local NVMe``: instead of the four above, instances x drives x a drive's rate.

Where the tier bursts (``storage/burst.py``), a save runs at the burst figures while credits last: the
first save from a full bucket, and saves repeated at an interval settle where the gap refills what each
spends (``CheckpointTiming.save_at``).

Synchronous saves stall training for the whole save; ``async`` stalls for the copy to host memory (each device
over its own host link, at what copies reach: ``clustersim.system.host_copy_bytes_per_s``) and
drains to the file system in the background; ``nvme`` stalls for the local write and drains to the file
system in the background. A drain longer than the interval delays the next checkpoint by the excess.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from clustersim.catalog.schema import Accelerator, Instance, Storage
from clustersim.compute.memory import OPTIMIZER_BYTES, WEIGHT_BYTES
from clustersim.errors import ClusterSimError
from clustersim.storage import burst as credits
from clustersim.storage.burst import BurstSave, CreditBucket
from clustersim.storage.fsx import ClientPath, FileSystem, client_path_for, default_layout
from clustersim.storage.layouts import Extent
from clustersim.workload.transformer import Transformer


class CheckpointFormat(StrEnum):
    """What a checkpoint holds (see the module docstring)."""

    MEGATRON = "megatron"
    TORCH_DCP = "torch-dcp"
    WEIGHTS = "weights"


# FP32 master weights and Adam moments: the optimizer state of compute/memory.py (12 bytes); FSDP keeps
# its sharded parameters in FP32, so DCP saves no separate 16-bit copy.
BYTES_PER_PARAM = {
    CheckpointFormat.MEGATRON: WEIGHT_BYTES + OPTIMIZER_BYTES,
    CheckpointFormat.TORCH_DCP: OPTIMIZER_BYTES,
    CheckpointFormat.WEIGHTS: WEIGHT_BYTES,
}


class WritePattern(StrEnum):
    """A file per rank, or one file written by one rank."""

    PER_RANK = "per-rank"
    AGGREGATED = "aggregated"


class SaveMode(StrEnum):
    """How training waits for a checkpoint."""

    SYNC = "sync"
    ASYNC = "async"
    NVME = "nvme"


def checkpoint_bytes(model: Transformer, fmt: CheckpointFormat = CheckpointFormat.MEGATRON) -> float:
    """Bytes of one checkpoint of ``model`` in ``fmt``."""
    return float(model.num_params()) * BYTES_PER_PARAM[fmt]


@dataclass(frozen=True)
class Transfer:
    """Moving ``num_bytes``: the time, the binding bound and every bound's rate."""

    num_bytes: float
    time_s: float
    bound: str
    bounds_bytes_per_s: dict[str, float]

    @property
    def bytes_per_s(self) -> float:
        """The achieved rate (the binding bound)."""
        return self.bounds_bytes_per_s[self.bound]


def transfer(num_bytes: float, bounds: dict[str, float]) -> Transfer:
    """``num_bytes`` at the lowest of ``bounds`` (the first named wins a tie)."""
    bound = min(bounds, key=lambda name: bounds[name])
    return Transfer(num_bytes=num_bytes, time_s=num_bytes / bounds[bound], bound=bound, bounds_bytes_per_s=bounds)


def file_rate(
    fs: FileSystem, file_bytes: float, layout: tuple[Extent, ...], path: ClientPath, *, write: bool, burst: bool = False
) -> float:
    """One file's rate: its bytes over the time its extents take, each at its stripes x a stripe's rate."""
    stripe = fs.stripe_bytes_per_s(path, write=write, burst=burst)
    seconds = 0.0
    for extent in layout:
        part = max(0.0, min(file_bytes, extent.end_bytes) - extent.start_bytes)
        seconds += part / (fs.stripes_of(extent) * stripe)
    return file_bytes / seconds


def fsx_transfer(
    fs: FileSystem,
    num_bytes: float,
    *,
    num_files: int,
    num_clients: int,
    layout: tuple[Extent, ...],
    path: ClientPath,
    instance: Instance | None,
    write: bool,
    burst: bool = False,
) -> Transfer:
    """``num_bytes`` in ``num_files`` equal files from ``num_clients`` instances to or from ``fs`` (a write
    at the file system's burst rate with ``burst``, while its credits last)."""
    fs.check_path(path)
    file_bytes = num_bytes / num_files
    # Files spread over the targets: together they never use more than every target once.
    stripes = min(
        num_files * file_rate(fs, file_bytes, layout, path, write=write, burst=burst),
        fs.num_targets * fs.target_bytes_per_s(write=write, burst=burst),
    )
    bounds = {
        "file system": fs.aggregate_bytes_per_s(write=write, burst=burst),
        "clients": num_clients * fs.client_bytes_per_s(path, instance),
        "stripes": stripes,
    }
    files_per_s = fs.metadata_files_per_s()
    if files_per_s is not None:
        bounds["metadata"] = num_bytes * files_per_s / num_files
    return transfer(num_bytes, bounds)


def nvme_bytes_per_s(instance: Instance, drive: Storage, *, write: bool) -> float:
    """An instance's local NVMe: drives x a drive's sequential rate."""
    figure = drive.drive_write_bytes_per_s if write else drive.drive_read_bytes_per_s
    if instance.local_nvme is None:
        raise ClusterSimError(f"{instance.id} has no local NVMe in the catalog", field="instance", value=instance.id)
    if figure is None:
        name = "drive_write_bytes_per_s" if write else "drive_read_bytes_per_s"
        raise ClusterSimError(
            f"local NVMe drive {drive.id} has no {name} in the catalog, so its {'writes' if write else 'reads'} cannot "
            "be timed",
            field="nvme",
            value=drive.id,
        )
    return instance.local_nvme.num_drives.value * figure.value


@dataclass(frozen=True)
class CheckpointTiming:
    """One checkpoint's size, layout, save and load, and what training waits for."""

    checkpoint_bytes: float
    fmt: CheckpointFormat
    pattern: WritePattern
    mode: SaveMode
    path: ClientPath
    num_files: int
    num_nodes: int
    layout: tuple[Extent, ...]
    save: Transfer  # to the file system
    save_at_burst: Transfer  # the same at the file system's burst rate (while credits last; = save without burst)
    load: Transfer  # from the file system, on restart
    local: Transfer | None  # to local NVMe (mode nvme)
    host_copy_s: float  # device to host memory (mode async)
    bucket: CreditBucket | None = None  # the file system's burst credits (None: no burst above the baseline)

    @property
    def first_save(self) -> BurstSave | None:
        """The save from a full credit bucket (None without burst credits)."""
        if self.bucket is None:
            return None
        return credits.save(self.bucket, self.checkpoint_bytes, self.bucket.capacity_bytes)

    def save_at(self, interval_s: float) -> BurstSave | None:
        """The save repeated every ``interval_s`` of work, once the bucket has settled (None without burst
        credits). The file system is idle for the interval (sync) or what the drain leaves of it."""
        if self.bucket is None:
            return None
        return credits.steady(self.bucket, self.checkpoint_bytes, self.idle_s_at(interval_s))

    def idle_s_at(self, interval_s: float) -> float:
        """Seconds the file system rests between saves ``interval_s`` of work apart (refilling credits)."""
        return interval_s if self.mode is SaveMode.SYNC else max(0.0, interval_s + self.stall_s - self.save.time_s)

    def save_time_at(self, interval_s: float) -> float:
        """The time to reach the file system per save at ``interval_s`` (the baseline without credits)."""
        repeated = self.save_at(interval_s)
        return self.save.time_s if repeated is None else repeated.time_s

    @property
    def stall_s(self) -> float:
        """Training time lost to one checkpoint when its drain keeps up."""
        if self.mode is SaveMode.ASYNC:
            return self.host_copy_s
        if self.mode is SaveMode.NVME:
            assert self.local is not None
            return self.local.time_s
        return self.save.time_s

    @property
    def drain_s(self) -> float:
        """Background time to reach the file system after the stall (0 when synchronous)."""
        return 0.0 if self.mode is SaveMode.SYNC else self.save.time_s

    def stall_at(self, interval_s: float) -> float:
        """The stall per checkpoint at ``interval_s`` of work between them, with the settled burst: a
        synchronous save's time, or the stall plus what a drain longer than the interval holds back."""
        if self.mode is SaveMode.SYNC:
            return self.save_time_at(interval_s)
        return self.stall_s + max(0.0, self.save_time_at(interval_s) - interval_s)

    @property
    def bound(self) -> str:
        """What limits the save training waits for."""
        if self.mode is SaveMode.ASYNC:
            return "host copy"
        if self.mode is SaveMode.NVME:
            assert self.local is not None
            return self.local.bound
        return self.save.bound


def plan_checkpoint(
    model: Transformer,
    fs: FileSystem,
    *,
    instance: Instance | None,
    num_nodes: int,
    devices_per_node: int,
    fmt: CheckpointFormat = CheckpointFormat.MEGATRON,
    pattern: WritePattern = WritePattern.PER_RANK,
    mode: SaveMode = SaveMode.SYNC,
    path: ClientPath | None = None,
    stripes: int | None = None,
    nvme: Storage | None = None,
    accelerator: Accelerator | None = None,
    host_copy_bytes_per_s: float | None = None,
) -> CheckpointTiming:
    """The checkpoint of ``model`` on ``num_nodes`` instances writing to ``fs`` (see the module docstring).

    ``path`` defaults to EFA with GPUDirect Storage where the tier allows EFA and ``accelerator`` (GPUs)
    and ``instance`` (GPUDirect RDMA) can take it, plain EFA where only the tier can, else ENA; a path
    they cannot take is refused (``fsx.client_path_for``); ``stripes``
    replaces the file system's default (progressive) layout with that many stripes per file.
    With ``instance`` and ``accelerator``, a checkpoint larger than the nodes' device and host memory
    together (what any layout, offloading included, can hold) is refused. ``host_copy_bytes_per_s``: a device's
    copy to host memory, each way (``clustersim.system.device_host_copy_bytes_per_s``); mode ``async`` needs it.
    """
    for name, count in (("nodes", num_nodes), ("devices_per_node", devices_per_node)):
        if count < 1:
            raise ClusterSimError(f"{name}: must be at least 1, got {count}", field=name, value=count)
    model.check_unquantized("a checkpoint")
    size = checkpoint_bytes(model, fmt)
    _check_nodes_hold(size, fmt, instance, num_nodes, accelerator)
    path = client_path_for(fs, path, accelerator, instance)
    if stripes is not None:
        fs.check_stripes(stripes)
    layout = (Extent(0.0, math.inf, stripes),) if stripes is not None else default_layout(fs.service)
    per_rank = pattern is WritePattern.PER_RANK
    num_files = num_nodes * devices_per_node if per_rank else 1
    clients = num_nodes if per_rank else 1
    save_ = fsx_transfer(
        fs, size, num_files=num_files, num_clients=clients, layout=layout, path=path, instance=instance, write=True
    )
    save_at_burst = fsx_transfer(
        fs, size, num_files=num_files, num_clients=clients, layout=layout, path=path, instance=instance, write=True,
        burst=True,
    )  # fmt: skip
    load = fsx_transfer(
        fs, size, num_files=num_files, num_clients=num_nodes, layout=layout, path=path, instance=instance, write=False
    )
    per_node = size / clients
    host = None if instance is None or instance.host_memory_bytes is None else instance.host_memory_bytes.value
    if not per_rank and host is not None and size > host:
        raise ClusterSimError(
            f"pattern aggregated: one instance gathers the whole {size / 2**30:,.0f} GiB checkpoint, more than the "
            f"{host / 2**30:,.0f} GiB host memory of {instance.id if instance else ''}; write a file per rank",
            field="pattern",
            value=pattern.value,
        )
    local = None
    if mode is SaveMode.NVME:
        if instance is None:
            raise ClusterSimError(
                "mode nvme: a local NVMe checkpoint needs a catalogued instance with local NVMe", field="mode",
                value=mode.value,
            )  # fmt: skip
        if nvme is None:
            raise ClusterSimError(
                "mode nvme: no local NVMe drive entry to time the write with (the catalog's storage of category "
                "'local', instance-nvme)",
                field="mode",
                value=mode.value,
            )
        drives = instance.local_nvme
        room = 0.0 if drives is None else drives.num_drives.value * drives.drive_bytes.value
        if per_node > room:
            fits = f"; use at least {math.ceil(size / room)} nodes or" if per_rank and room > 0 else ""
            raise ClusterSimError(
                f"mode nvme: {per_node / 1e9:,.1f} GB per instance does not fit its {room / 1e9:,.1f} GB of NVMe"
                f"{fits or ';'} save to the file system (sync or async)",
                field="mode",
                value=mode.value,
            )
        local = transfer(size, {"local NVMe": clients * nvme_bytes_per_s(instance, nvme, write=True)})
    if mode is SaveMode.ASYNC and host is not None and per_node > host / 2:
        raise ClusterSimError(
            f"mode async: a {per_node / 2**30:,.1f} GiB host copy per instance needs more than half of the "
            f"{host / 2**30:,.0f} GiB host memory of {instance.id if instance else ''}; use more nodes or a "
            f"synchronous save",
            field="mode",
            value=mode.value,
        )
    writers = num_nodes * devices_per_node if per_rank else 1
    if mode is SaveMode.ASYNC and host_copy_bytes_per_s is None:
        device = accelerator.id if accelerator is not None else "the device"
        raise ClusterSimError(
            f"mode async: no host link is recorded for {device}, so its copy to host memory cannot be timed; save "
            f"synchronously, to local NVMe, or give the accelerator a host_link in a catalog overlay",
            field="mode",
            value=mode.value,
        )
    host_copy_s = 0.0 if host_copy_bytes_per_s is None else size / writers / host_copy_bytes_per_s
    return CheckpointTiming(
        checkpoint_bytes=size, fmt=fmt, pattern=pattern, mode=mode, path=path, num_files=num_files,
        num_nodes=num_nodes, layout=layout, save=save_, save_at_burst=save_at_burst, load=load, local=local,
        host_copy_s=host_copy_s, bucket=credit_bucket(fs, save_, save_at_burst),
    )  # fmt: skip


def _check_nodes_hold(
    size: float,
    fmt: CheckpointFormat,
    instance: Instance | None,
    num_nodes: int,
    accelerator: Accelerator | None,
) -> None:
    """Refuse a checkpoint whose state does not fit in the nodes' device and host memory together (the
    most any layout, offloading included, can hold while it saves or after it loads)."""
    if instance is None or accelerator is None:
        return
    chips, chip_bytes = int(instance.num_accelerators.value), accelerator.memory_bytes.value
    host = 0.0 if instance.host_memory_bytes is None else instance.host_memory_bytes.value
    per_node = chips * chip_bytes + host
    if size <= num_nodes * per_node:
        return
    needed = math.ceil(size / per_node)
    raise ClusterSimError(
        f"nodes: {num_nodes} x {instance.id} hold {num_nodes * per_node / 2**40:,.2f} TiB ({chips} x "
        f"{chip_bytes / 2**30:,.0f} GiB device + {host / 2**30:,.0f} GiB host memory each), less than the "
        f"{size / 2**40:,.2f} TiB {fmt.value} checkpoint ({BYTES_PER_PARAM[fmt]:g} B/param); use at least {needed} "
        f"nodes",
        field="nodes",
        value=num_nodes,
    )


def credit_bucket(fs: FileSystem, baseline: Transfer, at_burst: Transfer) -> CreditBucket | None:
    """The file system's burst credits for a save (None where it publishes no burst above the baseline or
    the catalog has no bucket prior)."""
    prior = fs.service.burst_credit_s
    extra = fs.burst_write_bytes_per_s - fs.write_bytes_per_s
    if prior is None or extra <= 0.0 or at_burst.bytes_per_s <= baseline.bytes_per_s:
        return None
    return CreditBucket(
        capacity_bytes=extra * prior.value,
        baseline_bytes_per_s=fs.write_bytes_per_s,
        burst_rate_bytes_per_s=at_burst.bytes_per_s,
        base_rate_bytes_per_s=baseline.bytes_per_s,
    )


def striping_sweep(
    fs: FileSystem, file_bytes: float, path: ClientPath, instance: Instance | None, *, write: bool = True
) -> list[Transfer]:
    """One client writing (reading) one file at 1, 2, ... targets' stripes: the rate rises by one stripe's
    rate each step until the client's ceiling stops it."""
    fs.check_path(path)
    out = []
    for count in range(1, fs.num_targets + 1):
        layout = (Extent(0.0, math.inf, count),)
        out.append(
            transfer(
                file_bytes,
                {
                    "file system": fs.write_bytes_per_s if write else fs.read_bytes_per_s,
                    "clients": fs.client_bytes_per_s(path, instance),
                    "stripes": file_rate(fs, file_bytes, layout, path, write=write),
                },
            )
        )
    return out
