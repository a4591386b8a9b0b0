"""The collective-cost interface: the analytic model behind it, with its calibration."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.network.analytic import DEFAULT_CALIBRATION, predict_collective
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC, AnalyticCost, CollectiveCost
from clustersim.network.topology import fabric_for_instance

CATALOG = load_catalog(use_env=False)
FABRIC = fabric_for_instance(CATALOG, "p5.48xlarge", 4)
SIZES = np.array([8.0, 1e6, 1e9, 16e9])


def test_the_analytic_cost_is_the_analytic_model():
    cost: CollectiveCost = ANALYTIC
    table = predict_collective(Op.ALL_GATHER, SIZES, FABRIC)
    assert np.array_equal(cost.time_s(Op.ALL_GATHER, SIZES, FABRIC), table.time_s)
    assert np.array_equal(cost.table(Op.ALL_GATHER, SIZES, FABRIC).busbw_bytes_per_s, table.busbw_bytes_per_s)


def test_a_calibration_travels_with_the_cost_model():
    half = AnalyticCost(
        dataclasses.replace(DEFAULT_CALIBRATION, network_efficiency=DEFAULT_CALIBRATION.network_efficiency / 2)
    )
    slow, fast = half.time_s(Op.ALL_GATHER, SIZES, FABRIC), ANALYTIC.time_s(Op.ALL_GATHER, SIZES, FABRIC)
    # At 16 GB the time is the ring's bandwidth bound: NVLink (370.8 GB/s) under the full network (388),
    # the network once halved (194).
    nvlink = 450e9 * DEFAULT_CALIBRATION.nvlink_efficiency
    network = 400e9 * DEFAULT_CALIBRATION.network_efficiency
    assert slow[-1] / fast[-1] == pytest.approx(min(nvlink, network) / min(nvlink, network / 2), rel=0.02)
    assert np.all(slow >= fast)
    assert half.table(Op.ALL_GATHER, SIZES, FABRIC).time_s[-1] == slow[-1]
