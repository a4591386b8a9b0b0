"""Device memory bandwidth (STREAM's copy and triad) and host-device copies, in GB/s (1e9 bytes).

Bytes moved follow STREAM (https://www.cs.virginia.edu/stream/ref.html): copy ``a = b`` reads and
writes the buffer (2 x bytes), triad ``a = b + s c`` reads two and writes one (3 x bytes). A
host-device copy moves the buffer once; pinned host memory is page-locked (``pin_memory=True``),
pageable memory is staged by the driver.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustersim.probe.device import Device
from clustersim.probe.timing import Stats, time_work

KERNELS = {"copy": 2, "triad": 3}  # buffers touched per element
COPIES = (
    ("host_to_device", "pinned"),
    ("host_to_device", "pageable"),
    ("device_to_host", "pinned"),
    ("device_to_host", "pageable"),
)
TRIAD_SCALAR = 3.0


@dataclass(frozen=True)
class BandwidthResult:
    """One transfer: what it is, the bytes it moves per run, its time, and the catalog peak where there is one."""

    name: str
    buffer_bytes: int
    moved_bytes: int
    stats: Stats
    peak_bytes_per_s: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The result for JSON: GB/s at the median and its spread, and the fraction of the peak."""
        rates = self.stats.rate_fields(self.moved_bytes, "GBps", 1e9)
        peak = self.peak_bytes_per_s / 1e9 if self.peak_bytes_per_s else None
        return {
            "name": self.name,
            "buffer_bytes": self.buffer_bytes,
            "moved_bytes": self.moved_bytes,
            **rates,
            "peak_GBps": peak,
            "fraction_of_peak": rates["GBps"] / peak if peak else None,
            "time": self.stats.as_dict(),
        }


def measure_memory(
    torch: Any, device: Device, buffer_bytes: int, *, warmup: int, repeats: int, step: Callable[[], None]
) -> list[BandwidthResult]:
    """Copy and triad over float32 buffers of ``buffer_bytes`` each."""
    elements = max(buffer_bytes // 4, 1)
    a, b, c = (torch.ones(elements, device=device.kind, dtype=torch.float32) for _ in range(3))
    peak = device.accelerator.memory_bandwidth_bytes_per_s.value if device.accelerator else None
    kernels: dict[str, Callable[[], object]] = {
        "copy": lambda: a.copy_(b),
        "triad": lambda: torch.add(b, c, alpha=TRIAD_SCALAR, out=a),
    }
    results = []
    for name, work in kernels.items():
        stats = time_work(torch, device.kind, work, warmup=warmup, repeats=repeats)
        results.append(BandwidthResult(name, elements * 4, KERNELS[name] * elements * 4, stats, peak))
        step()
    return results


def measure_copies(
    torch: Any, device: Device, buffer_bytes: int, *, warmup: int, repeats: int, step: Callable[[], None]
) -> list[BandwidthResult]:
    """Host-to-device and device-to-host copies of ``buffer_bytes``, from pinned and from pageable memory
    (a GPU only: the caller says it is not applicable on the CPU)."""
    on_device = torch.empty(buffer_bytes, dtype=torch.uint8, device=device.kind)
    results = []
    for direction, memory in COPIES:
        pinned = memory == "pinned"
        host = torch.empty(buffer_bytes, dtype=torch.uint8, pin_memory=pinned)
        host.fill_(1)
        source, target = (host, on_device) if direction == "host_to_device" else (on_device, host)

        def work(source: Any = source, target: Any = target, pinned: bool = pinned) -> object:
            return target.copy_(source, non_blocking=pinned)

        stats = time_work(torch, device.kind, work, warmup=warmup, repeats=repeats)
        results.append(BandwidthResult(f"{direction} {memory}", buffer_bytes, buffer_bytes, stats))
        step()
    return results
