"""The sim cost model against measured p5 nccl-tests busbw (the bundled copy of collectives.jsonl)."""

from __future__ import annotations

import json

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC
from clustersim.network.flowsim.collectives import SUPPORTED
from clustersim.network.flowsim.cost import SIM
from clustersim.network.topology import fabric_for_instance
from clustersim.validation.cases import bundled_dir

CASES = bundled_dir() / "collectives.jsonl"


def test_the_simulator_reproduces_measured_p5_busbw_as_well_as_the_analytic_model_where_both_run_it():
    """p5 at 2 to 4 nodes, on the cases where the analytic model picks an algorithm the simulator
    runs (ring, tree, pairwise): the median |log(predicted / measured)| busbw of the sim cost is
    within 2 points of the analytic model's. Where the analytic model picks NVLS tree (all-reduce on
    2-4 nodes, NVLink SHARP inside the node), the simulator, which has no NVLS, falls to the double
    binary tree and predicts up to 25% less busbw than measured (median 0.126 against 0.050 over all
    p5 cases at 2-4 nodes)."""
    catalog = load_catalog(use_env=False)
    rows = [json.loads(line) for line in CASES.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [r for r in rows if r["system"].get("instance") == "p5.48xlarge" and 1 < r["system"]["nodes"] <= 4]
    assert len(rows) >= 30
    errors: dict[str, list[float]] = {"analytic": [], "sim": []}
    for row in rows:
        fabric = fabric_for_instance(catalog, "p5.48xlarge", row["system"]["nodes"])
        measured = row["measured"]["busbw_GBps"] * 1e9
        op, size = Op(row["op"]), np.array([float(row["size_bytes"])])
        analytic = ANALYTIC.table(op, size, fabric)
        if analytic.algorithm[0] not in SUPPORTED[op]:
            continue
        for name, table in (("analytic", analytic), ("sim", SIM.table(op, size, fabric))):
            errors[name].append(abs(float(np.log(table.busbw_bytes_per_s[0] / measured))))
    assert len(errors["sim"]) >= 20
    analytic_error, sim_error = (float(np.median(errors[k])) for k in ("analytic", "sim"))
    assert sim_error <= analytic_error + 0.02, (analytic_error, sim_error)
