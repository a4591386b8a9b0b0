"""Predict a ground-truth collective case (../shared/validation format) with the analytic model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import DEFAULT_CALIBRATION, CommCalibration, predict_collective
from clustersim.network.collectives import Algorithm, parse_op
from clustersim.network.topology import fabric_for_instance
from clustersim.system import system_for_accelerator

_GB = 1e9


def predict_collective_case(
    case: Mapping[str, Any], field: str, catalog: Catalog, cal: CommCalibration = DEFAULT_CALIBRATION
) -> float:
    """The case's ``field`` (busbw_GBps, algbw_GBps or time_us) as the model predicts it."""
    system = case.get("system") or {}
    op = parse_op(str(case.get("op")))
    size = case.get("size_bytes")
    if not isinstance(size, int | float) or size <= 0:
        raise ClusterSimError(f"case {case.get('id')}: size_bytes must be a positive number, got {size!r}")
    devices = int(system.get("devices") or 0)
    per_node = int(system.get("devices_per_node") or devices)
    nodes = int(system.get("nodes") or max(devices // max(per_node, 1), 1))
    if system.get("instance"):
        fabric = fabric_for_instance(catalog, str(system["instance"]), nodes)
    else:
        gbps = system.get("inter_node_Gbps_per_node")
        if nodes > 1 and not gbps:
            raise ClusterSimError(f"case {case.get('id')}: {nodes} nodes need system.inter_node_Gbps_per_node")
        fabric = system_for_accelerator(
            catalog,
            str(system.get("accelerator")),
            devices=per_node * nodes,
            devices_per_node=per_node,
            network_bits_per_s=float(gbps) * 1e9 if gbps else None,
        ).topology.fabric()
    algorithm = Algorithm(case["algorithm"]) if case.get("algorithm") else None
    table = predict_collective(op, size, fabric, algorithm=algorithm, cal=cal)
    if field == "busbw_GBps":
        return float(table.busbw_bytes_per_s[0]) / _GB
    if field == "algbw_GBps":
        return float(table.algbw_bytes_per_s[0]) / _GB
    if field == "time_us":
        return float(table.time_s[0]) * 1e6
    raise ClusterSimError(f"cannot predict collective field {field!r} (busbw_GBps, algbw_GBps, time_us)")
