"""A serving deployment over several instances (``--nodes``): a replica wider than one instance spans several, its
TP all-reduces or PP sends between them on the network; replicas fill every instance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
MODEL = load_model("llama3.1-70b", use_env=False)
runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}


def _communication_s(tp: int, pp: int, nodes: int) -> float:
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=tp, pp=pp, nodes=nodes)
    step = step_times(MODEL, system, Dtype.BF16, Dtype.BF16, decode_sequences=64, decode_context_tokens=2048,
                      prefill_tokens=0.0, prefill_sequences=0.0, prompt_tokens=1024.0)  # fmt: skip
    return float(step.communication_s)


def test_replicas_fill_every_instance_and_a_wide_one_spans_them():
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8, nodes=2)
    assert (system.dp, system.system.num_nodes, system.num_devices) == (2, 2, 16)
    wide = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8, pp=2, nodes=2)
    assert (wide.dp, wide.replica_devices) == (1, 16)
    with pytest.raises(ClusterSimError, match=r"tp x pp: 8 x 4 must fit the 16 devices of 2 x p5.48xlarge"):
        serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8, pp=4, nodes=2)
    with pytest.raises(ClusterSimError, match=r"one p5.48xlarge \(the scale-up domain; --nodes for more\)"):
        serving_system_for_instance(CATALOG, "p5.48xlarge", tp=16)
    with pytest.raises(ClusterSimError, match="nodes: must be at least 1, got 0"):
        serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8, nodes=0)


def test_traffic_between_instances_runs_on_the_network():
    """TP 16 over two p5s all-reduces across EFA (3,200 Gbit/s an instance) where TP 8 stays on NVLink (900 GB/s a
    GPU); a pipeline's sends between instances take EFA's latency and bandwidth, within one NVLink's."""
    within, across = _communication_s(8, 1, 1), _communication_s(16, 1, 2)
    assert across > 3 * within
    payload = np.array([64 * MODEL.hidden * 2.0])  # a decode step's hidden states, bf16
    sends = [
        float(system.cost.time_s(Op.SENDRECV, payload, system.pp_fabric)[0])
        for system in (
            serving_system_for_instance(CATALOG, "p5.48xlarge", tp=4, pp=2),  # stages 4 GPUs apart on NVLink
            serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8, pp=2, nodes=2),  # an instance apart
        )
    ]
    assert sends[1] > 2 * sends[0] > 0


def test_the_command_line_prices_it_says_so_and_saves_it(tmp_path: Path):
    args = ["serve", "llama3.1-405b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "2"]
    payload = json.loads(runner.invoke(app, [*args, "--json"], env=ENV).stdout)
    assert (payload["nodes"], payload["dp"], payload["system"]) == (2, 1, "p5.48xlarge")
    table = runner.invoke(app, args, env=ENV).output
    assert "2 x p5.48xlarge" in table and "on h100-sxm over 2 x p5.48xlarge" in table
    saved = tmp_path / "s.toml"
    assert runner.invoke(app, [*args, "--save-scenario", str(saved)], env=ENV).exit_code == 0
    assert "nodes = 2" in saved.read_text()
    replayed = json.loads(runner.invoke(app, ["serve", "--scenario", str(saved), "--json"], env=ENV).stdout)
    assert replayed["output_tokens_per_s"] == pytest.approx(payload["output_tokens_per_s"])
    refused = runner.invoke(app, ["serve", "llama3.1-405b", "--nodes", "2", "--json"], env=ENV)
    assert refused.exit_code == 2 and json.loads(refused.stderr)["field"] == "--nodes"
    simulated = runner.invoke(app, [*args, "--precision", "fp8", "--rate", "1", "--requests", "100", "--json"], env=ENV)
    assert simulated.exit_code == 0, simulated.output
    assert json.loads(simulated.stdout)["nodes"] == 2
