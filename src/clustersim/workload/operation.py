"""One operation of a layer on one device (a GEMM, the attention core or memory traffic), the unit
``clustersim.workload.ops`` builds and ``clustersim.training.pricing`` prices."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class OpKind(StrEnum):
    """How an operation is costed: a GEMM, the attention core, Mamba-2's chunked scan
    (``clustersim.compute.scan_kernel``), or memory traffic."""

    GEMM = "gemm"
    ATTENTION = "attention"
    SCAN = "scan"
    MEMORY = "memory"


@dataclass(frozen=True)
class Operation:
    """One operation's forward work on one device; ``gemm_flop`` is the size of one GEMM call."""

    name: str
    kind: OpKind
    flop: FloatArray
    gemm_flop: FloatArray
    bytes: FloatArray
    backward_ratio: float
    keys_per_call: FloatArray | None = None  # attention: keys one query meets in one kernel call
    exps: FloatArray | float = 0.0  # fused attention: scores whose exponential the kernel takes, each pass


def make_operation(
    name: str,
    kind: OpKind,
    like: FloatArray,
    *,
    flop: object = 0.0,
    each: object = None,
    nbytes: object = 0.0,
    ratio: float,
    keys: object = None,
    exps: object = None,
) -> Operation:
    """An operation whose arrays all have the shape of ``like`` (one element per layout)."""
    flop_array = like + np.asarray(flop, dtype=float)
    each_array = flop_array if each is None else like + np.asarray(each, dtype=float)
    keys_array = None if keys is None else like + np.asarray(keys, dtype=float)
    nbytes_array = like + np.asarray(nbytes, dtype=float)
    exps_array = 0.0 if exps is None else like + np.asarray(exps, dtype=float)
    return Operation(name, kind, flop_array, each_array, nbytes_array, ratio, keys_array, exps_array)
