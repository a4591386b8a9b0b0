"""What a probe measures and how: the options, their defaults per device, and the checks that refuse bad
input in one line naming the option, the value and what is valid."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.cases import SystemOptions
from clustersim.probe.collectives import under_torchrun
from clustersim.probe.device import Device
from clustersim.probe.gemm import GEMM_DTYPES, gemm_dtypes
from clustersim.units import parse_bytes

_NCCL_TESTS_SIZE = re.compile(r"^(\d+)([KMGTkmgt])$")
_SHORT = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
WHAT = ("gemm", "memory", "copy", "collectives", "storage")
MAX_REPEATS = 100_000
FP8_ALIGNMENT = 16  # torch._scaled_mm: every dimension a multiple of 16


@dataclass(frozen=True)
class Defaults:
    """Sizes and timing that fit the device: small on the CPU, large enough to reach the peaks on a GPU."""

    gemm_sizes: tuple[int, ...]
    sizes_bytes: tuple[int, ...]
    buffer_bytes: int
    file_bytes: int
    repeats: int
    warmup: int


DEFAULTS = {
    "cpu": Defaults((128, 256, 512), tuple(1 << s for s in range(16, 25, 2)), 64 << 20, 64 << 20, 10, 2),
    "cuda": Defaults((1024, 2048, 4096, 8192), tuple(1 << s for s in range(20, 31, 2)), 1 << 30, 256 << 20, 20, 5),
}
DEFAULT_WRITERS = 4


@dataclass(frozen=True)
class ProbeOptions:
    """The probe's options as given (None: the device's default, or every measurement that applies)."""

    what: tuple[str, ...] | None = None
    device: str | None = None
    ranks: int | None = None
    sizes: tuple[str, ...] | None = None
    gemm_sizes: tuple[int, ...] | None = None
    dtypes: tuple[str, ...] | None = None
    buffer_bytes: str | None = None
    path: Path | None = None
    writers: int | None = None
    file_bytes: str | None = None
    repeats: int | None = None
    warmup: int | None = None
    output: Path | None = None
    system: SystemOptions = field(default_factory=SystemOptions)


@dataclass(frozen=True)
class Plan:
    """The resolved probe: what runs, with which sizes and timing, and why the rest does not."""

    what: tuple[str, ...]
    skipped: dict[str, str]
    ranks: int
    sizes_bytes: tuple[int, ...]
    gemm_sizes: tuple[int, ...]
    dtypes: tuple[str, ...]
    buffer_bytes: int
    writers: int
    file_bytes: int
    repeats: int
    warmup: int


def parse_what(items: Sequence[str]) -> tuple[str, ...]:
    """The measurements named (comma lists allowed), in the order of ``WHAT``; an unknown one is refused."""
    named = [part.strip().lower() for item in items for part in item.split(",") if part.strip()]
    for name in named:
        if name not in WHAT:
            raise ClusterSimError(f"--what {name!r}: valid: {', '.join(WHAT)}", field="--what", value=name)
    if not named:
        raise ClusterSimError(f"--what is empty: valid: {', '.join(WHAT)}", field="--what", value="")
    return tuple(w for w in WHAT if w in named)


def positive_bytes(texts: Sequence[str], option: str) -> tuple[int, ...]:
    """Whole positive byte counts from ``4194304``, ``64K`` or ``1M`` (1024-based, as nccl-tests' ``-b``/``-e``
    read them), ``1MiB`` or ``1MB`` (comma lists allowed)."""
    values = []
    for text in (part.strip() for item in texts for part in str(item).split(",") if part.strip()):
        short = _NCCL_TESTS_SIZE.match(text)
        try:
            value = int(short.group(1)) * _SHORT[short.group(2).upper()] if short else parse_bytes(text)
        except ClusterSimError:
            raise ClusterSimError(
                f"{option} {text!r}: not a byte count (e.g. 4096, 64K, 1MiB, 1G)", field=option, value=text
            ) from None
        if value < 1 or value != int(value):
            raise ClusterSimError(f"{option} {text!r}: valid: a whole number of bytes >= 1", field=option, value=text)
        values.append(int(value))
    if not values:
        raise ClusterSimError(f"{option} is empty: give sizes such as 1M,4M,16M", field=option, value="")
    return tuple(values)


def _world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def _default_ranks(device: Device) -> int:
    if under_torchrun():
        return _world_size()
    return device.count if device.kind == "cuda" else 2


def _refuse_unused(options: ProbeOptions, what: tuple[str, ...]) -> None:
    """An option for a measurement that does not run is refused, not dropped."""
    needs = (
        ("--gemm-sizes", options.gemm_sizes, ("gemm",)),
        ("--dtypes", options.dtypes, ("gemm",)),
        ("--buffer-bytes", options.buffer_bytes, ("memory", "copy")),
        ("--sizes", options.sizes, ("collectives",)),
        ("--ranks", options.ranks, ("collectives",)),
        ("-o", options.output, ("collectives",)),
        ("--path", options.path, ("storage",)),
        ("--writers", options.writers, ("storage",)),
        ("--file-bytes", options.file_bytes, ("storage",)),
    )
    for flag, value, wanted in needs:
        if value is not None and not set(wanted) & set(what):
            raise ClusterSimError(
                f"{flag} is for {' or '.join(wanted)}, which --what {','.join(what)} does not run",
                field=flag,
                value=str(value),
            )
    system = options.system
    named: tuple[tuple[str, object], ...] = (
        ("--instance", system.instance),
        ("--nodes", system.nodes),
        ("--inter-node-gbps", system.inter_node_gbps),
    )
    for flag, stated in named:
        if stated is not None and options.output is None:
            raise ClusterSimError(f"{flag} names the system of -o's cases: give -o too", field=flag, value=stated)


def resolve(options: ProbeOptions, device: Device) -> Plan:
    """The ``Plan`` for ``options`` on ``device``, refusing what cannot run there."""
    defaults = DEFAULTS[device.kind]
    asked = parse_what(options.what) if options.what is not None else None
    ranks = options.ranks if options.ranks is not None else _default_ranks(device)
    skipped: dict[str, str] = {}
    if asked is None:
        what = list(WHAT)
        if device.kind == "cpu":
            skipped["copy"] = "not applicable on the CPU: host-device copies need a GPU"
        if ranks < 2:
            skipped["collectives"] = f"{ranks} {device.kind} device: collectives need 2 or more ranks (--ranks)"
        if options.path is None:
            skipped["storage"] = "no --path DIR to write to"
        what = [w for w in what if w not in skipped]
    else:
        what = list(asked)
        if "copy" in what and device.kind == "cpu":
            skipped["copy"] = "not applicable on the CPU: host-device copies need a GPU"
            what.remove("copy")
    _refuse_unused(options, tuple(what) + (("copy",) if "copy" in skipped and asked else ()))
    if "collectives" in what:
        _check_ranks(ranks, device, options.ranks is not None)
    if "storage" in what and options.path is None:
        raise ClusterSimError("--what storage needs --path DIR (where the files are written)", field="--path")
    dtypes = tuple(d.strip().lower() for d in options.dtypes) if options.dtypes else gemm_dtypes(device)
    for dtype in dtypes:
        if dtype not in GEMM_DTYPES:
            raise ClusterSimError(f"--dtypes {dtype!r}: valid: {', '.join(GEMM_DTYPES)}", field="--dtypes", value=dtype)
        if dtype == "fp8" and not device.fp8:
            raise ClusterSimError(
                f"--dtypes fp8: {device.name} has no FP8 matrix multiply (needs a CUDA GPU of compute capability 8.9+)",
                field="--dtypes",
                value=dtype,
            )
    for size in options.gemm_sizes or ():
        if size < 1:
            raise ClusterSimError(f"--gemm-sizes {size}: valid: M = N = K >= 1", field="--gemm-sizes", value=size)
        if "fp8" in dtypes and size % FP8_ALIGNMENT:
            raise ClusterSimError(
                f"--gemm-sizes {size}: fp8 GEMMs (torch._scaled_mm) need M = N = K a multiple of {FP8_ALIGNMENT}",
                field="--gemm-sizes",
                value=size,
            )
    repeats = options.repeats if options.repeats is not None else defaults.repeats
    warmup = options.warmup if options.warmup is not None else defaults.warmup
    if not 1 <= repeats <= MAX_REPEATS:
        raise ClusterSimError(f"--repeats {repeats}: valid: 1 to {MAX_REPEATS}", field="--repeats", value=repeats)
    if not 0 <= warmup <= MAX_REPEATS:
        raise ClusterSimError(f"--warmup {warmup}: valid: 0 to {MAX_REPEATS}", field="--warmup", value=warmup)
    writers = options.writers if options.writers is not None else DEFAULT_WRITERS
    if writers < 1:
        raise ClusterSimError(f"--writers {writers}: valid: 1 or more", field="--writers", value=writers)
    file_bytes = positive_bytes([options.file_bytes], "--file-bytes")[0] if options.file_bytes else defaults.file_bytes
    return Plan(
        what=tuple(what),
        skipped=skipped,
        ranks=ranks,
        sizes_bytes=positive_bytes(options.sizes, "--sizes") if options.sizes else defaults.sizes_bytes,
        gemm_sizes=tuple(options.gemm_sizes) if options.gemm_sizes else defaults.gemm_sizes,
        dtypes=dtypes,
        buffer_bytes=positive_bytes([options.buffer_bytes], "--buffer-bytes")[0]
        if options.buffer_bytes
        else defaults.buffer_bytes,
        writers=writers,
        file_bytes=file_bytes,
        repeats=repeats,
        warmup=warmup,
    )


def _check_ranks(ranks: int, device: Device, given: bool) -> None:
    if ranks < 2:
        raise ClusterSimError(
            f"--ranks {ranks}: collectives need 2 or more ranks" + ("" if given else f" ({device.name}: {ranks})"),
            field="--ranks",
            value=ranks,
        )
    if under_torchrun() and ranks != _world_size():
        raise ClusterSimError(
            f"--ranks {ranks}: this torchrun launch has WORLD_SIZE {_world_size()}", field="--ranks", value=ranks
        )
    if device.kind == "cuda" and not under_torchrun() and ranks > device.count:
        raise ClusterSimError(
            f"--ranks {ranks}: this host has {device.count} GPUs (one rank per GPU; NCCL refuses a GPU twice)",
            field="--ranks",
            value=ranks,
        )
