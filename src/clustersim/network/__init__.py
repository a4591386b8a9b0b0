"""Collective communication: nccl-tests definitions, the fabric, and the analytic cost model.

The names below load on first use (PEP 562), so importing a light submodule such as
``clustersim.network.collectives`` does not pull numpy in through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.network.analytic import CollectiveTable, CommCalibration, predict_collective
    from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor, parse_op
    from clustersim.network.fabric import Fabric
    from clustersim.network.topology import Topology, fabric_for_instance, topology_for_instance

_HOMES = {
    "Algorithm": "collectives",
    "CollectiveTable": "analytic",
    "CommCalibration": "analytic",
    "Fabric": "fabric",
    "Op": "collectives",
    "Protocol": "collectives",
    "Topology": "topology",
    "busbw_factor": "collectives",
    "fabric_for_instance": "topology",
    "parse_op": "collectives",
    "predict_collective": "analytic",
    "topology_for_instance": "topology",
}

__all__ = [
    "Algorithm",
    "CollectiveTable",
    "CommCalibration",
    "Fabric",
    "Op",
    "Protocol",
    "Topology",
    "busbw_factor",
    "fabric_for_instance",
    "parse_op",
    "predict_collective",
    "topology_for_instance",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value
    return value
