"""One layer's operations on one device and their roofline times at a job's precision: the mean layer, where the
software keeps some layers of an 8- or 4-bit job in BF16 (``SoftwareProfile.bf16_layers``,
``clustersim.compute.bf16_layers``), that share of each operation at its BF16 time (an operation only the quantized
layers run, such as the FP8 casts, at the other share)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.compute.bf16_layers import bf16_layer_share, check_bf16_layers
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.fused_expert_mlp import fused_expert_mlp_runs
from clustersim.compute.precision import is_low_precision
from clustersim.compute.software import SoftwareProfile
from clustersim.execution import LayoutArrays
from clustersim.system import System
from clustersim.training.pricing import OperationTimes, Systems, operation_times
from clustersim.workload.operation import Operation
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import Transformer


class LayerContext(Protocol):
    """What a layer's pricing reads of a step's context (``clustersim.training.step.StepContext``)."""

    @property
    def model(self) -> Transformer: ...
    @property
    def system(self) -> System | Systems: ...
    @property
    def eff(self) -> FamilyEfficiency: ...
    @property
    def sw(self) -> SoftwareProfile: ...
    @property
    def lay(self) -> LayoutArrays: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def precision(self) -> Dtype: ...
    @property
    def tokens(self) -> npt.NDArray[np.float64]: ...
    @property
    def ep_per_node(self) -> npt.NDArray[np.bool_]: ...
    @property
    def layer_ops(self) -> list[Operation]: ...


def fused_expert_mlp_in(ctx: LayerContext, precision: Dtype) -> bool:
    """Whether the profile's fused expert MLP runs for the job's layers in ``precision``."""
    return fused_expert_mlp_runs(ctx.sw, ctx.model.moe is not None, precision, ctx.system.accelerator)


def layer_operations_in(ctx: LayerContext, precision: Dtype) -> list[Operation]:
    """The operations of one layer on one device whose GEMMs run in ``precision``."""
    lay, sw = ctx.lay, ctx.sw
    tp = lay.tp.astype(float)
    return layer_operations(
        ctx.model,
        tokens=ctx.tokens,
        seq_len=ctx.seq_len,
        tp=tp,
        sp_split=np.where(lay.sequence_parallel, tp, 1.0),
        ep=lay.ep.astype(float),
        fused_attention=sw.fused_attention,
        cp=lay.cp.astype(float),
        eager_elementwise=sw.eager_elementwise,
        float8_recipe=sw.float8_recipe if precision is Dtype.FP8 else None,
        fused_expert_mlp=fused_expert_mlp_in(ctx, precision),
        flex_dispatch=ctx.ep_per_node & (lay.ep > 1),
        unfused_clamped_glu=sw.unfused_clamped_glu,
        unfused_scaled_rope=sw.unfused_scaled_rope,
    )


def _priced(ctx: LayerContext, ops: list[Operation], precision: Dtype) -> list[OperationTimes]:
    sw = ctx.sw
    return operation_times(
        ops,
        ctx.system,
        ctx.eff,
        precision,
        kernel_efficiency=sw.kernel_efficiency,
        attention_kernel_efficiency=sw.attention_kernel_efficiency,
        fp8_attention=sw.fp8_attention,
        fused_expert_mlp=fused_expert_mlp_in(ctx, precision),
    )


def mean_layer_times(ctx: LayerContext) -> list[OperationTimes]:
    """Roofline times of one layer's operations (``ctx.layer_ops``), its BF16 layers' share blended in."""
    low = _priced(ctx, ctx.layer_ops, ctx.precision)
    if not (ctx.sw.bf16_layers and is_low_precision(ctx.precision)):  # a 16-bit job's layers are all 16-bit
        return low
    check_bf16_layers(ctx.model, ctx.sw.bf16_layers, ctx.precision)  # a profile's count beyond this model's layers
    share = bf16_layer_share(ctx.model, ctx.sw.bf16_layers)
    high = {t.name: t for t in _priced(ctx, layer_operations_in(ctx, Dtype.BF16), Dtype.BF16)}
    out = []
    for t in low:
        b = high.get(t.name)
        forward = (1.0 - share) * t.forward_s + (share * b.forward_s if b is not None else 0.0)
        backward = (1.0 - share) * t.backward_s + (share * b.backward_s if b is not None else 0.0)
        out.append(OperationTimes(t.name, forward, backward, t.in_head, t.kind))
    return out
