"""The analytic model's time of one collective on the groups of many layouts and systems at once: each size on
its own fabric, in one array expression over sizes x candidates (``collective_times_s``), what a planner asks
when it prices the layouts of many node counts and instance types in one call. Each element equals
``analytic.collective_time_s`` of that size alone on its fabric."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from clustersim.network.analytic import (
    DEFAULT_CALIBRATION,
    Arrays,
    CommCalibration,
    candidate_arrays,
    default_calibration,
    default_candidate_arrays,
    ramp_time_s,
)
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric

FloatArray = npt.NDArray[np.float64]


def _arrays(op: Op, fabric: Fabric, cal: CommCalibration) -> Arrays:
    """The remembered candidate columns of ``op`` on ``fabric`` under ``cal``."""
    return default_candidate_arrays(op, fabric) if cal is DEFAULT_CALIBRATION else candidate_arrays(op, fabric, cal)


@functools.lru_cache(maxsize=8192)
def _padded(op: Op, fabric: Fabric, cal: CommCalibration, width: int) -> FloatArray:
    """The five candidate columns of ``op`` on ``fabric`` as rows of ``width`` entries, those past its candidates
    ones that never win (infinite latency)."""
    rows = np.stack([column[:, 0] for column in _arrays(op, fabric, cal)])
    padded = np.ones((5, width))
    padded[0] = np.inf
    padded[2] = padded[4] = 0.0
    padded[:, : rows.shape[1]] = rows
    return padded


def collective_times_s(
    op: Op,
    size_bytes: npt.ArrayLike,
    fabrics: Sequence[Fabric],
    which: npt.ArrayLike,
    cal: CommCalibration | None = None,
) -> FloatArray:
    """The time of the candidate NCCL's price picks for size ``i`` on ``fabrics[which[i]]`` (switched fabrics:
    a torus is ``torus.torus_time_s``'s), the calibration read once (None: the packaged values with the user's
    files, ``analytic.default_calibration``)."""
    cal = default_calibration() if cal is None else cal
    width = max(_arrays(op, fabric, cal)[0].shape[0] for fabric in fabrics)
    table = np.stack([_padded(op, fabric, cal, width) for fabric in fabrics])[np.asarray(which, np.int64)]
    latency, algbw, half, choice, choice_half = (table[:, k] for k in range(5))
    sizes = np.maximum(np.asarray(size_bytes, dtype=np.float64).reshape(-1, 1), 1.0)
    times = ramp_time_s(latency, algbw, half, sizes, cal.ramp_exponent)
    if np.array_equal(choice, algbw) and np.array_equal(choice_half, half):  # NCCL prices what is achieved
        return np.asarray(times.min(axis=1), dtype=np.float64)
    picked = np.argmin(ramp_time_s(latency, choice, choice_half, sizes, cal.ramp_exponent), axis=1)
    return np.asarray(times[np.arange(len(times)), picked], dtype=np.float64)
