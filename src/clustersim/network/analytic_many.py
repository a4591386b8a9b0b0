"""The analytic model's time of one collective on the groups of many layouts and systems at once: each size on
its own fabric, in one array expression over sizes x candidates (``collective_times_s``), what a planner asks
when it prices the layouts of many node counts and instance types in one call. Each element equals
``analytic.collective_time_s`` of that size alone on its fabric."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from clustersim.network.analytic import (
    DEFAULT_CALIBRATION,
    CommCalibration,
    candidate_arrays,
    default_calibration,
    default_candidate_arrays,
    ramp_time_s,
)
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric

FloatArray = npt.NDArray[np.float64]


_SHAPE = tuple(f.name for f in dataclasses.fields(Fabric) if f.name != "name")  # what the candidates read
_BY_SHAPE: dict[tuple[object, ...], tuple[FloatArray, bool]] = {}
_SHAPES_KEPT = 8192


_BY_FABRIC: dict[tuple[Op, int], tuple[Fabric, tuple[FloatArray, bool]]] = {}


def _default_rows(op: Op, fabric: Fabric) -> tuple[FloatArray, bool]:
    """``_rows`` under the packaged calibration, remembered by the fabric object itself (a topology hands out one
    object per group shape; hashing a fabric's fields on every call costs more than the lookup saves)."""
    known = _BY_FABRIC.get((op, id(fabric)))
    if known is not None and known[0] is fabric:
        return known[1]
    found = _rows(op, fabric, DEFAULT_CALIBRATION)
    if len(_BY_FABRIC) >= _SHAPES_KEPT:
        _BY_FABRIC.clear()
    _BY_FABRIC[op, id(fabric)] = (fabric, found)  # the fabric kept alive with its id
    return found


def _rows(op: Op, fabric: Fabric, cal: CommCalibration) -> tuple[FloatArray, bool]:
    """The five candidate columns of ``op`` on ``fabric`` as rows, and whether NCCL prices each candidate at what
    it achieves; remembered by the fabric's shape without its name (the candidates never read it), so that the
    groups of one shape on systems of other sizes share them."""
    key = (op, cal, *(getattr(fabric, name) for name in _SHAPE))
    found = _BY_SHAPE.get(key)
    if found is None:
        arrays = (
            default_candidate_arrays(op, fabric) if cal is DEFAULT_CALIBRATION else candidate_arrays(op, fabric, cal)
        )
        rows = np.stack([column[:, 0] for column in arrays])
        found = rows, bool(np.array_equal(rows[3], rows[1]) and np.array_equal(rows[4], rows[2]))
        if len(_BY_SHAPE) >= _SHAPES_KEPT:
            _BY_SHAPE.clear()
        _BY_SHAPE[key] = found
    return found


# a column past a fabric's candidates: one that never wins (infinite latency, no ramp)
_NEVER = np.array([[np.inf], [1.0], [0.0], [1.0], [0.0]])


def collective_times_s(
    op: Op,
    size_bytes: npt.ArrayLike,
    fabrics: Sequence[Fabric],
    which: npt.ArrayLike,
    cal: CommCalibration | None = None,
) -> FloatArray:
    """The time of the candidate NCCL's price picks for size ``i`` on ``fabrics[which[i]]`` (switched fabrics:
    a torus is ``torus.torus_time_s``'s), the calibration read once (None: the packaged values with the user's
    files, ``analytic.default_calibration``). Each fabric's candidates sit side by side, padded with ones that
    never win."""
    cal = default_calibration() if cal is None else cal
    found = (
        [_default_rows(op, f) for f in fabrics] if cal is DEFAULT_CALIBRATION else [_rows(op, f, cal) for f in fabrics]
    )
    counts = np.array([rows.shape[1] for rows, _ in found])
    flat = np.concatenate([rows for rows, _ in found] + [_NEVER], axis=1)
    offsets = np.cumsum(counts) - counts
    column = np.arange(int(counts.max()))
    columns = np.where(column < counts[:, None], offsets[:, None] + column, flat.shape[1] - 1)  # fabric x width
    latency, algbw, half, choice, choice_half = flat[:, columns[np.asarray(which, np.int64)]]  # each sizes x width
    sizes = np.maximum(np.asarray(size_bytes, dtype=np.float64).reshape(-1, 1), 1.0)
    times = ramp_time_s(latency, algbw, half, sizes, cal.ramp_exponent)
    if all(same for _, same in found):  # NCCL prices what each candidate achieves
        return np.asarray(times.min(axis=1), dtype=np.float64)
    picked = np.argmin(ramp_time_s(latency, choice, choice_half, sizes, cal.ramp_exponent), axis=1)
    return np.asarray(times[np.arange(len(times)), picked], dtype=np.float64)
