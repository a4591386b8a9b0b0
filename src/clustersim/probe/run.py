"""One probe of this machine: resolve the options, run each measurement in turn, report progress, and
gather the results (and the collective cases) for the command line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.probe.collectives import (
    COLLECTIVES,
    CollectivePlan,
    CollectiveResult,
    backend_of,
    measure_collectives,
    under_torchrun,
)
from clustersim.probe.device import Device, default_device, describe, require_torch
from clustersim.probe.gemm import GemmResult, measure_gemm
from clustersim.probe.memory import COPIES, BandwidthResult, measure_copies, measure_memory
from clustersim.probe.options import Plan, ProbeOptions, resolve
from clustersim.probe.storage import StorageResult, check_directory, measure_storage
from clustersim.probe.tables import probe_cases, table_text

Progress = Callable[[int, int], None]


@dataclass
class ProbeResult:
    """What one probe measured; ``skipped`` says what did not run and why."""

    device: Device
    plan: Plan
    gemm: list[GemmResult] = field(default_factory=list)
    memory: list[BandwidthResult] = field(default_factory=list)
    copies: list[BandwidthResult] = field(default_factory=list)
    collectives: list[CollectiveResult] = field(default_factory=list)
    storage: list[StorageResult] = field(default_factory=list)
    software_version: str = ""

    def collective_lines(self) -> list[str]:
        """The collectives as nccl-tests' tables, one after the other."""
        return [
            line
            for result in self.collectives
            for line in table_text(
                result, torch_version=self.device.torch_version, warmup=self.plan.warmup, repeats=self.plan.repeats
            )
        ]

    def as_dict(self) -> dict[str, Any]:
        """The whole result for ``--json`` (rates in GB/s and TFLOP/s, times in seconds unless named _us)."""
        collectives = []
        for result in self.collectives:
            rows = []
            for row in result.rows:
                time_us, algbw, busbw = result.bandwidths(row)
                rows.append(
                    {
                        "size_bytes": row.size_bytes,
                        "count": row.count,
                        "time_us": time_us,
                        "algbw_GBps": algbw,
                        "busbw_GBps": busbw,
                        "time": row.stats.as_dict(),
                    }
                )
            hosts = sorted({host for host, _, _ in result.placement})
            collectives.append(
                {"op": result.op.value, "ranks": result.ranks, "backend": result.backend, "hosts": hosts, "rows": rows}
            )
        return {
            "device": self.device.as_dict(),
            "software": self.software_version,
            "measured": list(self.plan.what),
            "skipped": self.plan.skipped,
            "repeats": self.plan.repeats,
            "warmup": self.plan.warmup,
            "gemm": [r.as_dict() for r in self.gemm],
            "memory": [r.as_dict() for r in self.memory],
            "copy": [r.as_dict() for r in self.copies],
            "collectives": collectives,
            "storage": [r.as_dict() for r in self.storage],
        }

    def cases(self, options: ProbeOptions, catalog: Catalog) -> list[dict[str, Any]]:
        """The collective cases of the run, the system from ``options.system`` or the machine."""
        system = options.system
        notes = "" if self.device.kind == "cuda" else f"ranks were CPU processes ({self.device.name}), not GPUs"
        return probe_cases(
            self.collectives,
            system,
            catalog,
            torch_version=self.device.torch_version,
            software_version=self.software_version,
            warmup=self.plan.warmup,
            repeats=self.plan.repeats,
            notes=notes,
        )


def check_cases_system(device: Device, plan: Plan, options: ProbeOptions, catalog: Catalog) -> None:
    """Before anything runs: cases need a catalogued accelerator (the GPU's own, or on the CPU the one
    ``--accelerator`` or ``--instance`` names, the system the cases are scored as), and local ranks run on
    one server, all of ``--instance``'s devices (a torchrun launch is checked against the hosts it finds)."""
    system = options.system
    if options.output is None:
        return
    if device.kind == "cpu" and system.instance is None and system.accelerator is None:
        raise ClusterSimError(
            "-o: a CPU run has no catalogued accelerator to name in its cases; give --accelerator ID or "
            "--instance ID (the system the cases are scored as)",
            field="--accelerator",
        )
    if under_torchrun():
        return
    if system.nodes not in (None, 1):
        raise ClusterSimError(
            f"--nodes {system.nodes}: local ranks run on this one server (use torchrun across servers)",
            field="--nodes",
            value=system.nodes,
        )
    if system.instance is not None:
        per_node = int(catalog.instance(system.instance).num_accelerators.value)
        if per_node != plan.ranks:
            raise ClusterSimError(
                f"--instance {system.instance} has {per_node} devices; the cases of {plan.ranks} local ranks would "
                f"not be that server (give --ranks {per_node}, or --accelerator)",
                field="--instance",
                value=system.instance,
            )


def _steps(plan: Plan) -> int:
    counts = {
        "gemm": len(plan.dtypes) * len(plan.gemm_sizes),
        "memory": 2,
        "copy": len(COPIES),
        "collectives": len(COLLECTIVES) * len(plan.sizes_bytes),
        "storage": plan.warmup + plan.repeats,
    }
    return sum(counts[w] for w in plan.what)


def _software(torch: Any, device: Device) -> str:
    version = f"torch {device.torch_version} {backend_of(device.kind)}"
    if device.kind == "cuda":
        nccl = ".".join(str(part) for part in torch.cuda.nccl.version())
        version += f" (NCCL {nccl}, CUDA {torch.version.cuda})"
    return version


def run_probe(options: ProbeOptions, catalog: Catalog, progress: Progress | None = None) -> ProbeResult | None:
    """Measure this machine as ``options`` say; None on a torchrun rank other than 0 (rank 0 reports)."""
    torch = require_torch()
    device = describe(torch, options.device or default_device(torch), catalog, options.system.accelerator)
    plan = resolve(options, device)
    if options.system.accelerator is not None:
        catalog.accelerator(options.system.accelerator)  # an unknown id is refused before anything runs
    if "storage" in plan.what and options.path is not None:
        check_directory(options.path)
    check_cases_system(device, plan, options, catalog)
    result = ProbeResult(device, plan, software_version=_software(torch, device))
    total, done = _steps(plan), 0

    def step() -> None:
        nonlocal done
        done += 1
        if progress is not None:
            progress(done, total)

    timing = {"warmup": plan.warmup, "repeats": plan.repeats}
    if "collectives" in plan.what:  # first: under torchrun every rank waits in it for the others
        collective_plan = CollectivePlan(
            COLLECTIVES, plan.sizes_bytes, plan.warmup, plan.repeats, device.kind, backend_of(device.kind), plan.ranks
        )
        measured = measure_collectives(torch, collective_plan, step)
        if measured is None:
            return None
        result.collectives = measured
    if "gemm" in plan.what:
        result.gemm = measure_gemm(torch, device, plan.dtypes, plan.gemm_sizes, step=step, **timing)
    if "memory" in plan.what:
        result.memory = measure_memory(torch, device, plan.buffer_bytes, step=step, **timing)
    if "copy" in plan.what:
        result.copies = measure_copies(torch, device, plan.buffer_bytes, step=step, **timing)
    if "storage" in plan.what and options.path is not None:
        result.storage = measure_storage(options.path, plan.writers, plan.file_bytes, step=step, **timing)
    return result
