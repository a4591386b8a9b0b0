"""Selective recompute's time by module: what one layer runs again in the backward pass, as shares of its
operations' forward times (``workload.ops.module_recompute_share`` for the modules a layout states, Megatron-Core's
``recompute_modules``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from clustersim.choices import RecomputeModule
from clustersim.execution import LayoutArrays
from clustersim.recompute_layout import stated_flags
from clustersim.training.pricing import OperationTimes
from clustersim.workload.ops import Operation, module_recompute_share
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]


def share_forward_s(
    ops: Sequence[Operation], times: Sequence[OperationTimes], share: Callable[[Operation], float]
) -> FloatArray:
    """Forward seconds of one layer's operations (``ops``, priced as ``times``), each at its ``share``."""
    shares = {op.name: share(op) for op in ops}
    return np.asarray(sum((t.forward_s * shares[t.name] for t in times), np.zeros_like(times[0].forward_s)))


def stated_modules_forward_s(
    model: Transformer,
    lay: LayoutArrays,
    ops: Sequence[Operation],
    times: Sequence[OperationTimes],
    default: FloatArray,
    *,
    fused_expert_mlp: bool,
) -> FloatArray:
    """Forward seconds one layer's selective recompute repeats: the sum over the modules each layout states, or
    ``default`` (the framework's own) where it states none."""
    stated = lay.recompute_modules
    assert stated is not None  # filled by LayoutArrays
    total = np.zeros_like(np.asarray(default, dtype=np.float64))
    for module, on in stated_flags(stated):
        total = total + on * share_forward_s(ops, times, _module_share(model, module, fused_expert_mlp))
    return np.asarray(np.where(stated > 0, total, default), dtype=np.float64)


def _module_share(model: Transformer, module: RecomputeModule, fused: bool) -> Callable[[Operation], float]:
    return lambda op: module_recompute_share(model, op, module, fused_expert_mlp=fused)
