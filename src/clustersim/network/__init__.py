"""Collective communication: nccl-tests definitions, the fabric, and the analytic cost model."""

from clustersim.network.analytic import CollectiveTable, CommCalibration, predict_collective
from clustersim.network.collectives import Algorithm, Op, Protocol, busbw_factor, parse_op
from clustersim.network.fabric import Fabric, fabric_for_instance, fabric_for_system

__all__ = [
    "Algorithm",
    "CollectiveTable",
    "CommCalibration",
    "Fabric",
    "Op",
    "Protocol",
    "busbw_factor",
    "fabric_for_instance",
    "fabric_for_system",
    "parse_op",
    "predict_collective",
]
