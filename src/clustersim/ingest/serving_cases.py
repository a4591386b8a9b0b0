"""A serving benchmark's run (``ServingRun``, what vLLM's benchmark, genai-perf/AIPerf and trtllm-bench print)
as an inference case; the model, system and layout it does not print come from the options (``--model``,
``--instance`` or ``--accelerator``, ``--tp``, ``--dp``, ``--precision``), and where a tool prints them
(trtllm-bench: TP, PP, the quantization) the two must agree."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.ingest.cases import SystemOptions
from clustersim.validation.case_model import architecture_fields, case_transformer
from clustersim.validation.cases import PRECISIONS, CaseModel
from clustersim.workload.transformer import Transformer


@dataclass(frozen=True)
class ServingRun:
    """One benchmark run. ``values`` in vLLM's result-file names: ``output_throughput`` (tokens/s),
    ``mean_ttft_ms``, ``mean_tpot_ms`` (either may be absent), the mean lengths as ``mean_input_tokens`` /
    ``mean_output_tokens`` or as ``total_input_tokens`` / ``total_output_tokens`` over ``completed``
    requests, and ``max_concurrency`` (None with an infinite rate: every request at once)."""

    path: str
    line: int
    values: dict[str, float]
    request_rate: float = math.inf  # inf: no open-loop rate
    model_id: str | None = None
    tool: str = "vLLM benchmark_serving"
    framework: str | None = "vllm"  # the case format's software.framework (None: not printed)
    version: str = "vllm benchmark_serving"
    offline: bool = False  # every request queued at once, the engine batching what fits (trtllm-bench)
    notes: tuple[str, ...] = ()
    parallel: dict[str, int] = field(default_factory=dict)  # degrees the tool prints (tp, pp, ep)
    precision: str | None = None  # the GEMMs' format where the tool prints it
    kv_precision: str | None = None


CARRIED_TOLERANCE = 0.01


def model_fields(model: Transformer) -> dict[str, Any]:
    """The case format's ``model`` of a zoo model, with the extra context clustersim's reader takes (latent
    attention, dense-first MoE blocks, sliding windows, the architecture fields; the project's
    ``validation/project/README.md``);
    refused where a case could not carry its shape: the case's model read back must have its parameters and FLOPs
    per token within ``CARRIED_TOLERANCE`` (norm weights and biases, which have no field, are less) and its KV
    cache per token exactly (a MoE block every n-th layer or Gemma's four norms a block have no field)."""
    moe = model.moe
    fields: dict[str, Any] = {
        "name": model.name,
        "layers": model.layers,
        "hidden": model.hidden,
        "ffn_hidden": model.expert_ffn if moe is not None else model.ffn_hidden,
        "heads": model.heads,
        "vocab": model.vocab,
        "ffn_type": model.ffn_type.value,
    }
    if model.kv_heads:
        fields["kv_heads"] = model.kv_heads
    if model.head_dim:
        fields["head_dim"] = model.head_dim
    if moe is not None:
        fields["moe"] = {"experts": moe.experts, "top_k": moe.top_k, "shared_experts": moe.shared_experts}
        if moe.latent is not None:
            fields["moe"]["latent"] = moe.latent
        if model.dense_mlp_layers:  # leading or between MoE blocks (Llama 4 Maverick's every other): priced alike
            fields |= {"dense_layers": model.dense_mlp_layers, "dense_ffn_hidden": model.ffn_hidden}
    if model.mla is not None:  # in Megatron-Core's names, as the cases write it: head_dim without the rotary part
        mla = model.mla
        fields["head_dim"] = model.head_dim - mla.rope_head_dim
        fields["mla"] = {
            "q_lora_rank": mla.q_lora_rank or None,
            "kv_lora_rank": mla.kv_lora_rank,
            "qk_head_dim": fields["head_dim"],
            "qk_pos_emb_head_dim": mla.rope_head_dim,
            "v_head_dim": mla.v_head_dim,
        }
    if model.sliding_window:
        fields |= {"sliding_window": model.sliding_window, "window_layers": model.window_layers}
    fields |= architecture_fields(model)  # so a case carries a model the zoo does not hold as well
    _check_carried(model, fields)
    return fields


def _check_carried(model: Transformer, fields: dict[str, Any]) -> None:
    """Refuse a model whose case (``fields``) reads back as another shape."""
    read, _ = case_transformer(CaseModel.model_validate(fields), f"--model {model.name}")
    seq = model.seq_len
    for what, ours, theirs, tolerance in (
        ("parameters", model.num_params(), read.num_params(), CARRIED_TOLERANCE),
        ("FLOPs per token", model.model_flops_per_token(seq), read.model_flops_per_token(seq), CARRIED_TOLERANCE),
        ("KV cache elements per token and layer", model.kv_cache_elements, read.kv_cache_elements, 0.0),
    ):
        if not math.isclose(ours, theirs, rel_tol=tolerance):
            raise ClusterSimError(
                f"--model {model.name}: a case's model cannot carry its shape ({what} {ours:.4g}, {theirs:.4g} as "
                "a case); a case states layers, widths, heads, experts, latent attention, dense MLP blocks and "
                "sliding windows (validation/data/README.md and the project's extra context)",
                field="--model",
                value=model.name,
            )


def _agreed(run: ServingRun, key: str, given: Any, option: str) -> Any:
    stated = run.parallel.get(key) if key in ("tp", "pp", "ep") else getattr(run, key)
    if given is not None and stated is not None and given != stated:
        raise ClusterSimError(
            f"{run.path}, line {run.line}: the output says {key} {stated}, {option} says {given}",
            field=option,
            value=given,
        )
    return stated if stated is not None else given


def serving_system(
    options: SystemOptions, catalog: Catalog, where: str, run: ServingRun | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The case's ``system`` and its ``parallel``, ``precision`` and ``kv_precision``: ``tp x pp x dp``
    devices of the instance or accelerator the options name."""
    run = run or ServingRun(where, 1, {})
    tp = _agreed(run, "tp", options.tp, "--tp") or 1
    pp = run.parallel.get("pp", 1)
    dp = options.dp or 1
    devices = tp * pp * dp
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
    if options.nodes is not None and options.nodes != nodes:
        raise ClusterSimError(
            f"{where}: {devices} devices (tp x pp x dp) at {per_node} per node are {nodes} node(s), --nodes says "
            f"{options.nodes}",
            field="--nodes",
            value=options.nodes,
        )
    system |= {"devices": devices, "devices_per_node": min(per_node, devices), "nodes": nodes}
    precision = _agreed(run, "precision", options.precision, "--precision") or "bf16"
    if precision not in PRECISIONS:
        raise ClusterSimError(
            f"--precision {precision!r} is not one (valid: {', '.join(PRECISIONS)})", field="--precision"
        )
    parallel = {"tp": tp, "pp": pp, "dp": dp} | ({"ep": run.parallel["ep"]} if "ep" in run.parallel else {})
    extra: dict[str, Any] = {"parallel": parallel, "precision": precision}
    if run.kv_precision is not None:
        extra["kv_precision"] = run.kv_precision
    return system, extra


def _mean_lengths(v: dict[str, float]) -> tuple[float, float]:
    if "mean_input_tokens" in v:
        return v["mean_input_tokens"], v["mean_output_tokens"]
    return v["total_input_tokens"] / v["completed"], v["total_output_tokens"] / v["completed"]


def serving_case(
    run: ServingRun, model: dict[str, Any], system: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """The inference case of ``run``: mean lengths per request; offline (the engine batches what fits), or a
    closed loop of ``max_concurrency`` requests (every request at once where the rate is infinite and no
    concurrency is given)."""
    where = f"{run.path}, line {run.line}"
    if math.isfinite(run.request_rate):
        raise ClusterSimError(
            f"{where}: request rate {run.request_rate:g}/s is an open loop, which the case format does not score; "
            f"run with --request-rate inf (and --max-concurrency N)",
            field="request_rate",
        )
    v = run.values
    name = Path(run.path).name
    stem = re.sub(r"[^A-Za-z0-9]+", "_", Path(run.path).stem).strip("_") or "serving"
    input_tokens, output_tokens = _mean_lengths(v)
    notes = [f"read by clustersim ingest from {name}", *run.notes]
    if run.offline:
        workload: dict[str, Any] = {"scenario": "offline", "batch": None}
    elif "max_concurrency" in v:
        workload = {"scenario": "concurrency", "batch": int(v["max_concurrency"])}
    else:
        completed = int(v["completed"])
        notes.append(f"no concurrency limit and an infinite rate: all {completed} requests in flight at once")
        workload = {"scenario": "concurrency", "batch": completed}
    if "completed" in v:
        notes.insert(1, f"mean lengths over {int(v['completed'])} requests")
    measured = {"output_tokens_per_s": v["output_throughput"]}
    if "mean_ttft_ms" in v:
        measured["ttft_s"] = v["mean_ttft_ms"] / 1e3
    if "mean_tpot_ms" in v:
        measured["tpot_s"] = v["mean_tpot_ms"] / 1e3
    return {
        "id": f"{stem}_l{run.line}",
        "kind": "inference",
        "source": f"{name} line {run.line} ({run.tool} result)",
        "notes": "; ".join(notes),
        "model": model,
        "system": system,
        **extra,
        "workload": {
            "input_tokens": round(input_tokens, 1),
            "output_tokens": round(output_tokens, 1),
            **workload,
        },
        "measured": measured,
        "software": {"framework": run.framework, "version": run.version},
    }
