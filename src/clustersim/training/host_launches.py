"""Host-bound MoE steps: a run with no CUDA graphs, or partial ones, waits for its host to launch kernels.

Without CUDA graphs the host launches every kernel of every micro-batch through PyTorch and the framework's Python,
and a dropless MoE layer cannot queue far ahead of the GPU: its token dispatcher copies the tokens per expert to the
host before the all-to-all (Megatron-Core's alltoall dispatcher), so each MoE layer starts from an empty queue.
Where the GPU's own work on a layer is shorter than the host's time to launch it, the GPU waits; the Megatron-Core
team's DeepSeek-V3 write-up names it the first problem of its GB200 baseline ("the CPU kernel launch speed cannot
keep up with the kernel execution speed on GPU ... CPU overhead or host boundedness", NVIDIA/Megatron-LM
docs/discussions/deepseek-v3-gb200-optimization @1d9edcf8, section 2) and CUDA graphs as its cure.

The price: per micro-batch on the slowest pipeline rank, its MoE layers times the host's time per MoE layer
(forward, backward and recompute launches: ``SoftwareProfile.eager_moe_layer_s``, per accelerator, as the host
differs: a GB200's Grace; measured on DeepSeek-V3's layers, and another model's layer takes it in proportion to its
launches, ``clustersim.workload.launches``), less what the GPU does for that micro-batch meanwhile (its compute and
exposed exchanges), where positive, once per micro-batch. Dense
layers launch fewer kernels on more work and are not counted; full capture, or a run that does not say
(``cuda_graphs`` None), pays nothing. The software profile's notes give the constants' evidence.

Partial capture (Megatron-Core's ``cuda_graph_scope`` attn, moe_router, moe_preprocess, ...) replays everything but
a dropless layer's routed experts, whose shapes change with the routing: the host reads the tokens per expert back
(a device-host sync) and then launches the experts' kernels, so the GPU's queue is empty at each MoE layer and it
waits for the host's first launches whatever its own work (``SoftwareProfile.partial_graph_moe_layer_s`` per MoE
layer and micro-batch, per accelerator).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from clustersim.choices import CudaGraphs
from clustersim.compute.software import SoftwareProfile
from clustersim.system import System
from clustersim.training.pricing import Systems
from clustersim.workload.launches import layer_launches
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

# Launches per layer of DeepSeek-V3, whose graph-less runs measured eager_moe_layer_s (clustersim.workload.launches,
# the blocks' own launches: two norms, latent attention with a query rank 10, and over its 61 layers 58 MoE MLPs of
# 7 launches and a shared expert's 3, and 3 dense MLPs of 3)
DEEPSEEK_V3_LAYER_LAUNCHES = 2 + 10 + (58 * 10 + 3 * 3) / 61


def host_time_scale(model: Transformer) -> float:
    """A layer of ``model``'s host time against a DeepSeek-V3 layer's: their launches' ratio (quantization and
    tensor-parallel launches aside: the constant's BF16 and MXFP8 sources fit one value)."""
    return layer_launches(model, quantized=False, tensor_parallel=False) / DEEPSEEK_V3_LAYER_LAUNCHES


def per_layout(system: System | Systems, table: Mapping[str, float]) -> FloatArray | float:
    """``table``'s value for each layout's accelerator (catalog id; 0 where absent): one per layout of a planner's
    ``Systems``, one for all of a ``System``'s."""
    if isinstance(system, Systems):
        return np.array([table.get(member.accelerator.id, 0.0) for member in system.members])[system.index]
    return table.get(system.accelerator.id, 0.0)


def graphs_note(software: SoftwareProfile, model: Transformer, accelerator: str) -> str | None:
    """What an estimate says of a MoE run stated to capture no CUDA graphs: the host time it prices, or that it
    prices none on this accelerator's host, or for a dense model (None: graphs, or not stated)."""
    if software.cuda_graphs == CudaGraphs.PARTIAL:
        return _partial_note(software, model, accelerator)
    if software.cuda_graphs != CudaGraphs.NONE:
        return None
    if model.moe is None:
        return f"no CUDA graphs: not priced for a dense model ({model.name}'s layers' GPU work outlasts their launches)"
    per_layer = software.eager_moe_layer_s.get(accelerator)
    if per_layer is None:
        return (
            f"no CUDA graphs: the host's kernel launches are not priced on {accelerator}'s host ({software.name}'s "
            f"profile has a time for {', '.join(sorted(software.eager_moe_layer_s)) or 'no accelerator'}'s)"
        )
    return (
        f"no CUDA graphs: each MoE layer's launches take {per_layer * host_time_scale(model) * 1e3:.3g} ms of host "
        f"time per micro-batch on {accelerator}'s host ({per_layer * 1e3:g} ms a DeepSeek-V3 layer, in proportion to "
        f"the launches); the step waits where the GPU's work is shorter (in 'framework overhead')"
    )


def _partial_note(software: SoftwareProfile, model: Transformer, accelerator: str) -> str | None:
    """What an estimate says of a MoE run with partial CUDA graphs (None for a dense model: nothing left eager)."""
    if model.moe is None:
        return None
    per_layer = software.partial_graph_moe_layer_s.get(accelerator)
    if per_layer is None:
        return (
            f"partial CUDA graphs: the routed experts' launches after their device-host sync are not priced on "
            f"{accelerator}'s host ({software.name}'s profile has a time for "
            f"{', '.join(sorted(software.partial_graph_moe_layer_s)) or 'no accelerator'}'s)"
        )
    return (
        f"partial CUDA graphs: the routed experts run eagerly after a device-host sync; the GPU waits "
        f"{per_layer * 1e3:g} ms per MoE layer and micro-batch for {accelerator}'s host (in 'framework overhead')"
    )


def eager_wait_s(ctx: Any) -> FloatArray:
    """Seconds per step the GPU waits for its host's launches (a ``clustersim.training.step.StepContext``)."""
    if ctx.sw.cuda_graphs != CudaGraphs.NONE or ctx.model.moe is None or not ctx.sw.eager_moe_layer_s:
        return np.zeros_like(ctx.tokens)
    per_layer = per_layout(ctx.system, ctx.sw.eager_moe_layer_s) * host_time_scale(ctx.model)
    host_mb = ctx.layers_here * (ctx.model.moe_layers / ctx.model.layers) * per_layer
    # what the GPU does for the micro-batch while the host launches: compute and the exposed exchanges
    gpu_mb = ctx.fwd_mb + ctx.bwd_mb + ctx.rec_mb + ctx.pp_mb
    gpu_mb = gpu_mb + ctx.tp_mb.exposed_s + ctx.cp_mb.exposed_s + ctx.ep_mb.exposed_s
    return np.asarray(ctx.micro_batches * np.maximum(host_mb - gpu_mb, 0.0), dtype=np.float64)


def partial_graph_wait_s(ctx: Any) -> FloatArray:
    """Seconds per step the GPU waits at its MoE layers' routed experts under partial CUDA graphs (a
    ``clustersim.training.step.StepContext``): micro-batches x MoE layers on the slowest rank x the host's time."""
    if ctx.sw.cuda_graphs != CudaGraphs.PARTIAL or ctx.model.moe is None or not ctx.sw.partial_graph_moe_layer_s:
        return np.zeros_like(ctx.tokens)
    per_layer = per_layout(ctx.system, ctx.sw.partial_graph_moe_layer_s)
    moe_layers_here = ctx.layers_here * (ctx.model.moe_layers / ctx.model.layers)
    return np.asarray(ctx.micro_batches * moe_layers_here * per_layer, dtype=np.float64)
