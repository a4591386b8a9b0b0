"""The ``System`` a ground-truth case describes, built with ``clustersim.system.system_for_accelerator``.

``devices_per_node`` absent: ``min(devices, 8)`` (an 8-GPU server). ``inter_node_Gbps_per_node`` is
the network per server where no instance names it; absent too, a catalogued server with the same
accelerator stands in (``System.network_note`` says so).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError, validation_problems
from clustersim.system import System, system_for_accelerator
from clustersim.validation.cases import CaseSystem


def system_from_case(catalog: Catalog, system: CaseSystem | Mapping[str, Any] | None) -> System:
    """The system of a ground-truth case (``data/README.md`` format), typed or as plain data."""
    if not isinstance(system, CaseSystem):
        try:
            system = CaseSystem.model_validate(dict(system or {}))
        except ValidationError as exc:
            raise ClusterSimError(f"system: {validation_problems(exc.errors())}") from None
    devices = _positive_int(system.devices, "devices")
    per_node = (
        _positive_int(system.devices_per_node, "devices_per_node") if system.devices_per_node else min(devices, 8)
    )
    gbps = system.inter_node_Gbps_per_node
    built = system_for_accelerator(
        catalog,
        str(system.accelerator),
        devices=devices,
        devices_per_node=per_node,
        instance=system.instance or None,
        network_bits_per_s=gbps * 1e9 if gbps is not None and gbps > 0 else None,
    )
    # A stated board power (power_W, per chip) other than the catalogued TDP caps the compute clock.
    board = None if system.power_W is None else system.power_W * built.share
    return dataclasses.replace(built, board_power_watts=board)


def _positive_int(value: int | None, key: str) -> int:
    if value is None or value < 1:
        raise ClusterSimError(f"system.{key} must be a positive integer, got {value!r}")
    return value
