"""GEMM throughput: ``C = A @ B`` with square M = N = K per number format, 2*M*N*K FLOP per product.

fp32 runs without TF32 (torch's default for matmul), so it is compared with the catalog's fp32 peak;
fp8 (e4m3 inputs, bf16 output, unit scales) goes through ``torch._scaled_mm`` and only where the GPU
has FP8 tensor cores.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.kinds import Dtype
from clustersim.probe.device import Device
from clustersim.probe.timing import Stats, time_work

GEMM_DTYPES = ("bf16", "fp16", "fp32", "fp8")
_TORCH_DTYPES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass(frozen=True)
class GemmResult:
    """One GEMM size and format: its time, the FLOP/s and, where catalogued, the peak and the fraction of it."""

    dtype: str
    size: int
    stats: Stats
    peak_flop_per_s: float | None

    @property
    def flop(self) -> float:
        """FLOP of one product: 2 M N K."""
        return 2.0 * self.size**3

    def as_dict(self) -> dict[str, Any]:
        """The result for JSON: TFLOP/s at the median and its spread, and the achieved fraction of the peak."""
        rates = self.stats.rate_fields(self.flop, "tflops", 1e12)
        peak = self.peak_flop_per_s / 1e12 if self.peak_flop_per_s else None
        return {
            "dtype": self.dtype,
            "m": self.size,
            "n": self.size,
            "k": self.size,
            **rates,
            "peak_tflops": peak,
            "fraction_of_peak": rates["tflops"] / peak if peak else None,
            "time": self.stats.as_dict(),
        }


def gemm_dtypes(device: Device) -> tuple[str, ...]:
    """The formats measured by default: bf16, fp16 and fp32, and fp8 where the device multiplies it."""
    return GEMM_DTYPES if device.fp8 else GEMM_DTYPES[:3]


def catalog_peak(device: Device, dtype: str) -> float | None:
    """The catalog's dense peak FLOP/s of the device for ``dtype``; None where uncatalogued."""
    if device.accelerator is None:
        return None
    figure = device.accelerator.dense_flop_per_s.get(Dtype(dtype))
    return figure.value if figure is not None else None


def _product(torch: Any, device: Device, dtype: str, size: int) -> Callable[[], object]:
    generator = torch.Generator(device=device.kind).manual_seed(size)
    if dtype == "fp8":
        a = torch.randn(size, size, device=device.kind, generator=generator).to(torch.float8_e4m3fn)
        b = torch.randn(size, size, device=device.kind, generator=generator).to(torch.float8_e4m3fn).t()
        scale = torch.ones((), device=device.kind)
        return lambda: torch._scaled_mm(a, b, scale_a=scale, scale_b=scale, out_dtype=torch.bfloat16)
    kind = getattr(torch, _TORCH_DTYPES[dtype])
    a = torch.randn(size, size, device=device.kind, generator=generator, dtype=kind)
    b = torch.randn(size, size, device=device.kind, generator=generator, dtype=kind)
    out = torch.empty(size, size, device=device.kind, dtype=kind)
    return lambda: torch.matmul(a, b, out=out)


def measure_gemm(
    torch: Any,
    device: Device,
    dtypes: Sequence[str],
    sizes: Sequence[int],
    *,
    warmup: int,
    repeats: int,
    step: Callable[[], None] = lambda: None,
) -> list[GemmResult]:
    """Every (format, size) of the grid; ``step`` is called after each."""
    results = []
    for dtype in dtypes:
        for size in sizes:
            work = _product(torch, device, dtype, size)
            stats = time_work(torch, device.kind, work, warmup=warmup, repeats=repeats)
            results.append(GemmResult(dtype, size, stats, catalog_peak(device, dtype)))
            del work
            step()
    return results
