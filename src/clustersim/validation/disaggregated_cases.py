"""Serving cases run disaggregated (``parallel.disaggregate``, the project's extra context): prefill and decode on
pools of their own, each pool's workers ``tp`` devices wide with the caps its engine set.

A server case is scored at the highest rate both pools keep within its targets (``serving.disaggregated_rate``),
as an aggregated server case is at the closed forms' highest rate: its throughput is that rate's output tokens,
its TTFT and TPOT the means there. The KV cache moves between a prefill and a decode device: over the scale-up
fabric where the whole deployment fits one scale-up domain (a GB200 NVL72 rack's NVLink), else over the network,
priced as ``serving.disaggregation`` prices it. Offline and concurrency runs, and a server run at a stated rate,
are refused in one line: the closed form gives the highest rate only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.disaggregated_rate import DisaggregatedRate, disaggregated_max_rate
from clustersim.serving.disaggregation import Deployment
from clustersim.serving.engine import InferenceCalibration, ServingSystem, serving_system_for_accelerator
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import Request
from clustersim.system import system_for_accelerator
from clustersim.validation.cases import Case, CaseDisaggregation, CasePool, CaseSystem, CaseWorkload, as_case
from clustersim.validation.engine_settings import engine_with_settings
from clustersim.workload.transformer import Transformer


def disaggregation(case: Case | Mapping[str, Any]) -> CaseDisaggregation | None:
    """The pools a serving case states (None: an aggregated deployment)."""
    parallel = as_case(case, "inference").parallel
    return parallel.disaggregate if parallel is not None else None


def disaggregated_case_rate(
    case: Case,
    model: Transformer,
    request: Request,
    engine: EngineProfile,
    catalog: Catalog,
    *,
    ttft_target_s: float,
    tpot_target_s: float,
    percentile: float,
    cal: InferenceCalibration | None = None,
) -> DisaggregatedRate:
    """The case's pools, each on ``engine`` with the caps it states, at the highest rate meeting the targets."""
    pools, where = disaggregation(case), f"case {case.id}"
    if pools is None:
        raise ClusterSimError(f"{where}: not a disaggregated case (no parallel.disaggregate)")
    workload, system = case.workload or CaseWorkload(), case.system or CaseSystem()
    if workload.scenario != "server" or workload.request_rate_per_s is not None:
        stated = " at a stated rate" if workload.request_rate_per_s is not None else ""
        raise ClusterSimError(
            f"{where}: parallel.disaggregate is priced for a server run at its highest rate meeting its targets, "
            f"not scenario {workload.scenario!r}{stated}",
            field="parallel.disaggregate",
        )
    prefill_devices = pools.prefill.workers * pools.prefill.tp
    devices = prefill_devices + pools.decode.workers * pools.decode.tp
    if not system.accelerator or (system.devices is not None and system.devices != devices):
        raise ClusterSimError(
            f"{where}: parallel.disaggregate's pools hold {devices} devices, system.devices is {system.devices}",
            field="parallel.disaggregate",
            value=devices,
        )
    accelerator = system.accelerator

    def pool(spec: CasePool) -> tuple[ServingSystem, EngineProfile]:
        serving = serving_system_for_accelerator(
            catalog, accelerator, tp=spec.tp, dp=spec.workers, devices_per_node=system.devices_per_node,
            instance=system.instance, board_power_watts=system.power_W,
        )  # fmt: skip
        return serving, engine_with_settings(engine, spec.engine_settings)

    (prefill, prefill_engine), (decode, decode_engine) = pool(pools.prefill), pool(pools.decode)
    inside = devices <= prefill.system.scaleup_devices  # one scale-up domain holds both pools (an NVL72 rack)
    if inside:
        fabric = prefill.system.group_fabric(2, 1)
    else:
        network = system.inter_node_Gbps_per_node
        whole = system_for_accelerator(
            catalog, accelerator, devices=devices, devices_per_node=system.devices_per_node or devices,
            instance=system.instance, network_bits_per_s=network * 1e9 if network else None,
        )  # fmt: skip
        fabric = whole.group_fabric(2, prefill_devices)  # a prefill device and the decode device as far along
    assert fabric is not None  # two ranks
    link = Deployment(model, prefill, decode, 1, fabric, not inside, request.kv)
    return disaggregated_max_rate(
        model, prefill, decode, request, transfer_s=link.transfer_one_s(request.input_tokens),
        ttft_target_s=ttft_target_s, tpot_target_s=tpot_target_s, prefill_engine=prefill_engine,
        decode_engine=decode_engine, cal=cal, percentile=percentile,
    )  # fmt: skip
