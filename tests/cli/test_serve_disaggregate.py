"""``serve --disaggregate P:D``: the simulator on separate prefill and decode pools, from the command line."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
HEAVY = ("llama3.1-8b", "--tp", "2", "--input", "4096", "--output", "128", "--requests", "200")


def run(*args):
    return runner.invoke(
        app, ["serve", *args], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
    )


def test_the_json_has_the_pools_and_the_transfers():
    result = run(*HEAVY, "--rate", "4", "--disaggregate", "1x2:1x4", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    found = payload["disaggregation"]
    assert found["pools"] == {
        "prefill": {"workers": 1, "tp": 2, "devices": 2},
        "decode": {"workers": 1, "tp": 4, "devices": 4},
    }
    assert found["instances"] == 1 and "NVLink" in found["link"]
    # Llama 3.1 8B: 32 layers x 8 KV heads x 128 x K and V x 2 bytes a token
    assert found["kv_bytes_per_request"]["p50"] == 4096 * 32 * 8 * 128 * 2 * 2
    assert 0 < found["kv_transfer_s"]["p50"] <= payload["ttft_s"]["p50"]
    assert (payload["tp"], payload["dp"]) == (4, 1)
    # the pools' closed form at the same rate (serving.disaggregated_rate): 200 requests' TPOT within 2%
    closed = payload["closed_form"]
    assert closed["scenario"] == "server" and closed["rate_per_s"] == 4.0 and closed["output_tokens_per_s"] == 512.0
    assert closed["tpot_s"] == pytest.approx(payload["tpot_s"]["mean"], rel=0.02)
    assert closed["ttft_s"] > found["kv_transfer_s"]["p50"]


def test_the_table_and_a_sweep_show_the_pools():
    table = run(*HEAVY, "--rate", "2", "--disaggregate", "4:4")
    assert table.exit_code == 0, table.output
    assert "prefill 4 x tp 2 and decode 4 x tp 2 on 2 instance(s)" in table.output and "KV transfer" in table.output
    sweep = run(*HEAVY, "--rates", "1:2", "--disaggregate", "1:1", "--json")
    assert sweep.exit_code == 0, sweep.output
    rows = json.loads(sweep.stdout)["rates"]
    assert [row["rate_per_s"] for row in rows] == [1, 2] and all("disaggregation" in row for row in rows)


def test_refusals_are_one_line_naming_the_option():
    bad = run(*HEAVY, "--rate", "2", "--disaggregate", "two:one", "--json")
    assert bad.exit_code == 2 and json.loads(bad.stderr)["field"] == "--disaggregate"
    closed = run(*HEAVY, "--concurrency", "4", "--disaggregate", "1:1", "--json")
    assert closed.exit_code == 2 and json.loads(closed.stderr)["field"] == "--concurrency"
    small = run("llama2-70b", "--tp", "8", "--rate", "1", "--disaggregate", "1x1:1", "--json")
    error = json.loads(small.stderr)
    assert small.exit_code == 2 and error["field"] == "--disaggregate" and "cannot hold the model" in error["error"]
    pipeline = run(*HEAVY, "--pp", "2", "--rate", "1", "--disaggregate", "1:1", "--json")
    assert pipeline.exit_code == 2 and json.loads(pipeline.stderr)["field"] == "--pp"
