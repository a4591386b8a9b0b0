"""What a serving estimate says of its deployment beyond the request: a pipeline stage's layer mix, the sequences a
hybrid's state pool lets run, prompt steps bound by their host's launches, and a Mamba-2 hybrid's prefill scan at its
FP32 bound."""

from __future__ import annotations

import math

from clustersim.catalog.schema import Dtype
from clustersim.compute.scan_kernel import fp32_bound_note
from clustersim.serving.eager_note import Prompts, eager_note
from clustersim.serving.engine import InferenceCalibration, ServingSystem
from clustersim.serving.engines import EngineProfile
from clustersim.serving.memory import holding_notes, state_room
from clustersim.workload.transformer import Transformer


def state_pool_note(
    model: Transformer, system: ServingSystem, request: Prompts, engine: EngineProfile, kv_room_tokens: float
) -> tuple[str, ...]:
    """Where the engine holds a hybrid's recurrent states in a pool of their own (``StatePool.memory_ratio``), how
    many sequences its slots let run at once on a device of ``kv_room_tokens`` (``MemoryPlan.kv_capacity_tokens``);
    nothing for a model without recurrent layers or an engine that keeps the states in the KV cache's pool."""
    pool = engine.state_pool
    if model.linear_attention is None or pool.memory_ratio is None:
        return ()
    cache_tokens, running, _ = state_room(model, request.kv, kv_room_tokens, pool, system.tp)
    share = pool.memory_ratio / (1.0 + pool.memory_ratio)
    per_request = "a slot" if pool.slots_per_request == 1 else f"{pool.slots_per_request} slots"
    return (
        f"state pool: {engine.name} gives the recurrent states {share:.0%} of a device's KV room, "
        f"{running * pool.slots_per_request:,.0f} slots, and a running request takes {per_request}: at most "
        f"{math.floor(running):,} sequences run at once on a device, beside {cache_tokens:,.0f} tokens of KV cache",
    )


def deployment_notes(
    model: Transformer,
    system: ServingSystem,
    request: Prompts,
    cal: InferenceCalibration,
    engine: EngineProfile,
    kv_room_tokens: float,
) -> tuple[str, ...]:
    """The notes of ``clustersim.serving.memory.holding_notes``, ``state_pool_note`` (of the device's KV room,
    ``kv_room_tokens``), ``clustersim.serving.eager_note`` and ``clustersim.compute.scan_kernel.fp32_bound_note`` (its
    bounds derated alike in a serving step, the device's own peaks decide which binds), in that order."""
    device = system.system
    chip = device.accelerator
    scan = fp32_bound_note(model, chip.id, chip.family, device.peak_flop_per_s(Dtype.BF16), device.fp32_flop_per_s)
    held = holding_notes(model, system.pp) + state_pool_note(model, system, request, engine, kv_room_tokens)
    return held + eager_note(model, system, request, cal, engine) + ((scan,) if scan else ())
