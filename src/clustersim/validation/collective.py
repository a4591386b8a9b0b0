"""Predict a ground-truth collective case (../shared/validation format) with the analytic model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Domain, Kind
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import DEFAULT_CALIBRATION, CommCalibration, predict_collective
from clustersim.network.collectives import Algorithm, parse_op
from clustersim.network.fabric import fabric_for_instance, fabric_for_system

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
        accelerator = catalog.accelerator(str(system.get("accelerator")))
        # The switch of a catalogued scale-up domain of this accelerator (HGX boards), if any.
        domains = [d for d in catalog.list(Kind.DOMAIN) if isinstance(d, Domain) and d.accelerator == accelerator.id]
        switch = next((d.switch for d in domains if d.switch), None)
        fabric = fabric_for_system(
            catalog,
            accelerator=accelerator.id,
            devices_per_node=per_node,
            num_nodes=nodes,
            network_bits_per_s=float(gbps) * 1e9 if gbps else None,
            switch=switch if per_node > 2 else None,
        )
    algorithm = Algorithm(case["algorithm"]) if case.get("algorithm") else None
    table = predict_collective(op, size, fabric, algorithm=algorithm, cal=cal)
    if field == "busbw_GBps":
        return float(table.busbw_bytes_per_s[0]) / _GB
    if field == "algbw_GBps":
        return float(table.algbw_bytes_per_s[0]) / _GB
    if field == "time_us":
        return float(table.time_s[0]) * 1e6
    raise ClusterSimError(f"cannot predict collective field {field!r} (busbw_GBps, algbw_GBps, time_us)")
