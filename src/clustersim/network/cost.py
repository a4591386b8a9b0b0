"""The one interface through which estimators price a collective, and the models behind it.

Training and serving ask a ``CollectiveCost`` for the time of an operation on a ``Fabric`` (from
``Topology.group_fabric``); they never call a concrete model. The analytic model
(``clustersim.network.analytic``) is the default; a simulator registers itself in ``COST_MODELS``
under its own name, so ``train --network NAME`` can pick it and a test can compare the two on the
same job.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from clustersim.errors import UnknownNameError
from clustersim.network.analytic import CollectiveTable as CollectiveTable  # the interface's result: re-exported
from clustersim.network.analytic import CommCalibration, collective_time_s, predict_collective
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.collectives import Protocol as NcclProtocol
from clustersim.network.fabric import Fabric
from clustersim.network.torus import predict_torus, torus_time_s

FloatArray = npt.NDArray[np.float64]


class CollectiveCost(Protocol):
    """Prices collectives on a fabric."""

    @property
    def name(self) -> str:
        """What answers: ``analytic``, or a simulator's name."""
        ...

    def time_s(self, op: Op, size_bytes: npt.ArrayLike, fabric: Fabric) -> FloatArray:
        """Seconds of ``op`` at each size (bytes per rank, nccl-tests' ``size``) on ``fabric``."""
        ...

    def table(
        self,
        op: Op,
        size_bytes: npt.ArrayLike,
        fabric: Fabric,
        *,
        algorithm: Algorithm | None = None,
        protocol: NcclProtocol | None = None,
    ) -> CollectiveTable:
        """nccl-tests' columns at each size, with how the collective ran and which link bound it."""
        ...


@dataclass(frozen=True)
class AnalyticCost:
    """The analytic model: NCCL's cost structure with fitted achieved-bandwidth fractions
    (``calibration``: None for the packaged values with the user's overrides, see ``analytic``) on a
    switched fabric; on a NeuronLink torus the Neuron runtime's algorithms (``torus``), whose EFA
    stage reads the same calibration's network efficiency."""

    calibration: CommCalibration | None = None
    name: str = "analytic"

    def time_s(self, op: Op, size_bytes: npt.ArrayLike, fabric: Fabric) -> FloatArray:
        """The fastest candidate's time at each size (``collective_time_s``, ``torus_time_s`` on a torus)."""
        if fabric.torus is not None:
            return torus_time_s(op, size_bytes, fabric, net=self.calibration)
        return collective_time_s(op, size_bytes, fabric, self.calibration)

    def table(
        self,
        op: Op,
        size_bytes: npt.ArrayLike,
        fabric: Fabric,
        *,
        algorithm: Algorithm | None = None,
        protocol: NcclProtocol | None = None,
    ) -> CollectiveTable:
        """``predict_collective`` (``predict_torus`` on a torus): the fastest or the forced algorithm and protocol."""
        if fabric.torus is not None:
            return predict_torus(op, size_bytes, fabric, algorithm=algorithm, protocol=protocol, net=self.calibration)
        return predict_collective(op, size_bytes, fabric, algorithm=algorithm, protocol=protocol, cal=self.calibration)


ANALYTIC = AnalyticCost()

# Cost models by name; a simulator adds a factory here when its module is imported.
COST_MODELS: dict[str, Callable[[], CollectiveCost]] = {"analytic": lambda: ANALYTIC}


def cost_model(name: str) -> CollectiveCost:
    """The cost model called ``name``; ``UnknownNameError`` listing the known ones."""
    try:
        return COST_MODELS[name]()
    except KeyError:
        raise UnknownNameError("network_model", name, COST_MODELS) from None
