"""Collective operations and nccl-tests' definitions of algbw and busbw.

nccl-tests (``doc/PERFORMANCE.md`` and each ``src/*.cu`` ``*GetBw``) reports ``algbw = size / time``
where ``size`` is the larger of the send and receive buffers, and ``busbw = algbw * factor(n)``,
the per-rank link bandwidth a ring would need; the factors are below.
"""

from __future__ import annotations

from enum import StrEnum

from clustersim.errors import UnknownNameError


class Op(StrEnum):
    """Collectives as nccl-tests names them."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    ALLTOALL = "alltoall"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    SENDRECV = "sendrecv"


class Algorithm(StrEnum):
    """How a collective moves data (NCCL's names, plus hierarchical and pairwise; mesh and rdh as the
    Neuron runtime names its one-step routed and recursive doubling-halving algorithms)."""

    RING = "ring"
    TREE = "tree"
    NVLS = "nvls"
    NVLSTREE = "nvlstree"
    HIERARCHICAL = "hierarchical"
    PAIRWISE = "pairwise"
    DIRECT = "direct"
    MESH = "mesh"
    RDH = "rdh"


class Protocol(StrEnum):
    """NCCL protocols: LL (8-byte lines, 4 of flag), LL128 (120 of 128 bytes), Simple (bulk)."""

    LL = "ll"
    LL128 = "ll128"
    SIMPLE = "simple"


def parse_op(name: str) -> Op:
    """The ``Op`` named ``name`` (``allreduce`` and ``all-reduce`` work too)."""
    key = name.strip().lower().replace("-", "_")
    aliases = {
        "allreduce": "all_reduce",
        "allgather": "all_gather",
        "reducescatter": "reduce_scatter",
        "all_to_all": "alltoall",
        "send_recv": "sendrecv",
        "p2p": "sendrecv",
    }
    try:
        return Op(aliases.get(key, key))
    except ValueError:
        raise UnknownNameError("collective", name, [op.value for op in Op]) from None


def busbw_factor(op: Op, num_ranks: int) -> float:
    """nccl-tests' busbw / algbw for ``op`` on ``num_ranks`` ranks."""
    n = num_ranks
    if op is Op.ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL):
        return (n - 1) / n
    return 1.0
