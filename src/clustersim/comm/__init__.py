"""Collective communication: nccl-tests definitions, the fabric, and the analytic cost model."""

from clustersim.comm.collectives import Algorithm, Op, Protocol, busbw_factor, parse_op
from clustersim.comm.fabric import Fabric, fabric_for_instance, fabric_for_system
from clustersim.comm.model import CollectiveTable, CommCalibration, predict_collective

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
