"""Collective communication: nccl-tests definitions, the fabric, and the analytic cost model."""

from clustersim.network.analytic import CollectiveTable, CommCalibration, predict_collective
from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor, parse_op
from clustersim.network.fabric import Fabric
from clustersim.network.topology import Topology, fabric_for_instance, topology_for_instance

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
