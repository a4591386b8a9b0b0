"""The enumerated choices of a job's options (activation recompute, serving batching), stdlib only.

The command line offers these as option values, so they live apart from the models that use them
(``clustersim.execution`` re-exports ``Recompute``, ``clustersim.serving.estimate`` ``Batching``)
and importing them loads neither numpy nor pydantic.
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum

from clustersim.errors import ClusterSimError


class Recompute(StrEnum):
    """Activation recompute: none, the attention core only (selective), or whole layers (full)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class CudaGraphs(StrEnum):
    """A training run's CUDA graph capture: none (the host launches every kernel of every micro-batch), partial
    (some modules replayed: Megatron-Core's ``cuda_graph_scope`` attn, moe_router, ...) or full (the iteration)."""

    NONE = "none"
    PARTIAL = "partial"
    FULL = "full"


class SelectiveRecompute(StrEnum):
    """What a framework's selective recompute gives back in the backward pass: the attention core (Megatron's,
    Korthikanti et al.: every other activation kept) or every second matmul and the element-wise ops
    (torchtitan's per-op policy: the other matmuls' and attention's outputs kept)."""

    ATTENTION_CORE = "attention_core"
    ALTERNATE_MATMULS = "alternate_matmuls"


class RecomputeModule(StrEnum):
    """A submodule Megatron-Core's selective recompute runs again (``recompute_modules``; its
    ``TransformerConfig`` docstring names them). ``core_attn``, ``mlp``, ``moe`` and ``shared_experts`` keep
    their input and rebuild everything inside; ``moe_act``, ``layernorm`` and ``mla_up_proj`` drop their output and
    rebuild it from the input they keep."""

    CORE_ATTN = "core_attn"
    MLA_UP_PROJ = "mla_up_proj"
    LAYERNORM = "layernorm"
    MOE_ACT = "moe_act"
    MLP = "mlp"
    MOE = "moe"
    SHARED_EXPERTS = "shared_experts"


def recompute_modules_named(names: Sequence[str], said: str, field: str, value: str) -> tuple[RecomputeModule, ...]:
    """``names`` as recompute modules, in their order and once each; none, or one not among them, is refused in
    one line that starts with ``said`` (what named them) and names the valid ones (the error's ``field`` and
    ``value``: the option or argument and its text)."""
    valid = [module.value for module in RecomputeModule]
    unknown = [name for name in names if name not in valid]
    if unknown or not names:
        raise ClusterSimError(
            f"{said}: {'unknown ' + ', '.join(unknown) if unknown else 'no module named'} (valid: {', '.join(valid)})",
            field=field,
            value=value,
        )
    return tuple(dict.fromkeys(RecomputeModule(name) for name in names))


RECOMPUTE_MODULES_HELP = (
    "With selective recompute, the submodules run again in the backward pass (Megatron-Core's "
    "recompute_modules): core_attn, mla_up_proj, layernorm, moe_act, mlp, moe, shared_experts; default: the "
    "framework's (Megatron-Core's core_attn)."
)


class Batching(StrEnum):
    """How requests share the engine."""

    CONTINUOUS = "continuous"
    STATIC = "static"


class EpDispatcher(StrEnum):
    """A MoE layer's token dispatcher: Megatron-Core's alltoall dispatcher (NCCL's all-to-all, each
    token-expert copy on its own), or the flex dispatcher with DeepEP or HybridEP (a token sent once per
    remote node holding its experts, then fanned out over NVLink)."""

    ALLTOALL = "alltoall"
    DEEPEP = "deepep"


EP_DISPATCHER_HELP = (
    "MoE token dispatch: 'alltoall' (Megatron-Core's alltoall dispatcher over NCCL: each token-expert copy "
    "crosses the network) or 'deepep' (the flex dispatcher with DeepEP or HybridEP: a token once per remote node, "
    "then NVLink); default: the framework's."
)
