"""A storage benchmark's measured rate (``StorageRun``: what fio's JSON and IOR's summary print) and its
comparison with the FSx for Lustre model (``clustersim.storage.checkpoint.fsx_transfer``).

The case format has no storage kind, so a run is this module's record: one direction (read or write), the
bytes moved, the files they were in, the clients that moved them and the measured aggregate rate in
bytes/s. ``compare_storage`` sets it beside ``fsx_transfer`` on the file system ``--storage`` names
(``fsx:TIER:CAPACITY[:efa]``, as ``clustersim storage`` spells it), over ``--path`` (default: as
``clustersim storage`` picks it) with ``--stripes`` per file (default: the service's newest default layout),
and reports the model's rate, the bound that set it, and model / measured - 1.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Instance
from clustersim.errors import ClusterSimError
from clustersim.storage.checkpoint import fsx_transfer
from clustersim.storage.fsx import ClientPath, client_path_for, default_layout, parse_storage
from clustersim.storage.layouts import Extent

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kKmMgGtTpP]?)(i?[bB]?)\s*$")
_POWERS = {"": 0, "k": 1, "m": 2, "g": 3, "t": 4, "p": 5}


def binary_bytes(text: str | float | int) -> float:
    """Bytes from a size as fio and IOR spell it, k/m/g binary: ``4k``, ``1m``, ``20 MiB``, ``4096B``,
    ``1048576``; None-like or odd text raises ``ValueError`` (the readers turn it into their own error)."""
    if isinstance(text, int | float) and not isinstance(text, bool):
        return float(text)
    found = _SIZE.match(str(text))
    if not found:
        raise ValueError(f"{text!r} is not a size")
    return float(found.group(1)) * float(1024 ** _POWERS[found.group(2).lower()])


@dataclass(frozen=True)
class StorageRun:
    """One measured direction of a storage benchmark: ``op`` read or write, ``total_bytes`` moved in
    ``files`` files by ``clients`` client machines at ``measured_bytes_per_s`` (aggregate); ``details`` what
    the tool printed of its setup (block and transfer sizes, engine, direct I/O, latency percentiles)."""

    path: str
    line: int
    tool: str
    op: str
    measured_bytes_per_s: float
    total_bytes: float
    files: int
    clients: int
    details: dict[str, Any] = field(default_factory=dict)
    notes: tuple[str, ...] = ()

    def record(self) -> dict[str, Any]:
        """The run as JSON-ready fields."""
        return {
            "tool": self.tool,
            "line": self.line,
            "op": self.op,
            "measured_bytes_per_s": self.measured_bytes_per_s,
            "total_bytes": self.total_bytes,
            "files": self.files,
            "clients": self.clients,
            "details": self.details,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class StorageOptions:
    """The command line's file system for the comparison: ``storage`` as ``fsx:TIER:CAPACITY[:efa]``
    (None: no comparison), the client ``path`` and ``stripes`` per file (None: their defaults)."""

    storage: str | None = None
    path: str | None = None
    stripes: int | None = None

    def check(self) -> None:
        """--path and --stripes only mean something beside --storage."""
        for value, flag in ((self.path, "--path"), (self.stripes, "--stripes")):
            if value is not None and self.storage is None:
                raise ClusterSimError(
                    f"{flag} shapes the comparison with a file system; give --storage fsx:TIER:CAPACITY too",
                    field=flag,
                    value=value,
                )


def compare_storage(
    run: StorageRun, options: StorageOptions, catalog: Catalog, instance: Instance | None
) -> dict[str, Any]:
    """``run`` beside ``fsx_transfer`` on ``options.storage``: the same bytes in the same files from the same
    clients, one direction, at the baseline (no burst credits assumed)."""
    if options.storage is None:
        raise ClusterSimError("compare_storage needs --storage fsx:TIER:CAPACITY", field="--storage")
    fs = parse_storage(catalog, options.storage)
    chosen = _client_path(options.path)
    accelerator = catalog.accelerator(instance.accelerator) if instance is not None else None
    client = client_path_for(fs, chosen, accelerator, instance)
    if options.stripes is not None:
        fs.check_stripes(options.stripes)
        layout: tuple[Extent, ...] = (Extent(0.0, float("inf"), options.stripes),)
        layout_text = f"-c {options.stripes}"
    else:
        layout = default_layout(fs.service)
        layout_text = fs.service.default_layouts[-1].spec if fs.service.default_layouts else "-c 1"
    moved = fsx_transfer(
        fs,
        run.total_bytes,
        num_files=run.files,
        num_clients=run.clients,
        layout=layout,
        path=client,
        instance=instance,
        write=run.op == "write",
    )
    model = moved.bytes_per_s
    return {
        "tool": run.tool,
        "op": run.op,
        "file_system": fs.describe(),
        "path": client.value,
        "layout": layout_text,
        "clients": run.clients,
        "files": run.files,
        "measured_bytes_per_s": run.measured_bytes_per_s,
        "model_bytes_per_s": model,
        "bound": moved.bound,
        "bounds_bytes_per_s": dict(moved.bounds_bytes_per_s),
        "error": round(model / run.measured_bytes_per_s - 1, 4) if run.measured_bytes_per_s > 0 else None,
    }


def _client_path(text: str | None) -> ClientPath | None:
    if text is None:
        return None
    try:
        return ClientPath(text.lower())
    except ValueError:
        valid = ", ".join(p.value for p in ClientPath)
        raise ClusterSimError(f"--path: unknown value {text!r} (valid: {valid})", field="--path", value=text) from None


def storage_summary(run: StorageRun, comparison: dict[str, Any] | None) -> str:
    """One line: the measured rate, and the model's beside it where compared."""
    measured = f"{run.tool} {run.op}: measured {run.measured_bytes_per_s / 1e6:,.1f} MB/s"
    shape = (
        f"{run.files} file{'s' if run.files != 1 else ''} from {run.clients} client{'s' if run.clients != 1 else ''}"
    )
    if comparison is None:
        return f"{measured} ({shape}); give --storage fsx:TIER:CAPACITY to compare it with the model"
    error = comparison["error"]
    return (
        f"{measured}, model {comparison['model_bytes_per_s'] / 1e6:,.1f} MB/s"
        + (f" ({error:+.1%})" if error is not None else "")
        + f", bound by {comparison['bound']} ({shape}, {comparison['file_system']}, {comparison['path']})"
    )
