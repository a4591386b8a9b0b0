"""Selective recompute's stated modules in a layout: one bit each in the arrays, the modules a model has, and the
rule that a layout states only those, under selective recompute."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from clustersim.choices import Recompute, RecomputeModule
from clustersim.errors import ClusterSimError
from clustersim.workload.transformer import Transformer


def module_bits(modules: Sequence[RecomputeModule] | None) -> int:
    """Selective recompute's stated modules as one integer, a bit each (in ``RecomputeModule``'s order); 0: none
    stated (the framework's own)."""
    order = list(RecomputeModule)
    return sum(1 << order.index(m) for m in set(modules or ()))


def bits_modules(bits: int) -> tuple[RecomputeModule, ...] | None:
    """``module_bits`` read back (None for 0)."""
    return tuple(m for i, m in enumerate(RecomputeModule) if bits >> i & 1) or None


def modules_in(model: Transformer) -> tuple[RecomputeModule, ...]:
    """The recompute modules ``model`` has (Megatron-Core refuses mla_up_proj without latent attention and moe_act
    without grouped expert GEMMs; a module the model lacks would recompute nothing)."""
    moe, found = model.moe, [RecomputeModule.CORE_ATTN, RecomputeModule.LAYERNORM]
    found += [RecomputeModule.MLA_UP_PROJ] if model.mla is not None else []
    found += [RecomputeModule.MOE_ACT, RecomputeModule.MOE] if moe is not None else []
    found += [RecomputeModule.SHARED_EXPERTS] if moe is not None and moe.shared_experts else []
    found += [RecomputeModule.MLP] if moe is None or model.dense_mlp_layers else []
    return tuple(found)


def stated_flags(bits: Any) -> list[tuple[RecomputeModule, Any]]:
    """Each module some layout states, with its flag per layout (1 stated, 0 not) from ``module_bits``' integers."""
    flags = [(module, (bits >> i) & 1) for i, module in enumerate(RecomputeModule)]
    return [(module, on) for module, on in flags if np.any(on)]


def modules_allowed(layouts: Any, model: Transformer) -> Any:
    """Whether a ``Layout``'s (or which ``LayoutArrays``') stated recompute modules are selective recompute's and
    the model's."""
    stated = getattr(layouts, "recompute_modules", None)
    if stated is None:  # none stated (or a planner's grid, which states none)
        return True
    if isinstance(stated, tuple):  # one Layout
        bits, selective = module_bits(stated), layouts.recompute is Recompute.SELECTIVE
    else:
        bits, selective = stated, layouts.recompute_selective
    return (bits == 0) | (selective & ((bits & ~module_bits(modules_in(model))) == 0))


def modules_message(layout: Any, model: Transformer) -> str:
    """Why a ``Layout``'s stated modules are refused."""
    if layout.recompute is not Recompute.SELECTIVE:
        return f"recompute modules need selective recompute, not {layout.recompute.value}"
    return lacking_message(model, layout.recompute_modules or ()) or ""


def lacking_message(model: Transformer, modules: Sequence[RecomputeModule]) -> str | None:
    """Which of ``modules`` ``model`` lacks, with those it has; None where it has them all."""
    mine = modules_in(model)
    missing = [m.value for m in modules if m not in mine]
    if not missing:
        return None
    return f"{model.name} has no {', '.join(missing)} to recompute (valid for it: {', '.join(m.value for m in mine)})"


def _one_layout(layouts: Any) -> bool:
    """Whether ``layouts`` is one ``Layout`` (its modules a tuple or None), not ``LayoutArrays`` (bits)."""
    return isinstance(layouts.recompute_modules, tuple) or layouts.recompute_modules is None


def recomputes_moe_layer(layouts: Any) -> Any:
    """Where a layout (a ``Layout`` or ``LayoutArrays``) runs its MoE layers' forward again, dispatch and combine
    included: Megatron-Core checkpoints the whole layer under full recompute and the whole MoE layer under the ``moe``
    module."""
    moe = module_bits([RecomputeModule.MOE])
    if _one_layout(layouts):
        selective = layouts.recompute is Recompute.SELECTIVE
        return layouts.recompute is Recompute.FULL or (selective and module_bits(layouts.recompute_modules) & moe > 0)
    return layouts.recompute_full | (layouts.recompute_selective & ((layouts.recompute_modules & moe) > 0))


def overlap_recompute_conflict(layouts: Any, ep_overlap_default: bool) -> Any:
    """Where a layout (a ``Layout`` or ``LayoutArrays``) overlaps its expert all-to-alls (its ``ep_overlap``, else the
    framework's) while it recomputes its MoE layers (``recomputes_moe_layer``): Megatron-Core refuses both
    (transformer_config.py: 'disable full recomputation when enabling overlap_moe_expert_parallel_comm', 'disable
    moe in recompute_modules ...'): the overlapped schedule runs each layer's forward once."""
    if _one_layout(layouts):
        overlap = ep_overlap_default if layouts.ep_overlap is None else layouts.ep_overlap
    else:
        overlap = np.where(np.isnan(layouts.ep_overlap), float(ep_overlap_default), layouts.ep_overlap) > 0
    return (layouts.ep > 1) & overlap & recomputes_moe_layer(layouts)


def check_overlap_recompute(layout: Any, ep_overlap_default: bool) -> None:
    """Refuse a ``Layout`` that ``overlap_recompute_conflict`` marks, naming the overlap and the recompute."""
    if overlap_recompute_conflict(layout, ep_overlap_default):
        what = "full recompute" if layout.recompute is Recompute.FULL else "the moe recompute module"
        said = "the layout's ep_overlap" if layout.ep_overlap else "the framework's default ep_overlap"
        raise ClusterSimError(
            f"the expert all-to-all overlap ({said}) runs each layer's forward once and cannot be combined with "
            f"{what} (Megatron-Core refuses it): turn one off",
            field="ep_overlap",
            value=True,
        )
