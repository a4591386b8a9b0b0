"""Planning a serving deployment on one instance: which tensor-parallel degree serves a request best.

A :class:`ServingScenario` says what is asked: offline throughput (at a given batch, or the best
that fits), latency at a request rate, or the highest rate that meets latency targets.
:func:`best_serving_layout` tries every degree the heads allow (:func:`tp_candidates`) with the
instance filled by replicas and keeps the best: the most output tokens/s, or at a fixed rate the
lowest TPOT.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.model_split import check_model_split
from clustersim.serving.engine import InferenceCalibration, ServingSystem, serving_system_for_instance
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import Request, ServingEstimate, estimate_offline
from clustersim.serving.latency import estimate_server, max_rate
from clustersim.serving.serving_system import MoeExchange
from clustersim.workload.transformer import Transformer


@dataclass(frozen=True, kw_only=True)
class ServingScenario:
    """What a serving estimate answers: offline throughput at ``batch`` sequences per replica (None:
    the best that fits); or, at ``rate_per_s`` requests/s, TTFT and TPOT; or the highest rate whose
    mean TTFT and TPOT meet ``ttft_target_s`` / ``tpot_target_s``."""

    batch: int | None = None
    rate_per_s: float | None = None
    ttft_target_s: float | None = None
    tpot_target_s: float | None = None

    def __post_init__(self) -> None:
        check_load(self.batch, self.rate_per_s, self.ttft_target_s, self.tpot_target_s)

    @property
    def has_targets(self) -> bool:
        """Latency targets are given: the answer is the highest rate that meets them."""
        return self.ttft_target_s is not None or self.tpot_target_s is not None


def check_load(batch: int | None, rate_per_s: float | None, ttft_s: float | None, tpot_s: float | None) -> None:
    """One mode: offline (a batch, or the best) or server (a rate, or latency targets, where the rate sets
    the batch); options of both refused, named by their flags."""
    if rate_per_s is not None and (ttft_s is not None or tpot_s is not None):
        raise ClusterSimError("--rate: give either a rate or latency targets (--ttft-target/--tpot-target)")
    server = [flag for flag, v in (("--rate", rate_per_s), ("--ttft-target", ttft_s), ("--tpot-target", tpot_s)) if v]
    if batch is not None and server:
        raise ClusterSimError(
            f"--batch: offline mode's batch is not used with {', '.join(server)} (server mode: the request rate sets "
            "the batch); give one or the other",
            field="--batch",
            value=batch,
        )


def estimate_scenario(
    model: Transformer,
    system: ServingSystem,
    request: Request,
    scenario: ServingScenario,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
) -> ServingEstimate:
    """The estimate ``scenario`` asks for on ``system`` served by ``engine`` (default: its accelerator
    family's, ``clustersim.serving.engines.engine_for``)."""
    if scenario.rate_per_s is not None:
        return estimate_server(model, system, request, scenario.rate_per_s, cal, engine)
    if scenario.has_targets:
        return max_rate(
            model,
            system,
            request,
            ttft_target_s=math.inf if scenario.ttft_target_s is None else scenario.ttft_target_s,
            tpot_target_s=math.inf if scenario.tpot_target_s is None else scenario.tpot_target_s,
            cal=cal,
            engine=engine,
        )
    return estimate_offline(model, system, request, batch=scenario.batch, cal=cal, engine=engine)


def tp_candidates(model: Transformer, catalog: Catalog, instance: str, *, pp: int = 1) -> list[int]:
    """Tensor-parallel degrees worth trying on one instance: powers of two that the heads allow."""
    devices = int(catalog.instance(instance).num_accelerators.value)
    out: list[int] = []
    tp = 1
    while tp * pp <= devices:
        try:
            check_model_split(model, tp=tp, pp=pp, uneven_stages=True)
            out.append(tp)
        except ClusterSimError:
            pass
        tp *= 2
    return out


def _why_no_degree(model: Transformer, catalog: Catalog, instance: str, pp: int) -> str:
    """Why no tensor-parallel degree can be tried with ``pp`` on one ``instance``: the pipeline degree
    itself (more than the devices, or more stages than layers), else the heads."""
    devices = int(catalog.instance(instance).num_accelerators.value)
    if pp > devices:
        return f"--pp {pp} is more than the {devices} devices of one {instance} (serving runs on one instance)"
    try:
        check_model_split(model, tp=1, pp=pp, uneven_stages=True)
    except ClusterSimError as exc:
        return f"--pp {pp}: {exc}"
    return f"--tp: no power-of-two degree up to {devices // pp} divides the heads of {model.name}"


def best_serving_layout(
    model: Transformer,
    catalog: Catalog,
    instance: str,
    request: Request,
    *,
    tp: int | None = None,
    pp: int = 1,
    scenario: ServingScenario | None = None,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    attention_dp: int = 1,
    moe_exchange: MoeExchange = "gather",
    nodes: int = 1,
) -> ServingEstimate:
    """The estimate on ``nodes`` (default one) ``instance``s filled with replicas of ``tp x pp`` devices served by
    ``engine`` (a name from ``clustersim.serving.engines`` or a profile; default: the family's); without ``tp``, the
    degree with the best result (most output tokens/s; at a fixed rate, the lowest TPOT). When no
    degree works, the last degree's error (the largest tried, the likeliest to fit) is raised.
    ``attention_dp`` > 1 (given with ``tp``): that many groups of ``tp x pp`` devices a replica
    (``clustersim.serving.attention_dp``), its experts reached by ``moe_exchange``."""
    scenario = scenario or ServingScenario()
    if moe_exchange != "gather" and attention_dp == 1:
        raise ClusterSimError(
            f"--moe-exchange: {moe_exchange} moves tokens between attention data-parallel groups; give --attention-dp",
            field="--moe-exchange",
            value=moe_exchange,
        )
    if nodes > 1 and tp is None:
        raise ClusterSimError(
            f"--nodes: {nodes} instances need --tp (and --pp): the chosen degree keeps a replica in one instance",
            field="--nodes",
            value=nodes,
        )
    if attention_dp > 1 and tp is None:
        raise ClusterSimError(
            f"--attention-dp: {attention_dp} groups need --tp (the ranks of each group)",
            field="--attention-dp",
            value=attention_dp,
        )
    if tp is not None:
        system = serving_system_for_instance(
            catalog, instance, tp=tp, pp=pp, attention_dp=attention_dp, moe_exchange=moe_exchange, nodes=nodes
        )
        return estimate_scenario(model, system, request, scenario, cal, engine)
    found: list[ServingEstimate] = []
    problems: list[ClusterSimError] = []
    for degree in tp_candidates(model, catalog, instance, pp=pp):
        try:
            system = serving_system_for_instance(catalog, instance, tp=degree, pp=pp)
            found.append(estimate_scenario(model, system, request, scenario, cal, engine))
        except ClusterSimError as exc:
            problems.append(exc)
    if not found:
        last = problems[-1] if problems else ClusterSimError(_why_no_degree(model, catalog, instance, pp))
        raise ClusterSimError(str(last), field=last.field, value=last.value)  # the option and value it names
    if scenario.rate_per_s is not None:
        return min(found, key=lambda e: e.tpot_s)
    return max(found, key=lambda e: e.output_tokens_per_s)
