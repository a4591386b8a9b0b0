"""Predict a ground-truth inference case (``data/README.md`` format) with the serving model.

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
    InferenceCalibration,
    parse_precision,
    serving_system_for_accelerator,
)
from clustersim.serving.estimate import Batching, Request, ServingEstimate, estimate_offline
from clustersim.serving.latency import max_rate
from clustersim.validation.cases import Case, CaseModel, CaseParallel, CaseSystem, CaseWorkload, as_case
from clustersim.workload.transformer import transformer_from_mapping

ASSUMED_INPUT_TOKENS = 220.0
SERVER_TTFT_TARGET_S = 2.0
SERVER_TPOT_TARGET_S = 0.2


def case_estimate(
    case: Case | Mapping[str, Any], catalog: Catalog, cal: InferenceCalibration | None = None
) -> ServingEstimate:
    """The serving estimate of a case (offline, or server at the highest rate meeting its targets)."""
    case = as_case(case, "inference")
    where = f"case {case.id}"
    model = transformer_from_mapping((case.model or CaseModel()).shape(), where=f"{where}: model")
    system = case.system or CaseSystem()
    parallel = case.parallel or CaseParallel()
    workload = case.workload or CaseWorkload()
    if not system.accelerator:
        raise ClusterSimError(f"{where}: system.accelerator is missing")
    tp, pp, dp = parallel.tp or 1, parallel.pp or 1, parallel.dp or 1
    serving = serving_system_for_accelerator(
        catalog,
        system.accelerator,
        tp=tp,
        pp=pp,
        dp=dp,
        devices_per_node=system.devices_per_node or None,
        instance=system.instance or None,
    )
    precision = parse_precision(str(case.precision or "bf16"), f"{where}: precision")
    output = workload.output_tokens
    if not output:
        raise ClusterSimError(f"{where}: workload.output_tokens is missing")
    request = Request(
        input_tokens=float(workload.input_tokens or ASSUMED_INPUT_TOKENS),
        output_tokens=float(output),
        precision=precision,
        batching=Batching.CONTINUOUS,
    )
    if workload.scenario == "server":
        return max_rate(
            model,
            serving,
            request,
            ttft_target_s=workload.ttft_target_s or SERVER_TTFT_TARGET_S,
            tpot_target_s=workload.tpot_target_s or SERVER_TPOT_TARGET_S,
            cal=cal,
        )
    return estimate_offline(model, serving, request, batch=workload.batch or None, cal=cal)


def predict_inference_case(
    case: Case | Mapping[str, Any], field: str, catalog: Catalog, cal: InferenceCalibration | None = None
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
