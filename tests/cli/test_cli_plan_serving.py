"""``clustersim plan MODEL --dataset``: the serving plan keeps the SLO, its figures are ``serve``'s for the same
deployment, the cheaper instance wins under objective cost, the front is non-dominated, and the options of the
other mode are refused in one line naming them."""

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.plan.serving_rows import ServingLoad
from clustersim.plan.serving_search import ServingGrid, plan_serving
from clustersim.serving.estimate import Request
from clustersim.serving.sim_report import Slo
from clustersim.workload import zoo

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_SERVING_ENGINES": "", "COLUMNS": "200"}
ONE = ("llama3.1-8b", "--dataset", "sharegpt", "--instances", "p4de.24xlarge,p5.48xlarge")
BASE = (*ONE, "--simulate-top", "0")
CATALOG = load_catalog(use_env=False)


def plan(*args: str):
    return runner.invoke(app, ["plan", *args], env=ENV)


def planned(*args: str) -> dict:
    result = plan(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def served(*args: str) -> dict:
    result = runner.invoke(app, ["serve", *args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_row_meets_the_slo():
    payload = planned(*BASE, "--rate", "40", "--nodes", "1,2", "--slo", "ttft=150ms,itl=8ms", "--top", "10")
    rows = payload["top"] + payload["pareto"]
    assert rows and payload["feasible"] < payload["evaluated"]  # the SLO left some out
    for row in rows:
        assert row["ttft_s"] <= 0.150 * (1 + 1e-9) and row["tpot_s"] <= 0.008 * (1 + 1e-9), row


def test_the_cheaper_instance_wins_and_its_figures_are_serves():
    payload = planned(*BASE, "--rate", "8", "--nodes", "1", "--slo", "ttft=2s,itl=50ms", "--objective", "cost")
    first, second = payload["top"][:2]
    assert first["instance"] == "p4de.24xlarge" and second["instance"] == "p5.48xlarge"  # $27.45/h against $55.04/h
    assert first["cost_usd_per_mtok"] < second["cost_usd_per_mtok"]
    assert first["why"] == "$27.45 vs $55.04 an hour" and first["runner_up"].startswith("1 x p5.48xlarge")
    assert math.isclose(first["margin"], second["cost_usd_per_mtok"] / first["cost_usd_per_mtok"] - 1, rel_tol=1e-12)
    for row in (first, second):
        fields = row["layout_fields"]
        serve = served("llama3.1-8b", "--instance", row["instance"], "--tp", str(fields["tp"]), "--pp",
                       str(fields["pp"]), "--dataset", "sharegpt", "--rate", "8")  # fmt: skip
        for key in ("output_tokens_per_s", "ttft_s", "tpot_s", "batch"):
            assert math.isclose(row[key], serve[key], rel_tol=1e-9), key
        price = CATALOG.instance(row["instance"]).on_demand
        assert price is not None and price.usd_per_hour is not None
        expected = price.usd_per_hour / 3600 / serve["output_tokens_per_s"] * 1e6
        assert math.isclose(row["cost_usd_per_mtok"], expected, rel_tol=1e-9)
        low, high = row["interval"]["output_tokens_per_s"].values()
        assert math.isclose(low, serve["intervals"]["output_tokens_per_s"]["low"], rel_tol=1e-9)
        assert math.isclose(high, serve["intervals"]["output_tokens_per_s"]["high"], rel_tol=1e-9)
        # a request's latency (TTFT + (output - 1) x TPOT) takes the TPOT's range, from its own residuals
        low, high = row["interval"]["latency_s"].values()
        tpot = serve["intervals"]["tpot_s"]
        assert math.isclose(low / row["latency_s"], tpot["low"] / serve["tpot_s"], rel_tol=1e-9)
        assert math.isclose(high / row["latency_s"], tpot["high"] / serve["tpot_s"], rel_tol=1e-9)
        assert row["interval"]["latency_basis"] == tpot["basis"] and tpot["basis"].startswith("inference TPOT")


def test_nodes_share_the_rate_evenly():
    """Two nodes at a rate price as one node at half of it (each node's replicas take their share)."""
    payload = planned("llama3.1-8b", "--dataset", "sharegpt", "--instances", "p5.48xlarge", "--rate", "16", "--nodes",
                      "2", "--top", "1", "--simulate-top", "0")  # fmt: skip
    row = payload["top"][0]
    assert row["instance"] == "p5.48xlarge" and row["nodes"] == 2
    fields = row["layout_fields"]
    serve = served("llama3.1-8b", "--instance", "p5.48xlarge", "--tp", str(fields["tp"]), "--pp", str(fields["pp"]),
                   "--dataset", "sharegpt", "--rate", "8")  # fmt: skip
    assert math.isclose(row["ttft_s"], serve["ttft_s"], rel_tol=1e-9)
    assert math.isclose(row["output_tokens_per_s"], 2 * serve["output_tokens_per_s"], rel_tol=1e-9)
    assert row["cost_usd_per_hour"] == pytest.approx(2 * 55.04)


def test_the_json_keys():
    payload = planned(*ONE, "--rate", "8", "--nodes", "1", "--simulate-top", "1", "--slo", "ttft=2s,itl=50ms")
    assert payload["mode"] == "serving"
    for key in ("pareto", "top", "evaluated", "elapsed_s", "layouts_per_s", "objective", "notes", "load"):
        assert key in payload
    row = payload["top"][0]
    for key in ("instance", "nodes", "layout", "output_tokens_per_s", "ttft_s", "tpot_s", "cost_usd_per_hour",
                "cost_usd_per_mtok", "energy_j_per_token", "interval", "why", "margin", "runner_up",
                "price_offer"):  # fmt: skip
        assert key in row
    simulated = row["simulated"]
    assert simulated["ttft_p99_s"] >= simulated["ttft_mean_s"] > 0 and 0 <= simulated["goodput_share"] <= 1
    assert payload["top"][1]["simulated"] is None
    # the simulated p99 TTFT has its own interval, from published p99 TTFTs' left-out residuals; an unsimulated row none
    p99 = row["interval"]["simulated_ttft_p99_s"]
    assert p99["low"] < simulated["ttft_p99_s"] < p99["high"]
    # its basis is the p99 TTFTs' group, or the mean TTFT's where that is wider and p99's sources are too few (the note)
    interval = row["interval"]
    assert "p99 TTFT" in interval["simulated_ttft_p99_basis"] + interval["simulated_ttft_p99_note"]
    assert "simulated_ttft_p99_s" not in payload["top"][1]["interval"]
    table = plan(*ONE, "--rate", "8", "--nodes", "1", "--simulate-top", "1", "--slo", "ttft=2s,itl=50ms")
    assert "p99 TTFT row 1 " in table.output and "left-out residuals of published p99 TTFT" in table.output


def test_without_a_load_each_deployment_serves_its_highest_rate_within_the_slo():
    payload = planned(*BASE, "--nodes", "1", "--slo", "ttft=500ms,itl=20ms")
    assert payload["load"]["kind"] == "max_rate"
    for row in payload["top"]:
        assert row["ttft_s"] <= 0.5 * (1 + 1e-3) and row["tpot_s"] <= 0.02 * (1 + 1e-3)  # max_rate's whole batch
        assert row["request_rate_per_s"] > 0


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        ((*BASE, "--rate", "5", "--tokens", "1T"), ["--tokens", "training plan"]),
        ((*BASE, "--rate", "5", "--framework", "megatron"), ["--framework", "training plan"]),
        ((*BASE, "--rate", "5", "--etp", "1"), ["--etp", "training plan"]),
        (("llama3.1-8b", "--rate", "5"), ["--rate", "--dataset"]),
        (("llama3.1-8b", "--slo", "ttft=1s"), ["--slo", "--dataset"]),
        ((*BASE, "--rate", "5", "--concurrency", "4"), ["--concurrency", "one load"]),
        ((*BASE,), ["--slo", "TTFT bound"]),
        ((*BASE, "--slo", "e2e=3s"), ["--slo", "TTFT bound"]),
        ((*BASE, "--rate", "5", "--objective", "goodput"), ["--objective", "goodput"]),
        ((*BASE, "--rate", "5", "--slo", "ttft=fast"), ["--slo"]),
        ((*BASE, "--rate", "5", "--slo", "ttft=1ms"), ["--slo", "none of the"]),
        ((*BASE, "--rate", "5", "--requests", "100"), ["--requests", "--simulate-top 0"]),
        ((*BASE, "--rate", "5", "--engine", "nope"), ["--engine", "unknown engine 'nope'"]),
        (
            ("llama3.1-8b", "--dataset", "sharegpt", "--rate", "5", "--engine", "vllm", "--instances", "trn1.32xlarge"),
            ["no deployment to price", "does not run on trainium1"],
        ),
    ],
)
def test_options_of_the_other_mode_and_bad_input_are_one_line(args, parts):
    result = plan(*args)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    for part in parts:
        assert part in line, line


MODEL = zoo.load_model("llama3.1-8b", use_env=False)
SHAREGPT = Request(229.7, 203.1)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rate=st.floats(min_value=0.5, max_value=60.0),
    instances=st.sets(
        st.sampled_from(["p4de.24xlarge", "p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge"]), min_size=1, max_size=3
    ),
)
def test_the_front_is_non_dominated(rate, instances):
    grid = ServingGrid(instances=tuple(sorted(instances)), nodes=(1, 2), requests=(SHAREGPT,))
    found = plan_serving(MODEL, CATALOG, grid, ServingLoad(rate_per_s=rate, slo=Slo(ttft_s=2.0)), top=3)

    def point(row):
        return row.cost_usd_per_mtok, row.latency_s

    front = {point(row) for row in found.pareto}
    assert front
    for row in found.rows:
        cost, latency = point(row)
        for f_cost, f_latency in front:  # nothing beats a front row on both
            assert not (cost <= f_cost and latency <= f_latency and (cost, latency) != (f_cost, f_latency))
        if point(row) not in front:  # and every other row is beaten by one on the front
            assert any(fc <= cost and fl <= latency for fc, fl in front)


def test_plot_draws_cost_against_latency(tmp_path):
    path = tmp_path / "serving.png"
    result = plan(*BASE, "--rate", "8", "--nodes", "1", "--plot", str(path))
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 10_000 and "Pareto front: cost per token against latency" in result.stdout


def test_a_replica_may_span_instances_a_stage_each_where_one_cannot_hold_it():
    """Llama 3.1 405B in bf16 (810 GB of weights) fits no p5 at any layout inside it; over two, TP 8 within each and
    a pipeline stage an instance holds it, priced as two instances (their price, their power)."""
    one = plan("llama3.1-405b", "--dataset", "sharegpt", "--rate", "2", "--instances", "p5.48xlarge", "--nodes", "1",
               "--precision", "bf16", "--simulate-top", "0", "--json")  # fmt: skip
    assert one.exit_code == 2 and "weights do not fit" in json.loads(one.stderr)["error"]
    payload = planned("llama3.1-405b", "--dataset", "sharegpt", "--rate", "2", "--instances", "p5.48xlarge",
                      "--nodes", "2", "--precision", "bf16", "--simulate-top", "0")  # fmt: skip
    (row,) = payload["top"]
    assert row["layout_fields"] == {"tp": 8, "pp": 2, "replicas": 1, "replicas_per_node": 0, "nodes_per_replica": 2}
    assert row["layout"] == "1 x tp8 pp2 (2 nodes each)" and row["devices"] == 16
    assert row["cost_usd_per_hour"] == pytest.approx(2 * 55.04, rel=1e-3)
    assert row["energy_j_per_token"] == pytest.approx(16 * 700 / row["output_tokens_per_s"], rel=1e-6)
