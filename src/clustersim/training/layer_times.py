"""One layer's operations on one device and their roofline times at a job's precision: the mean layer. Where the
software keeps some layers of an 8- or 4-bit job in BF16 (``SoftwareProfile.bf16_layers``,
``clustersim.compute.bf16_layers``), that share of each operation runs at its BF16 time; where its recipe runs groups of
operations in a wider format (``SoftwareProfile.operation_formats``, ``clustersim.compute.operation_formats``), their
share of each operation of the quantized layers runs at that format's time, and the MTP blocks' share of the layers
whole in theirs. An operation only the quantized GEMMs run, such as the FP8 casts, shrinks with them."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.compute.bf16_layers import bf16_layer_share, check_bf16_layers
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.fused_expert_mlp import fused_expert_mlp_runs
from clustersim.compute.operation_formats import MTP, check_operation_formats, mtp_layer_share, operation_shares
from clustersim.compute.precision import is_low_precision
from clustersim.compute.software import SoftwareProfile
from clustersim.execution import LayoutArrays
from clustersim.system import System
from clustersim.training.pricing import OperationTimes, Systems, operation_times
from clustersim.workload.operation import Operation
from clustersim.workload.ops import FLOAT8_LINEARS, layer_operations
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
    """Roofline times of one layer's operations (``ctx.layer_ops``), its BF16 layers, its recipe's wider operations
    and its MTP blocks' format blended in (see the module docstring)."""
    low = _priced(ctx, ctx.layer_ops, ctx.precision)
    sw, model = ctx.sw, ctx.model
    if not (is_low_precision(ctx.precision) and (sw.bf16_layers or sw.operation_formats)):
        return low  # a 16-bit job's layers are all 16-bit
    check_bf16_layers(model, sw.bf16_layers, ctx.precision)  # a profile's count beyond this model's layers
    formats = check_operation_formats(model, sw.operation_formats, ctx.precision, ctx.system.accelerator)
    mtp_format = formats.pop(MTP, None)
    mtp = mtp_layer_share(model) if mtp_format is not None else 0.0  # of the priced layers
    bf16 = (1.0 - mtp) * bf16_layer_share(model, sw.bf16_layers)
    shares = operation_shares(model, formats)
    wanted = {d for op in shares.values() for d in op} | {d for d in (Dtype.BF16 if bf16 else None, mtp_format) if d}
    wider = {d: {t.name: t for t in _priced(ctx, layer_operations_in(ctx, d), d)} for d in wanted}
    flop = {op.name: op.flop for op in ctx.layer_ops}
    linear = sum(f for name, f in flop.items() if name in FLOAT8_LINEARS)
    moved = sum(s * flop[name] for name, op in shares.items() for s in op.values())
    kept = 1.0 - moved / linear  # the quantized GEMMs' share left in the job's format

    def blend(t: OperationTimes, attr: str) -> npt.NDArray[np.float64]:
        def at(dtype: Dtype | None) -> npt.NDArray[np.float64] | float:
            other = wider.get(dtype, {}).get(t.name)  # type: ignore[arg-type]  # no format (None): no time
            return 0.0 if other is None else getattr(other, attr)

        own = getattr(t, attr)
        if not any(t.name in priced for priced in wider.values()):  # run only by quantized GEMMs (casts)
            quantized = kept * own
        else:
            op = shares.get(t.name, {})
            quantized = (1.0 - sum(op.values())) * own + sum(s * at(d) for d, s in op.items())
        return np.asarray((1.0 - bf16 - mtp) * quantized + bf16 * at(Dtype.BF16) + mtp * at(mtp_format))

    return [OperationTimes(t.name, blend(t, "forward_s"), blend(t, "backward_s"), t.in_head, t.kind) for t in low]
