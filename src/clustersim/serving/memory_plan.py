"""One device's memory under serving: the weights held, the workspace, and what is left for the KV cache."""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.serving.calibration import InferenceCalibration, default_calibration
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.formats import ServingPrecision
from clustersim.serving.memory import bytes_per_element, kv_bytes_per_token, weight_bytes_per_device
from clustersim.serving.reserved_memory import rule_reserved_fraction
from clustersim.serving.serving_system import ServingSystem
from clustersim.workload.transformer import Transformer

GIB = 2**30


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Memory of one device: what is held, what is left for the KV cache, and how many tokens that is
    (``kv_bytes_per_token`` and ``kv_capacity_tokens`` count a token on every attention layer; a windowed layer
    keeps at most its window of each sequence, which ``reserved_tokens`` counts per sequence, and a Gated DeltaNet
    layer a state, which ``state_room`` places)."""

    memory_bytes: float
    weights_bytes: float
    workspace_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    kv_capacity_tokens: float


def reserved_fraction(profile: EngineProfile, system: ServingSystem) -> float:
    """The share of each device's memory ``profile`` leaves unused on ``system``: its stated share, else its
    rule's (``clustersim.serving.reserved_memory``)."""
    if profile.reserved_memory_fraction is not None:
        return profile.reserved_memory_fraction
    assert profile.reserved_memory_rule is not None  # EngineProfile requires one of them
    device = system.system
    chunk = profile.token_budget(device.accelerator.id)
    return rule_reserved_fraction(
        profile.reserved_memory_rule, device.memory_bytes, tp=system.tp, pp=system.pp,
        attention_dp=system.attention_dp, chunk_tokens=chunk,
    )  # fmt: skip


def memory_plan(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> MemoryPlan:
    """Split one device's memory (the share the engine uses); ``ClusterSimError`` when the weights and
    workspace do not fit."""
    cal = default_calibration() if cal is None else cal
    profile = engine_profile(engine, system.family)
    usable = system.system.memory_bytes * (1.0 - reserved_fraction(profile, system))
    # an engine that sizes its unused share by its own rule keeps its activations and graph buffers in that share,
    # its rule's or a stated one (SGLang's --mem-fraction-static is the weights' and KV pool's share); another's
    # share is the whole engine's (vLLM's --gpu-memory-utilization), its workspace inside what it uses
    workspace = 0.0 if profile.reserved_memory_rule is not None else cal.workspace_bytes
    weights = weight_bytes_per_device(model, precision, system.tp, system.pp, system.attention_dp)
    budget = (usable - weights - workspace) * profile.kv_memory_fraction
    if budget <= 0:
        devices = system.system.num_devices  # the instances the replicas fill (serving_system_for_instance)
        nodes = system.system.num_nodes
        where = "one instance" if nodes == 1 else f"the {nodes} instances"
        if system.replica_devices < devices:
            advice = f"use a larger tp or pp (up to the {devices} devices of {where}), fp8, or more memory"
        else:
            fp8 = weight_bytes_per_device(model, Dtype.FP8, system.tp, system.pp, system.attention_dp)
            if bytes_per_element(precision) <= 1:
                lighter = f"its weights are {precision.value} already"
            elif fp8 + workspace < usable:
                lighter = f"fp8 weights ({fp8 / GIB:.1f} GiB per device) would fit"
            else:
                lighter = "fp8 would not fit either"
            advice = (
                f"it does not fit {where} even over all {'its' if nodes == 1 else 'their'} {devices} devices: "
                f"{lighter}; or use more instances "
                "(--nodes) or an instance with more memory per device"
            )
        raise ClusterSimError(
            f"model: {model.name} at {precision.value} needs {weights / GIB:.1f} GiB of weights + "
            f"{workspace / GIB:.1f} GiB workspace per device, more than the "
            f"{usable / GIB:.1f} GiB of {system.device_name} at {system.layout}; {advice}",
            field="model",
        )
    per_token = kv_bytes_per_token(model, kv_precision, system.tp, system.pp)
    return MemoryPlan(usable, weights, workspace, budget, per_token, budget / per_token)
