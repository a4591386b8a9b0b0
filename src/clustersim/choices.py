"""The enumerated choices of a job's options (activation recompute, serving batching), stdlib only.

The command line offers these as option values, so they live apart from the models that use them
(``clustersim.execution`` re-exports ``Recompute``, ``clustersim.serving.estimate`` ``Batching``)
and importing them loads neither numpy nor pydantic.
"""

from __future__ import annotations

from enum import StrEnum


class Recompute(StrEnum):
    """Activation recompute: none, the attention core only (selective), or whole layers (full)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class SelectiveRecompute(StrEnum):
    """What a framework's selective recompute gives back in the backward pass: the attention core (Megatron's,
    Korthikanti et al.: every other activation kept) or every second matmul and the element-wise ops
    (torchtitan's per-op policy: the other matmuls' and attention's outputs kept)."""

    ATTENTION_CORE = "attention_core"
    ALTERNATE_MATMULS = "alternate_matmuls"


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
