"""Predict a ground-truth collective case (``data/README.md`` format) with the analytic model."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import CommCalibration
from clustersim.network.collectives import Algorithm, parse_op
from clustersim.network.cost import AnalyticCost
from clustersim.system import system_for_accelerator, system_for_instance
from clustersim.validation.cases import Case, CaseSystem, as_case

_GB = 1e9


def predict_collective_case(
    case: Case | Mapping[str, Any], field: str, catalog: Catalog, cal: CommCalibration | None = None
) -> float:
    """The case's ``field`` (busbw_GBps, algbw_GBps or time_us) as the model predicts it."""
    case = as_case(case, "collective")
    system = case.system or CaseSystem()
    op = parse_op(str(case.op))
    size = case.size_bytes
    if size is None or size <= 0:
        raise ClusterSimError(f"case {case.id}: size_bytes must be a positive number, got {size!r}")
    devices = system.devices or 0
    per_node = system.devices_per_node or devices
    nodes = system.nodes or max(devices // max(per_node, 1), 1)
    if system.instance:
        # devices_per_node: a Trainium case counts NeuronCores (32 on trn1.32xlarge), not chips
        per_instance = system.devices_per_node
        topology = system_for_instance(catalog, system.instance, nodes, devices_per_node=per_instance).topology
        # fewer devices than the instances hold (16 of a trn2's 64 ranks): the group of the first ones
        group = topology.group_fabric(devices, 1) if 1 < devices < topology.num_devices else None
        fabric = group or topology.fabric()
    else:
        gbps = system.inter_node_Gbps_per_node
        if nodes > 1 and not gbps:
            raise ClusterSimError(f"case {case.id}: {nodes} nodes need system.inter_node_Gbps_per_node")
        fabric = system_for_accelerator(
            catalog,
            str(system.accelerator),
            devices=per_node * nodes,
            devices_per_node=per_node,
            network_bits_per_s=gbps * 1e9 if gbps else None,
        ).topology.fabric()
    algorithm = Algorithm(case.algorithm) if case.algorithm else None
    table = AnalyticCost(cal).table(op, size, fabric, algorithm=algorithm)
    if field == "busbw_GBps":
        return float(table.busbw_bytes_per_s[0]) / _GB
    if field == "algbw_GBps":
        return float(table.algbw_bytes_per_s[0]) / _GB
    if field == "time_us":
        return float(table.time_s[0]) * 1e6
    raise ClusterSimError(f"cannot predict collective field {field!r} (busbw_GBps, algbw_GBps, time_us)")
