"""ZeRO-3 / FSDP communication of one micro-batch: the parameters gathered for every layer's forward and
backward pass and its gradients reduce-scattered, over each data-parallel group (the dense parameters over the
``dp * cp`` ranks, a MoE model's routed experts over their expert data-parallel ranks)."""

from __future__ import annotations

from typing import Any

import numpy as np

from clustersim.compute.memory import gathered_weight_bytes
from clustersim.network.collectives import Op
from clustersim.training.terms import TermTimes


def zero3_times(ctx: Any) -> TermTimes:  # a clustersim.training.step.StepContext
    """ZeRO-3 / FSDP per micro-batch: each layer's parameters all-gathered in the forward pass and
    again in the backward pass, its gradients reduce-scattered after its backward, in
    ``zero3_collectives_per_layer`` collectives each (one per parameter tensor in DeepSpeed, one
    flat parameter in FSDP: the per-collective latency counts that many times), hierarchically over
    the node's scale-up fabric or flat over the ranks as the framework does. With prefetch the
    next layer's gather runs during this layer's compute: the first gather and the last
    reduce-scatter are exposed, and a layer whose collectives outlast its compute exposes the rest.
    The gathers move 16-bit weights, or an 8-bit job's own format where the framework gathers it
    (``SoftwareProfile.fp8_param_gather``, ``compute.memory.gathered_weight_bytes``).
    Embeddings and head are spread over the layers."""
    lay, sw = ctx.lay, ctx.sw
    where, layers, count = lay.zero >= 3, ctx.layers_here, float(sw.zero3_collectives_per_layer)
    gather, scatter = np.zeros_like(ctx.params), np.zeros_like(ctx.params)
    weight_bytes = gathered_weight_bytes(ctx.precision, sw.fp8_param_gather)
    for params, ranks, stride in ctx.dp_groups:
        # Flat collectives: one rank per "node" of the group's fabric, each on its own network share.
        stride = stride if sw.zero3_hierarchical else np.maximum(stride, lay.tp * ctx.system.scaleup_devices)
        per_layer = params / layers / count
        gather = gather + count * ctx.collective_s(Op.ALL_GATHER, per_layer * weight_bytes, ranks, stride, where)
        grads = per_layer * ctx.grad_bytes_per_element
        scatter = scatter + count * ctx.collective_s(Op.REDUCE_SCATTER, grads, ranks, stride, where)
    link = layers * (2 * gather + scatter)
    if not sw.zero3_prefetch:
        return TermTimes(link, link)
    forward, backward = ctx.fwd_mb / layers, (ctx.bwd_mb + ctx.rec_mb) / layers
    exposed = (
        gather
        + (layers - 1) * np.maximum(gather - forward, 0.0)
        + scatter
        + (layers - 1) * np.maximum(gather + scatter - backward, 0.0)
    )
    return TermTimes(link, np.where(lay.dp_overlap, exposed, link))
