"""A checkpoint's size, save and load on a file system (each bound beside the one that binds), its
modes side by side, and a striping sweep, as JSON and as rich tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import RenderableType
from rich.table import Table

from clustersim.present.figures import figure
from clustersim.storage import burst
from clustersim.storage.checkpoint import CheckpointTiming, Transfer
from clustersim.storage.fsx import FileSystem
from clustersim.storage.layouts import Extent
from clustersim.units import format_bytes, format_bytes_per_s, format_seconds


def _layout_text(layout: tuple[Extent, ...]) -> str:
    parts = []
    for extent in layout:
        end = "EOF" if extent.end_bytes == float("inf") else format_bytes(extent.end_bytes, digits=3)
        parts.append(f"{extent.stripes} to {end}" if len(layout) > 1 else f"{extent.stripes} stripes")
    return ", ".join(parts)


def transfer_json(t: Transfer) -> dict[str, Any]:
    """Time, bound and every bound's rate."""
    return {"time_s": t.time_s, "bound": t.bound, "bounds_bytes_per_s": dict(t.bounds_bytes_per_s)}


def file_system_json(fs: FileSystem) -> dict[str, Any]:
    """The file system's tier, capacity, targets, aggregates and price."""
    return {
        "tier": fs.tier.id,
        "capacity_gib": fs.capacity_gib,
        "efa": fs.efa,
        "num_targets": fs.num_targets,
        "target_gib": fs.target_gib,
        "metadata_iops": fs.metadata_iops,
        "metadata_files_per_s": fs.metadata_files_per_s(),
        "write_bytes_per_s": fs.write_bytes_per_s,
        "read_bytes_per_s": fs.read_bytes_per_s,
        "burst_write_bytes_per_s": fs.burst_write_bytes_per_s,
        "network_bytes_per_s": fs.network_bytes_per_s,
        "price_usd_per_hour": fs.price_usd_per_hour,
    }


BURST_SEQUENCE = 6  # saves shown draining the bucket


def burst_json(timing: CheckpointTiming, interval_s: float) -> dict[str, Any] | None:
    """The credit bucket, the first save from a full bucket, and saves repeated every ``interval_s``."""
    bucket, first, repeated = timing.bucket, timing.first_save, timing.save_at(interval_s)
    if bucket is None or first is None or repeated is None:
        return None
    idle = timing.idle_s_at(interval_s)
    return {
        "bucket_bytes": bucket.capacity_bytes,
        "burst_bytes_per_s": bucket.burst_rate_bytes_per_s,
        "base_rate_bytes_per_s": bucket.base_rate_bytes_per_s,
        "first_save_s": first.time_s,
        "first_burst_fraction": first.burst_fraction,
        "interval_s": interval_s,
        "repeated_save_s": repeated.time_s,
        "repeated_burst_fraction": repeated.burst_fraction,
        "sequence_save_s": [s.time_s for s in burst.sequence(bucket, timing.checkpoint_bytes, idle, BURST_SEQUENCE)],
    }


def checkpoint_json(
    timing: CheckpointTiming, fs: FileSystem, modes: dict[str, CheckpointTiming], interval_s: float = 3600.0
) -> dict[str, Any]:
    """The issue's keys (checkpoint_bytes, save_s, load_s, bound) and the detail behind them."""
    return {
        "checkpoint_bytes": timing.checkpoint_bytes,
        "save_s": timing.save.time_s,
        "load_s": timing.load.time_s,
        "bound": timing.save.bound,
        "save_at_burst_s": timing.save_at_burst.time_s,
        "burst": burst_json(timing, interval_s),
        "stall_s": timing.stall_s,
        "stall_bound": timing.bound,
        "drain_s": timing.drain_s,
        "format": timing.fmt.value,
        "pattern": timing.pattern.value,
        "mode": timing.mode.value,
        "path": timing.path.value,
        "num_files": timing.num_files,
        "num_nodes": timing.num_nodes,
        "layout": [
            {"end_bytes": e.end_bytes if e.end_bytes != float("inf") else None, "stripes": e.stripes}
            for e in timing.layout
        ],
        "save": transfer_json(timing.save),
        "load": transfer_json(timing.load),
        "file_system": file_system_json(fs),
        "modes": {name: {"stall_s": t.stall_s, "drain_s": t.drain_s, "bound": t.bound} for name, t in modes.items()},
    }


def checkpoint_view(
    timing: CheckpointTiming, fs: FileSystem, modes: dict[str, CheckpointTiming], model: str, interval_s: float = 3600.0
) -> list[RenderableType]:
    """A headline, the save and load bounds, and the modes side by side."""
    head = (
        f"{model}: checkpoint {format_bytes(timing.checkpoint_bytes, binary=False)} ({timing.fmt.value}), "
        f"{timing.num_files:,} files ({timing.pattern.value}) from {timing.num_nodes:,} instances over "
        f"{timing.path.value} to {fs.describe()}, layout {_layout_text(timing.layout)}"
    )
    bounds = Table(title="bounds (the lowest binds)", caption="rates in bytes/s")
    bounds.add_column("bound")
    bounds.add_column("save", justify="right")
    bounds.add_column("load", justify="right")
    for name in timing.save.bounds_bytes_per_s:
        marks = [
            format_bytes_per_s(t.bounds_bytes_per_s[name]) + (" *" if t.bound == name else "")
            for t in (timing.save, timing.load)
        ]
        bounds.add_row(name, *marks)
    bounds.add_row("time", format_seconds(timing.save.time_s), format_seconds(timing.load.time_s))
    if timing.save_at_burst.time_s < timing.save.time_s:
        bounds.add_row("save at burst", format_seconds(timing.save_at_burst.time_s), "", end_section=False)
    lines: list[RenderableType] = []
    detail = burst_json(timing, interval_s)
    prior = fs.service.burst_credit_s
    if detail is not None and prior is not None:
        full = format_bytes(detail["bucket_bytes"], binary=False)
        lines.append(
            f"burst credits (a prior: {format_seconds(prior.value)} at the burst rate when full, {full}): "
            f"the first save takes {format_seconds(detail['first_save_s'])} "
            f"({detail['first_burst_fraction']:.0%} at burst); every {format_seconds(interval_s)} of work the "
            f"bucket settles at {format_seconds(detail['repeated_save_s'])} per save "
            f"({detail['repeated_burst_fraction']:.0%} at burst)"
        )
    table = Table(title="what training waits for, by mode")
    for column in ("mode", "stall", "bound", "background drain"):
        table.add_column(column, justify="left" if column in ("mode", "bound") else "right")
    for name, t in modes.items():
        table.add_row(name, format_seconds(t.stall_s), t.bound, format_seconds(t.drain_s) if t.drain_s else "-")
    return [head, bounds, *lines, table]


def striping_json(fs: FileSystem, sweep: list[Transfer], path: str) -> dict[str, Any]:
    """One row per stripe count."""
    return {
        "file_system": file_system_json(fs),
        "path": path,
        "file_bytes": sweep[0].num_bytes if sweep else 0.0,
        "rows": [
            {"stripes": i, "bytes_per_s": t.bytes_per_s, "time_s": t.time_s, "bound": t.bound}
            for i, t in enumerate(sweep, start=1)
        ],
    }


def striping_view(fs: FileSystem, sweep: list[Transfer], path: str) -> list[RenderableType]:
    """The rows where the rate or the bound changes: linear in stripes until a named bound stops it."""
    table = Table(title=f"one client, one file, over {path}: {fs.describe()}")
    for column in ("stripes", "rate", "time", "bound"):
        table.add_column(column, justify="left" if column == "bound" else "right")
    previous = None
    for i, t in enumerate(sweep, start=1):
        shown = i in (1, 2, 4, 8, 16, 32, 64, len(sweep)) or t.bound != previous
        if shown:
            table.add_row(str(i), format_bytes_per_s(t.bytes_per_s), format_seconds(t.time_s), t.bound)
        previous = t.bound
    return [table]


def plot_checkpoint(data: dict[str, Any], model: str, path: Path) -> None:
    """``storage checkpoint --json`` drawn: each bound's rate for the save and the load (the binding one
    darker), and per mode what training waits for beside the background drain, each bar labelled."""
    import numpy as np

    with figure(path, ncols=2, figsize=(12, 4.5)) as (_, (bounds, modes)):
        names = list(data["save"]["bounds_bytes_per_s"])
        y = np.arange(len(names))
        for offset, key in ((-0.2, "save"), (0.2, "load")):
            transfer = data[key]
            rates = [transfer["bounds_bytes_per_s"][n] / 1e9 for n in names]
            drawn = bounds.barh(y + offset, rates, height=0.4, label=f"{key} ({transfer['time_s']:.3g} s)",
                                color="#4C72B0" if key == "save" else "#DD8452")  # fmt: skip
            for name, patch in zip(names, drawn.patches, strict=True):
                patch.set_gid(f"{key}-{name}")
                patch.set_alpha(1.0 if name == transfer["bound"] else 0.45)
        bounds.set_yticks(y, names)
        bounds.set_xscale("log")
        bounds.set_xlabel("GB/s (the lowest binds, drawn solid)")
        size_tb = data["checkpoint_bytes"] / 1e12
        bounds.set_title(f"{model}: {size_tb:.3g} TB checkpoint, {data['num_files']:,} files")
        bounds.legend(fontsize="small")
        mode_names = list(data["modes"])
        y = np.arange(len(mode_names))
        for offset, key, color in ((-0.2, "stall_s", "#C44E52"), (0.2, "drain_s", "#8FB1D9")):
            values = [data["modes"][m][key] for m in mode_names]
            drawn = modes.barh(y + offset, values, height=0.4, color=color, label=key)
            for name, value, patch in zip(mode_names, values, drawn.patches, strict=True):
                patch.set_gid(f"{key}-{name}")
                modes.annotate(f"{value:.3g} s", (value, patch.get_y() + 0.2), xytext=(3, 0),
                               textcoords="offset points", va="center", fontsize="small")  # fmt: skip
        modes.set_yticks(y, [f"{m} ({data['modes'][m]['bound']})" for m in mode_names])
        modes.set_xlabel("seconds per checkpoint")
        longest = max((data["modes"][m][k] for m in mode_names for k in ("stall_s", "drain_s")), default=0.0)
        modes.set_xlim(0, 1.18 * longest if longest > 0 else 1.0)
        modes.set_title("training's stall and the background drain, by mode")
        modes.legend(fontsize="small")


def plot_striping(data: dict[str, Any], path: Path) -> None:
    """``storage striping --json`` drawn: one client's rate against the stripe count, coloured by the bound."""
    rows = data["rows"]
    with figure(path, figsize=(8, 4.5)) as (_, ax):
        ax.plot([r["stripes"] for r in rows], [r["bytes_per_s"] / 1e9 for r in rows], color="#888888", lw=0.8)
        for bound in dict.fromkeys(r["bound"] for r in rows):
            mine = [r for r in rows if r["bound"] == bound]
            ax.plot([r["stripes"] for r in mine], [r["bytes_per_s"] / 1e9 for r in mine], "o", markersize=4,
                    label=bound, gid=f"bound-{bound}")  # fmt: skip
        ax.set_xlabel("stripes")
        ax.set_ylabel("GB/s, one client")
        ax.set_title(f"one {data['file_bytes'] / 1e9:.3g} GB file over {data['path']}")
        ax.legend(fontsize="small")
