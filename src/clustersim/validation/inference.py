"""Predict a ground-truth inference case (``data/README.md`` format) with the serving model.

Assumptions a case does not state:

* ``input_tokens`` or ``output_tokens`` null: the mean of the request set the workload names in
  ``dataset`` (``clustersim.serving.datasets``: MLPerf Llama 2 70B's ``openorca`` prompts average
  222.3 tokens over its 24,576 samples); with no dataset, or one that gives no mean for that length,
  no number is assumed: the case is skipped as "input unknown" (or "output unknown"), naming the
  field and the datasets known. ``assumed_lengths`` says per case what was taken from a dataset;
* ``kv_precision`` null: the engine's default (``kv_cache_default``): the precision of the weights in
  TensorRT-LLM (its fp8 runs use an fp8 KV cache), 16-bit beside fp8 weights in vLLM and SGLang
  (``--kv-cache-dtype auto``), fp8 beside 4-bit weights (``nvfp4``/``mxfp4``: NVIDIA's FP4 checkpoints
  quantize it so);
* the engine is the profile of the case's ``software.framework`` whose release range holds the
  release or month ``software.version`` names (``clustersim.serving.engines.engine_for_software``),
  default TensorRT-LLM; a framework no profile serves, or an engine that does not run on the case's
  accelerator family (a GPU engine on Trainium), is an error; batching is how that engine's
  benchmarks batch (in-flight, or static for TensorRT-LLM before v0.10 and transformers-neuronx); a
  ``concurrency`` case on a static-batching engine is a loop of static batches of ``batch / dp``
  sequences per replica (transformers-neuronx's 'Batch' benchmarks);
* ``workload.compiled_batch`` / ``compiled_sequence_tokens`` null: the engine profile's (packaged: the live
  batch and the request's own length); stated, they are copied onto the profile (``compiled_engine``);
* a ``system.power_W`` other than the catalogued TDP sets the board power (compute clocks follow it);
* ``concurrency`` cases keep ``batch`` requests in flight on the whole system (over its ``dp``
  replicas), as a closed-loop load generator does;
* server cases meet ``SERVER_TTFT_TARGET_S`` / ``SERVER_TPOT_TARGET_S`` (MLPerf v4.0 Llama 2 70B:
  TTFT <= 2 s, TPOT <= 200 ms) unless the workload gives ``ttft_target_s`` / ``tpot_target_s``, at
  the 99th percentile as MLPerf applies them (``SERVER_PERCENTILE``: the TTFT's queueing tail); a server case
  with ``request_rate_per_s`` is priced at that rate;
* ``workload.requests`` stated: a finite run, simulated (``clustersim.validation.finite_runs``); null: the
  closed forms' steady state. ``workload.engine_settings`` replaces the profile's caps (``engine_with_settings``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from pydantic import ValidationError

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Dtype
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.intervals.residuals import PERCENTILE_FIELDS
from clustersim.serving.concurrency import estimate_concurrency
from clustersim.serving.datasets import SIDES, request_datasets
from clustersim.serving.engine import (
    InferenceCalibration,
    ServingSystem,
    parse_precision,
    serving_system_for_accelerator,
)
from clustersim.serving.engines import DEFAULT_ENGINE, EngineProfile, check_runs_on, engine_for_software
from clustersim.serving.estimate import Request, ServingEstimate, estimate_offline
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.serving_system import MoeExchange
from clustersim.serving.sim_requests import request_spread
from clustersim.validation.case_model import case_transformer
from clustersim.validation.cases import Case, CaseParallel, CaseSystem, CaseWorkload, as_case
from clustersim.validation.disaggregated_cases import disaggregated_case_rate, disaggregation
from clustersim.validation.engine_settings import engine_with_settings, engine_with_software
from clustersim.validation.finite_runs import (
    FIGURES,
    FiniteRun,
    finite_run,
    finite_run_requests,
    remembered_run,
    simulates,
    workload_sampler,
)
from clustersim.workload.transformer import Transformer

SERVER_TTFT_TARGET_S = 2.0
SERVER_TPOT_TARGET_S = 0.2
SERVER_PERCENTILE = 0.99


@dataclass(frozen=True)
class CaseDeployment:
    """What a case runs: its model, serving system, request (mean lengths, precisions, the engine's batching),
    engine profile and workload, each resolved as the module's assumptions say."""

    model: Transformer
    serving: ServingSystem
    request: Request
    engine: EngineProfile
    workload: CaseWorkload
    where: str


def case_deployment(
    case: Case | Mapping[str, Any], catalog: Catalog, engine_override: EngineProfile | None = None
) -> CaseDeployment:
    """The deployment of a case (``case_estimate`` prices it with the closed forms, ``serving_latency``
    simulates it); an error names the case and the field."""
    case = as_case(case, "inference")
    where = f"case {case.id}"
    model, _ = case_transformer(case.model, where)  # a serving case reports no assumptions
    system = case.system or CaseSystem()
    parallel = case.parallel or CaseParallel()
    workload = case.workload or CaseWorkload()
    if not system.accelerator:
        raise ClusterSimError(f"{where}: system.accelerator is missing")
    serving = serving_system_for_accelerator(
        catalog,
        system.accelerator,
        tp=parallel.tp or 1,
        pp=parallel.pp or 1,
        dp=parallel.dp or 1,
        devices_per_node=system.devices_per_node or None,
        instance=system.instance or None,
        board_power_watts=system.power_W or None,
        attention_dp=parallel.attention_dp or 1,
        moe_exchange=serving_exchange(parallel, where),
    )
    software = case.software
    try:
        engine = engine_override or engine_for_software(
            software.framework if software else None, software.version if software else None
        )
        check_runs_on(engine, serving.family, accelerator=serving.system.accelerator.id)
    except ClusterSimError as exc:
        raise ClusterSimError(f"{where}: {exc}", field=exc.field, value=exc.value) from None
    precision = parse_precision(str(case.precision or "bf16"), f"{where}: precision")
    kv = parse_precision(case.kv_precision, f"{where}: kv_precision") if case.kv_precision else None
    if kv is None and engine.kv_cache_default == "activations" and precision is Dtype.FP8:
        kv = Dtype.BF16  # the engine's auto: the model's 16-bit dtype beside 8-bit weights
    input_tokens, output_tokens = workload_lengths(workload, where)
    engine = compiled_engine(engine, workload, input_tokens, output_tokens, parallel.dp or 1, where)
    engine = engine_with_settings(engine_with_software(engine, software, where), workload.engine_settings)
    request = Request(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        precision=precision,
        kv_precision=kv,
        batching=engine.benchmark_batching,
        **request_spread(workload_sampler(workload, input_tokens, output_tokens)),
    )
    return CaseDeployment(model, serving, request, engine, workload, where)


def serving_exchange(parallel: CaseParallel, where: str) -> MoeExchange:
    """How a serving case's attention-DP ranks reach the experts: ``parallel.ep_dispatcher`` alltoall, deepep or
    hybridep is an all-to-all (``clustersim.serving.moe_exchange``), none TensorRT-LLM's gather; a dispatcher
    without attention data parallel is refused (plain tensor parallelism exchanges no tokens)."""
    if parallel.ep_dispatcher is None:
        return "gather"
    if (parallel.attention_dp or 1) == 1:
        raise ClusterSimError(
            f"{where}: parallel.ep_dispatcher {parallel.ep_dispatcher!r}: a serving case's experts exchange tokens "
            "only under attention data parallel (give parallel.attention_dp)",
            field="parallel.ep_dispatcher",
            value=parallel.ep_dispatcher,
        )
    return "alltoall"


def compiled_engine(
    engine: EngineProfile, workload: CaseWorkload, input_tokens: float, output_tokens: float, dp: int, where: str
) -> EngineProfile:
    """``engine`` with the compiled shapes the workload states (``compiled_batch``, ``compiled_sequence_tokens``,
    ``context_buckets``; null: the profile's); refused on an engine that compiles no static shapes (no buckets),
    where the requests in flight per replica exceed the compiled batch or a request (input + output) the compiled
    length, and where the buckets are not ascending or outgrow the compiled length."""
    stated: dict[str, Any] = {
        name: value
        for name in ("compiled_batch", "compiled_sequence_tokens", "context_buckets")
        if (value := getattr(workload, name)) is not None
    }
    if not stated:
        return engine
    name, value = next(iter(stated.items()))
    if engine.bucket_min_tokens is None:
        raise ClusterSimError(
            f"{where}: workload.{name} {value}: engine {engine.name!r} compiles no static shapes (it has no "
            f"bucket_min_tokens); compiled shapes apply to the Neuron engines",
            field=f"workload.{name}",
            value=value,
        )
    batch = workload.batch or 1
    compiled_batch = stated.get("compiled_batch")
    if compiled_batch is not None and batch > compiled_batch * dp:
        raise ClusterSimError(
            f"{where}: workload.compiled_batch {compiled_batch}: workload.batch {batch} over dp {dp} is more "
            f"sequences per replica than the compiled batch runs (at most {compiled_batch})",
            field="workload.compiled_batch",
            value=compiled_batch,
        )
    compiled_tokens = stated.get("compiled_sequence_tokens")
    if compiled_tokens is not None and input_tokens + output_tokens > compiled_tokens:
        raise ClusterSimError(
            f"{where}: workload.compiled_sequence_tokens {compiled_tokens}: a request of {input_tokens:g} input + "
            f"{output_tokens:g} output tokens is longer than the compiled positions",
            field="workload.compiled_sequence_tokens",
            value=compiled_tokens,
        )
    buckets = stated.get("context_buckets")
    if buckets is not None:
        stated["context_buckets"] = tuple(buckets)
        try:  # the profile's own rules for its buckets (ascending, within the compiled length)
            return EngineProfile.model_validate(engine.model_dump() | stated)
        except ValidationError as exc:
            problem = exc.errors()[0]["msg"].removeprefix("Value error, ").removeprefix(f"{list(buckets)}: ")
            raise ClusterSimError(
                f"{where}: workload.context_buckets {list(buckets)}: {problem}",
                field="workload.context_buckets",
                value=list(buckets),
            ) from None
    return engine.model_copy(update=stated)


def static_batch(deployment: CaseDeployment) -> int:
    """The static batch per replica of a ``concurrency`` case on a static-batching engine: ``batch / dp``,
    which must be whole."""
    workload, dp = deployment.workload, deployment.serving.dp
    per_replica = (workload.batch or 1) / dp
    if per_replica != int(per_replica):
        raise ClusterSimError(
            f"{deployment.where}: workload.batch {workload.batch} is not a whole number of static batches over dp {dp}",
            field="workload.batch",
            value=workload.batch,
        )
    return int(per_replica)


def case_estimate(
    case: Case | Mapping[str, Any],
    catalog: Catalog,
    cal: InferenceCalibration | None = None,
    engine_override: EngineProfile | None = None,
) -> ServingEstimate:
    """The serving estimate of a case (offline, or server at the highest rate meeting its targets), on the
    profile of its ``software`` or on ``engine_override`` (a fit of the engine's own constants)."""
    return deployment_estimate(case_deployment(case, catalog, engine_override), cal)


def deployment_estimate(deployment: CaseDeployment, cal: InferenceCalibration | None = None) -> ServingEstimate:
    """``case_estimate`` of a resolved deployment."""
    model, serving, request, engine = deployment.model, deployment.serving, deployment.request, deployment.engine
    workload, where = deployment.workload, deployment.where
    if workload.scenario == "server" and workload.request_rate_per_s is not None:
        continuous = replace(request, batching=Batching.CONTINUOUS)
        return estimate_server(model, serving, continuous, workload.request_rate_per_s, cal=cal, engine=engine)
    if workload.scenario == "server":
        return max_rate(
            model,
            serving,
            replace(request, batching=Batching.CONTINUOUS),
            ttft_target_s=workload.ttft_target_s or SERVER_TTFT_TARGET_S,
            tpot_target_s=workload.tpot_target_s or SERVER_TPOT_TARGET_S,
            cal=cal,
            engine=engine,
            percentile=SERVER_PERCENTILE,
        )
    if workload.scenario == "concurrency":
        if not workload.batch:
            raise ClusterSimError(f"{where}: workload.batch (requests in flight) is missing for a concurrency case")
        if engine.benchmark_batching is Batching.STATIC:  # a closed loop of static batches, one after another
            batch = static_batch(deployment)
            return estimate_offline(model, serving, request, batch=batch, cal=cal, engine=engine)
        return estimate_concurrency(
            model, serving, replace(request, batching=Batching.CONTINUOUS), workload.batch, cal=cal, engine=engine
        )
    return estimate_offline(model, serving, request, batch=workload.batch or None, cal=cal, engine=engine)


def _case_engine(case: Case | Mapping[str, Any]) -> EngineProfile | None:
    """The engine profile of the case's ``software`` (None: a framework no profile serves)."""
    software = as_case(case, "inference").software
    try:
        return engine_for_software(software.framework if software else None, software.version if software else None)
    except ClusterSimError:
        return None


def fits_reference_calibration(case: Case | Mapping[str, Any]) -> bool:
    """Whether the serving calibration (``calibration.toml``, the achieved fractions and overheads of the reference
    engine, TensorRT-LLM) is fitted on this case: a tensor-parallel run of the reference engine (its harness
    profiles included). Not another GPU engine's (vLLM, SGLang: their profiles' settings are stated priors, which
    their runs judge) nor a Trainium engine's (the Neuron profiles' own constants,
    ``benchmarks/calibrate_neuron_serving.py``), nor an attention-data-parallel deployment (``parallel.attention_dp``:
    every constant was fitted on tensor-parallel runs, and such runs judge them with the groups' exchange and
    imbalance beside; in a cross-validation fold they would move the MoE cost per token to stand in for what the
    model lacks there), nor a disaggregated one (``parallel.disaggregate``: its pools are priced by the same
    constants, and judge them). A framework no profile serves is left in, to be skipped with its reason."""
    case = as_case(case, "inference")
    if case.parallel is not None and ((case.parallel.attention_dp or 1) > 1 or case.parallel.disaggregate):
        return False
    profile = _case_engine(case)
    return profile is None or profile.framework == DEFAULT_ENGINE


def engine_fitted_case(case: Case | Mapping[str, Any]) -> bool:
    """Whether the case's engine profile carries settings fitted on runs like it (its ``fitted`` note: the
    Neuron engines' pair, fitted on every Trainium serving case), so its prediction is in sample."""
    profile = _case_engine(case)
    return profile is not None and profile.fitted is not None


def predict_inference_case(
    case: Case | Mapping[str, Any],
    field: str,
    catalog: Catalog,
    cal: InferenceCalibration | None = None,
    engine_override: EngineProfile | None = None,
) -> float:
    """The case's ``field`` (``finite_runs.FIGURES``: output_tokens_per_s, ttft_s, tpot_s, or a percentile of the
    latter two, which a finite run alone predicts) as the model predicts it: a run of a stated
    number of requests through the simulator (``finite_runs``; refused on an engine it does not run), a
    disaggregated one by its pools' closed form (``disaggregated_cases``), any other through the closed forms.
    ``engine_override``: another profile in place of the case's (an engine fit's trial settings; its runs are not
    remembered)."""
    d = case_deployment(case, catalog, engine_override)
    if disaggregation(case) is not None:
        found = disaggregated_case_rate(
            as_case(case, "inference"), d.model, d.request, d.engine, catalog, cal=cal, percentile=SERVER_PERCENTILE,
            ttft_target_s=d.workload.ttft_target_s or SERVER_TTFT_TARGET_S,
            tpot_target_s=d.workload.tpot_target_s or SERVER_TPOT_TARGET_S,
        )  # fmt: skip
        return _field(found.output_tokens_per_s, found.ttft_s, found.tpot_s, field)
    requests = finite_run_requests(d.workload)
    if requests is not None:
        if not simulates(d.engine):
            raise ClusterSimError(
                f"{d.where}: workload.requests {requests}: engine {d.engine.name!r} compiles static shapes or "
                "batches statically, which the simulator does not run, and the closed forms price a steady state, "
                "not a finite run",
                field="workload.requests",
                value=requests,
            )

        def simulated() -> FiniteRun:
            return finite_run(d.model, d.serving, d.request, d.engine, d.workload, requests, cal)

        if engine_override is not None:
            return simulated().value(field)
        key = case.model_dump_json() if isinstance(case, Case) else json.dumps(case, sort_keys=True)
        return remembered_run(key, catalog, cal, simulated).value(field)
    estimate = deployment_estimate(d, cal)
    return _field(estimate.output_tokens_per_s, estimate.ttft_s, estimate.tpot_s, field)


def _field(output_tokens_per_s: float, ttft_s: float, tpot_s: float, field: str) -> float:
    """The predicted ``field`` of a serving case priced by the closed forms, among its three; a percentile over
    the requests is a simulated run's only."""
    values = {"output_tokens_per_s": output_tokens_per_s, "ttft_s": ttft_s, "tpot_s": tpot_s}
    if field in PERCENTILE_FIELDS:
        raise ClusterSimError(
            f"{field}: a percentile over a run's requests is predicted by simulating the run, and this case states "
            "no workload.requests (the closed forms give means)",
            field="workload.requests",
        )
    if field not in values:
        raise ClusterSimError(f"cannot predict inference field {field!r} ({', '.join(FIGURES)})")
    return values[field]


def workload_lengths(workload: CaseWorkload, where: str = "case") -> tuple[float, float]:
    """The mean (input, output) tokens of a case's workload: as stated, else the mean of its ``dataset``.

    A length that is null with no dataset, an unknown dataset, or a dataset that gives no mean for it
    is an error, "input unknown: ..." (or "output unknown: ..."), naming the field and the known
    datasets: nothing is assumed that no source states.
    """
    known = request_datasets()
    lengths = []
    for which, stated in zip(SIDES, (workload.input_tokens, workload.output_tokens), strict=True):
        if stated is not None:
            lengths.append(float(stated))
            continue
        field = f"workload.{which}_tokens"
        name = (workload.dataset or "").strip().lower()
        dataset = known.get(name)
        mean = dataset.mean(which) if dataset is not None else None
        if mean is not None:
            lengths.append(mean)
            continue
        with_means = ", ".join(sorted(n for n, d in known.items() if d.mean(which) is not None))
        if not workload.dataset:
            why = "and the case names no workload.dataset"
        elif dataset is None:
            why = f"and workload.dataset {workload.dataset!r} is not a known dataset"
        else:
            why = f"and the dataset {name!r} has no published mean {which} length"
        raise ClusterSimError(
            f"{which} unknown: {where}: {field} is null {why} (datasets with a mean {which} length: {with_means})",
            field=field,
        )
    return lengths[0], lengths[1]


def assumed_lengths(case: Case | Mapping[str, Any], catalog: Catalog | None = None) -> dict[str, float]:
    """The lengths a case's prediction takes from its dataset, field -> tokens (``workload.input_tokens``:
    the dataset's mean, whose source ``clustersim.serving.datasets`` holds); empty when the case states
    its lengths or names no known dataset. ``catalog`` is unused: the signature of the validation
    runner's per-kind assumptions (``training.case_assumptions``)."""
    workload = as_case(case, "inference").workload or CaseWorkload()
    dataset = request_datasets().get((workload.dataset or "").strip().lower())
    if dataset is None:
        return {}
    assumed: dict[str, float] = {}
    for which, stated in zip(SIDES, (workload.input_tokens, workload.output_tokens), strict=True):
        mean = dataset.mean(which)
        if stated is None and mean is not None:
            assumed[f"workload.{which}_tokens"] = mean
    return assumed
