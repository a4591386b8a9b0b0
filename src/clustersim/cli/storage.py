"""``clustersim storage``: what a checkpoint costs on FSx for Lustre or local NVMe, and how striping
raises one client's throughput until a named bound stops it."""

from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    LightGroup,
    ModelsOption,
    emit_json,
    plot_path,
    print_all,
    user_errors,
    write_figure,
)
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_DEGREE, MAX_NODES

if TYPE_CHECKING:
    from clustersim.storage.checkpoint import CheckpointTiming
    from clustersim.storage.fsx import ClientPath

storage_app = typer.Typer(
    help="Checkpoints and striping on FSx for Lustre and local NVMe.",
    no_args_is_help=True,
    rich_markup_mode=None,
    cls=LightGroup,
)

StorageOption = Annotated[
    str,
    typer.Option(
        "--storage",
        help="fsx:TIER:CAPACITY[:efa][:mdiops=N], e.g. fsx:PERSISTENT_2-1000:100800GiB:efa (AWS's sizes: 1200, "
        "2400, n x 2400 GiB; EFA-enabled: whole file servers, 4800 GiB at 1000 MB/s/TiB; mdiops: provisioned "
        "metadata IOPS, default Automatic).",
    ),
]
PathOption = Annotated[
    str | None,
    typer.Option(
        "--path",
        help="ena, efa or efa-gds (default: efa-gds where the tier allows EFA and the instance has GPUs with "
        "GPUDirect RDMA, efa where only the tier allows it, e.g. on Trainium; else ena).",
    ),
]
InstanceOption = Annotated[str, typer.Option("--instance", help="Instance id, e.g. p5.48xlarge.")]
PlotOption = Annotated[
    Path | None, typer.Option("--plot", callback=plot_path, help="Draw what the command prints (PNG, SVG, PDF).")
]


def _plot(path: Path | None, draw: Callable[[Path], None]) -> None:
    """``--plot``: ``draw(path)``, refused naming --plot when the file cannot be written."""
    if path is not None:
        write_figure(lambda: draw(path), path)
        typer.echo(f"figure written to {path}", err=True)


def _choice(text: str | None, enum: type[StrEnum], flag: str) -> object:
    if text is None:
        return None
    try:
        return enum(text.lower())
    except ValueError:
        valid = ", ".join(e.value for e in enum)
        raise ClusterSimError(f"{flag}: unknown value {text!r} (valid: {valid})", field=flag, value=text) from None


def _path(text: str | None) -> "ClientPath | None":
    from clustersim.storage.fsx import ClientPath

    path = _choice(text, ClientPath, "--path")
    assert path is None or isinstance(path, ClientPath)
    return path


@storage_app.command("checkpoint")
def checkpoint_command(
    model: Annotated[str, typer.Argument(metavar="MODEL", help="Zoo id (e.g. llama3.1-405b) or a model file.")],
    storage: StorageOption = "fsx:PERSISTENT_2-1000:100800GiB:efa",
    instance: InstanceOption = "p5.48xlarge",
    nodes: Annotated[int, typer.Option("--nodes", min=1, max=MAX_NODES, help="Instances writing.")] = 128,
    stripes: Annotated[
        int | None,
        typer.Option("--stripes", min=1, max=MAX_DEGREE, help="Stripes per file (default: the progressive layout)."),
    ] = None,
    async_save: Annotated[
        bool, typer.Option("--async", help="Copy to host memory, then drain to the file system in the background.")
    ] = False,
    nvme: Annotated[
        bool, typer.Option("--nvme", help="Write to local NVMe, then drain to the file system in the background.")
    ] = False,
    path: PathOption = None,
    fmt: Annotated[str, typer.Option("--format", help="megatron (14 B/param), torch-dcp (12) or weights (2).")] = (
        "megatron"
    ),
    pattern: Annotated[str, typer.Option("--pattern", help="per-rank (a file per rank) or aggregated.")] = "per-rank",
    every: Annotated[
        str, typer.Option("--every", help="Work between checkpoints, for the burst credits (e.g. 30min, 2h).")
    ] = "1h",
    models: ModelsOption = None,
    catalog: CatalogOption = None,
    plot: PlotOption = None,
    as_json: JsonOption = False,
) -> None:
    """A checkpoint's size, its save and load time and the bound that binds, and what training waits for
    when saving synchronously, asynchronously or to local NVMe."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.catalog.schema import Storage
    from clustersim.network.topology import check_cluster_size
    from clustersim.storage.checkpoint import CheckpointFormat, SaveMode, WritePattern, plan_checkpoint
    from clustersim.storage.fsx import parse_storage
    from clustersim.system import device_host_copy_bytes_per_s
    from clustersim.units import parse_seconds
    from clustersim.workload import zoo

    with user_errors():
        if async_save and nvme:
            raise ClusterSimError(
                "--async and --nvme: choose one way to take the save off the critical path", field="--nvme", value=True
            )
        cat = load_catalog(catalog or ())
        fs = parse_storage(cat, storage)
        transformer = zoo.load_model(model, extra_dirs=models or ())
        entry = cat.instance(instance)
        check_cluster_size(cat, entry, nodes)
        drive = cat.get("instance-nvme", "storage")
        assert isinstance(drive, Storage)
        save_format = _choice(fmt, CheckpointFormat, "--format")
        write_pattern = _choice(pattern, WritePattern, "--pattern")
        assert isinstance(save_format, CheckpointFormat) and isinstance(write_pattern, WritePattern)
        client_path = _path(path)
        interval_s = parse_seconds(every)
        if not interval_s > 0:
            raise ClusterSimError(f"--every: must be a positive duration, got {every!r}", field="--every", value=every)

        device = cat.accelerator(entry.accelerator)

        def at(mode: SaveMode) -> "CheckpointTiming":
            return plan_checkpoint(
                transformer, fs, instance=entry, num_nodes=nodes, devices_per_node=int(entry.num_accelerators.value),
                fmt=save_format, pattern=write_pattern, mode=mode, path=client_path, stripes=stripes, nvme=drive,
                accelerator=device, host_copy_bytes_per_s=device_host_copy_bytes_per_s(cat, device),
            )  # fmt: skip

        mode = SaveMode.ASYNC if async_save else SaveMode.NVME if nvme else SaveMode.SYNC
        timing = at(mode)
        modes = {}
        for other in SaveMode:
            try:
                modes[other.value] = at(other)
            except ClusterSimError:  # a mode this system cannot take (no NVMe, no room in host memory)
                continue
        from clustersim.present.storage import checkpoint_json, checkpoint_view, plot_checkpoint

        data = checkpoint_json(timing, fs, modes, interval_s)
        _plot(plot, lambda out: plot_checkpoint(data, transformer.name, out))
    if as_json:
        emit_json(data)
        return
    print_all(*checkpoint_view(timing, fs, modes, transformer.name, interval_s))


@storage_app.command("striping")
def striping_command(
    storage: StorageOption = "fsx:PERSISTENT_2-1000:100800GiB:efa",
    instance: InstanceOption = "p5.48xlarge",
    size: Annotated[str, typer.Option("--size", help="The file's size, e.g. 100GiB.")] = "100GiB",
    path: PathOption = None,
    read: Annotated[bool, typer.Option("--read", help="Read the file instead of writing it.")] = False,
    catalog: CatalogOption = None,
    plot: PlotOption = None,
    as_json: JsonOption = False,
) -> None:
    """One client writing (or reading) one file at 1, 2, ... stripes: the rate rises by one storage
    target's share per stripe until the client's ceiling or the file system stops it."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.storage.checkpoint import striping_sweep
    from clustersim.storage.fsx import client_path_for, parse_storage
    from clustersim.units import parse_bytes

    with user_errors():
        cat = load_catalog(catalog or ())
        fs = parse_storage(cat, storage)
        file_bytes = parse_bytes(size)
        if not file_bytes >= 1:
            raise ClusterSimError(f"--size: must be at least 1 byte, got {size!r}", field="--size", value=size)
        entry = cat.instance(instance)
        chosen = client_path_for(fs, _path(path), cat.accelerator(entry.accelerator), entry)
        sweep = striping_sweep(fs, file_bytes, chosen, entry, write=not read)
        from clustersim.present.storage import plot_striping, striping_json, striping_view

        data = striping_json(fs, sweep, chosen.value)
        _plot(plot, lambda out: plot_striping(data, out))
    if as_json:
        emit_json(data)
        return
    print_all(*striping_view(fs, sweep, chosen.value))
