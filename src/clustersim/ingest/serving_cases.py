"""The model, system and layout of a serving run, which its benchmark output does not print: from the
options (``--model``, ``--instance`` or ``--accelerator``, ``--tp``, ``--dp``, ``--precision``)."""

from __future__ import annotations

import math
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest.cases import SystemOptions
from clustersim.validation.cases import PRECISIONS
from clustersim.workload.transformer import Transformer


def model_fields(model: Transformer) -> dict[str, Any]:
    """The case format's ``model`` of a zoo model; refused where the format cannot carry its shape."""
    if model.mla is not None or model.sliding_window:
        raise ClusterSimError(
            f"--model {model.name}: latent attention or sliding windows are not fields of a case's model "
            f"(data/README.md); a dense or MoE model with full attention is",
            field="--model",
            value=model.name,
        )
    fields: dict[str, Any] = {
        "name": model.name,
        "layers": model.layers,
        "hidden": model.hidden,
        "ffn_hidden": model.moe.expert_ffn_hidden or model.ffn_hidden if model.moe else model.ffn_hidden,
        "heads": model.heads,
        "vocab": model.vocab,
        "ffn_type": model.ffn_type.value,
    }
    if model.kv_heads:
        fields["kv_heads"] = model.kv_heads
    if model.head_dim:
        fields["head_dim"] = model.head_dim
    if model.moe is not None:
        fields["moe"] = {
            "experts": model.moe.experts,
            "top_k": model.moe.top_k,
            "shared_experts": model.moe.shared_experts,
        }
    return fields


def serving_system(options: SystemOptions, catalog: Catalog, where: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case's ``system`` and its ``parallel`` and ``precision``: ``tp x dp`` devices of the instance or
    accelerator the options name."""
    tp, dp = options.tp or 1, options.dp or 1
    devices = tp * dp
    if options.instance is not None:
        instance = catalog.instance(options.instance)
        per_node = int(instance.num_accelerators.value)
        system: dict[str, Any] = {"instance": instance.id, "accelerator": instance.accelerator}
    elif options.accelerator is not None:
        per_node = devices
        system = {"accelerator": catalog.accelerator(options.accelerator).id}
    else:
        raise ClusterSimError(
            f"{where}: a serving benchmark does not print its hardware; give --instance or --accelerator",
            field="--instance",
        )
    nodes = math.ceil(devices / per_node)
    system |= {"devices": devices, "devices_per_node": min(per_node, devices), "nodes": nodes}
    precision = options.precision or "bf16"
    if precision not in PRECISIONS:
        raise ClusterSimError(
            f"--precision {precision!r} is not one (valid: {', '.join(PRECISIONS)})", field="--precision"
        )
    return system, {"parallel": {"tp": tp, "pp": 1, "dp": dp}, "precision": precision}
