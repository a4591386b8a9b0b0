"""``clustersim probe``: measure this machine with torch (the ``probe`` extra).

GEMM throughput by number format and size, device memory bandwidth, host-device copies, collectives
through ``torch.distributed`` (printed as nccl-tests' tables and written as the collective cases
``clustersim calibrate`` reads), and checkpoint-like parallel file writes and reads. Every measurement
has warm-up runs, timed repetitions, and reports the median with its spread (min-max and p10-p90).
torch is imported only when a probe runs: without it the command says which extra to install.
"""

from __future__ import annotations

from clustersim.probe.options import WHAT, ProbeOptions
from clustersim.probe.run import ProbeResult, run_probe

__all__ = ["WHAT", "ProbeOptions", "ProbeResult", "run_probe"]
