"""Predict a ground-truth inference case (../shared/validation format) with the serving model.

Assumptions a case does not state:

* ``input_tokens`` null: ``ASSUMED_INPUT_TOKENS``. The only such cases are MLPerf Llama 2 70B
  (OpenOrca subset, prompts of at most 1,024 tokens); about 220 is the mean prompt length we read
  off a sample of the rows of a public per-sample summary of that dataset
  (openshift-psap/performance-dashboard, mlperf-data/summaries/llama2-70b-99.csv): an estimate;
* the KV cache has the precision of the weights (fp8 runs in TensorRT-LLM use an fp8 KV cache);
* batching is continuous (in-flight), as in every engine the cases come from;
* server cases meet ``SERVER_TTFT_TARGET_S`` / ``SERVER_TPOT_TARGET_S`` (MLPerf v4.0 Llama 2 70B:
  TTFT <= 2 s, TPOT <= 200 ms) unless the workload gives ``ttft_target_s`` / ``tpot_target_s``;
  the model applies them to mean latencies where MLPerf applies them to the 99th percentile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import (
    DEFAULT_CALIBRATION,
    InferenceCalibration,
    parse_precision,
    serving_system_for_accelerator,
)
from clustersim.serving.estimate import Batching, Request, ServingEstimate, estimate_offline
from clustersim.serving.latency import max_rate
from clustersim.workload.transformer import Transformer, transformer_from_mapping

ASSUMED_INPUT_TOKENS = 220.0
SERVER_TTFT_TARGET_S = 2.0
SERVER_TPOT_TARGET_S = 0.2
_MODEL_KEYS = set(Transformer.model_fields)


def case_estimate(
    case: Mapping[str, Any], catalog: Catalog, cal: InferenceCalibration = DEFAULT_CALIBRATION
) -> ServingEstimate:
    """The serving estimate of a case (offline, or server at the highest rate meeting its targets)."""
    where = f"case {case.get('id')}"
    model_data = {k: v for k, v in (case.get("model") or {}).items() if k in _MODEL_KEYS and v is not None}
    model = transformer_from_mapping(model_data, where=f"{where}: model")
    system = case.get("system") or {}
    parallel = case.get("parallel") or {}
    workload = case.get("workload") or {}
    if not system.get("accelerator"):
        raise ClusterSimError(f"{where}: system.accelerator is missing")
    tp, pp, dp = (int(parallel.get(k) or 1) for k in ("tp", "pp", "dp"))
    serving = serving_system_for_accelerator(
        catalog,
        str(system["accelerator"]),
        tp=tp,
        pp=pp,
        dp=dp,
        devices_per_node=int(system["devices_per_node"]) if system.get("devices_per_node") else None,
        instance=str(system["instance"]) if system.get("instance") else None,
    )
    precision = parse_precision(str(case.get("precision") or "bf16"), f"{where}: precision")
    output = workload.get("output_tokens")
    if not output:
        raise ClusterSimError(f"{where}: workload.output_tokens is missing")
    request = Request(
        input_tokens=float(workload.get("input_tokens") or ASSUMED_INPUT_TOKENS),
        output_tokens=float(output),
        precision=precision,
        batching=Batching.CONTINUOUS,
    )
    batch = workload.get("batch")
    if workload.get("scenario") == "server":
        return max_rate(
            model,
            serving,
            request,
            ttft_target_s=float(workload.get("ttft_target_s") or SERVER_TTFT_TARGET_S),
            tpot_target_s=float(workload.get("tpot_target_s") or SERVER_TPOT_TARGET_S),
            cal=cal,
        )
    return estimate_offline(model, serving, request, batch=int(batch) if batch else None, cal=cal)


def predict_inference_case(
    case: Mapping[str, Any], field: str, catalog: Catalog, cal: InferenceCalibration = DEFAULT_CALIBRATION
) -> float:
    """The case's ``field`` (output_tokens_per_s, ttft_s or tpot_s) as the model predicts it."""
    estimate = case_estimate(case, catalog, cal)
    if field == "output_tokens_per_s":
        return estimate.output_tokens_per_s
    if field == "ttft_s":
        return estimate.ttft_s
    if field == "tpot_s":
        return estimate.tpot_s
    raise ClusterSimError(f"cannot predict inference field {field!r} (output_tokens_per_s, ttft_s, tpot_s)")
