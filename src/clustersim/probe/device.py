"""torch, imported on demand, and the device a probe measures: its kind, name and catalog entry."""

from __future__ import annotations

import platform
import socket
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Accelerator
from clustersim.errors import ClusterSimError
from clustersim.ingest.cases import accelerator_from_name

DEVICES = ("cpu", "cuda")
FP8_MIN_CAPABILITY = (8, 9)  # Ada and Hopper: the first with FP8 tensor cores (torch._scaled_mm needs them)


def require_torch() -> Any:
    """The ``torch`` module, or one line naming the extra that installs it."""
    try:
        import torch
    except ImportError:
        raise ClusterSimError(
            "clustersim probe needs torch: pip install 'clustersim[probe]'", field="torch", value="not installed"
        ) from None
    return torch


@dataclass(frozen=True)
class Device:
    """What is measured: ``kind`` (cpu or cuda), its name as torch reports it, the devices of that kind on
    this host, the catalog entry where the name is catalogued, and whether it multiplies FP8."""

    kind: str
    name: str
    count: int
    host: str
    accelerator: Accelerator | None
    fp8: bool
    torch_version: str

    def as_dict(self) -> dict[str, Any]:
        """The fields, for JSON."""
        return {
            "kind": self.kind,
            "name": self.name,
            "count": self.count,
            "host": self.host,
            "accelerator": self.accelerator.id if self.accelerator else None,
            "fp8": self.fp8,
            "torch": self.torch_version,
        }


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` says."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return f"CPU {platform.processor() or platform.machine() or 'unknown'}"


def default_device(torch: Any) -> str:
    """``cuda`` where torch sees a GPU, else ``cpu``."""
    return "cuda" if torch.cuda.is_available() else "cpu"


def describe(torch: Any, kind: str, catalog: Catalog, accelerator: str | None = None) -> Device:
    """The ``Device`` of ``kind``; ``accelerator`` names the catalog entry where the GPU's name is not catalogued."""
    if kind not in DEVICES:
        raise ClusterSimError(f"--device {kind!r}: valid: {', '.join(DEVICES)}", field="--device", value=kind)
    host = socket.gethostname()
    if kind == "cpu":
        return Device("cpu", cpu_name(), 1, host, None, False, str(torch.__version__))
    if not torch.cuda.is_available():
        raise ClusterSimError(
            f"--device cuda: torch {torch.__version__} sees no CUDA device; use --device cpu",
            field="--device",
            value=kind,
        )
    name = str(torch.cuda.get_device_name(0))
    found = catalog.accelerator(accelerator) if accelerator else None
    if found is None:
        named = accelerator_from_name(catalog, name)
        found = catalog.accelerator(named) if named else None
    fp8 = tuple(torch.cuda.get_device_capability(0)) >= FP8_MIN_CAPABILITY and hasattr(torch, "_scaled_mm")
    return Device("cuda", name, int(torch.cuda.device_count()), host, found, fp8, str(torch.__version__))
