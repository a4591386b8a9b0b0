"""Hierarchical all-reduce as flows: inside each host, then across hosts rail by rail, then inside again.

The analytic model's ``hierarchical`` (``network/analytic.py``: time ``2 (g-1)/g / nvlink + 2
(nodes-1)/nodes / network``) in three phases, each a ring, one after the other:

1. reduce-scatter over each host's scale-up domain: a ring through its ``g`` GPUs, ``g - 1`` steps
   of ``size / g``; GPU ``c`` ends holding shard ``c`` of the host's sum;
2. all-reduce of each shard across hosts: ring ``c`` through GPU ``c`` of every host, on that GPU's
   rails (the same-index GPUs share a rail group, so the ring stays on it), ``2 (nodes - 1)`` steps
   of ``size / g / nodes``;
3. all-gather over each host, as 1 in reverse.

A GPU's first step of a phase waits for the last step of the phase before into it and out of it.
Each phase simulates at most ``max_steps`` steps, the last of them standing for the phase's rest
(exact when every step of a phase takes as long, as on a symmetric fabric).
"""

from __future__ import annotations

import numpy as np

from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.dag import CollectiveFlows, FlowBuilder, ring_phase, step_weights
from clustersim.network.flowsim.topology import FatTree, IntArray


def hierarchical_flows(tree: FatTree, hosts: IntArray, size: float, max_steps: int) -> CollectiveFlows:
    """Hierarchical all-reduce of ``size`` bytes per rank over the GPUs of ``hosts``."""
    g, num = tree.spec.gpus_per_host, hosts.size
    gpus = hosts[:, None] * g + np.arange(g)[None, :]  # (hosts, g)
    phases = (  # across hosts (rings of same-index GPUs) or inside each host, steps, chunk
        (False, g - 1, size / g),
        (True, 2 * (num - 1), size / g / num),
        (False, g - 1, size / g),
    )
    builder = FlowBuilder()
    weights: list[float] = []
    entry: tuple[IntArray, IntArray] | None = None  # last flow into / out of each GPU, (hosts, g)
    for across, total, chunk in phases:
        steps = min(total, max_steps)
        flip = _transposed if across else _same
        entry = flip(ring_phase(builder, gpus.T if across else gpus, steps, chunk, len(weights), flip(entry)))
        weights += step_weights(steps, total)
    total_steps = 2 * (g - 1) + 2 * (num - 1)
    return CollectiveFlows(Op.ALL_REDUCE, Algorithm.HIERARCHICAL, builder.flows(), len(weights), total_steps, weights)


def _same(entry: tuple[IntArray, IntArray] | None) -> tuple[IntArray, IntArray] | None:
    return entry


def _transposed(entry: tuple[IntArray, IntArray] | None) -> tuple[IntArray, IntArray] | None:
    return None if entry is None else (entry[0].T, entry[1].T)
