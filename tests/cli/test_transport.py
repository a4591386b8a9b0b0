"""``clustersim transport``: compare, sweep, incast, ring, datapath and nccl, their --json keys, figures and errors."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.transport import transport_app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
SMALL = ["--message", "64K", "--messages", "5", "--paths", "4"]


def run(*args: str):
    return runner.invoke(transport_app, list(args), env=ENV)


def test_compare_json_has_one_result_per_transport_with_the_issue_keys():
    result = run("compare", "--instance", "p5.48xlarge", "--loss", "0.1%", *SMALL, "--seed", "3", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [r["transport"] for r in payload["results"]] == ["srd", "rc", "tcp"]
    keys = {"transport", "throughput_bits_per_s", "p50_s", "p99_s", "p999_s", "retransmissions"}
    for row in payload["results"]:
        assert keys <= set(row)
        assert 0 < row["throughput_bits_per_s"] < 100e9  # a p5 NIC is 100 Gbit/s
        assert row["p50_s"] <= row["p99_s"] <= row["p999_s"]
    assert payload["scenario"]["loss"] == pytest.approx(0.001)
    assert payload["scenario"]["line_bits_per_s"] == 100e9
    assert run("compare", "--loss", "0.1%", *SMALL, "--seed", "3", "--json").stdout == result.stdout


def test_compare_table_and_figure(tmp_path):
    figure = tmp_path / "compare.png"
    result = run("compare", *SMALL, "--background", "0.3", "--collision", "--plot", str(figure))
    assert result.exit_code == 0, result.output
    assert "srd" in result.stdout and "p99.9" in result.stdout
    assert figure.stat().st_size > 10_000


def test_datapath_json_follows_the_instance_and_sums_its_steps():
    result = run("datapath", "--instance", "p4d.24xlarge", "--message", "4K", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["nitro"] == "nitro-v3" and payload["gpudirect_rdma"] is True and payload["efa_path"] == "efa-gdr"
    assert payload["message_bytes"] == 4096
    by_path = {p["path"]: p for p in payload["paths"]}
    assert set(by_path) == {"tcp-ena", "efa-host", "efa-gdr"}
    for path in by_path.values():
        assert sum(s["s"] for s in path["steps"]) == pytest.approx(path["one_way_s"])
    assert by_path["efa-gdr"]["one_way_s"] < by_path["efa-host"]["one_way_s"] < by_path["tcp-ena"]["one_way_s"]
    assert by_path["tcp-ena"]["crossover_bytes"] is None


def test_datapath_table_and_figure(tmp_path):
    figure = tmp_path / "datapath.png"
    # NCCL on GPUs (on Trainium --nccl is refused: tests/network/test_scaleup_labels.py)
    result = run("datapath", "--instance", "p5en.48xlarge", "--message", "1M", "--nccl", "--plot", str(figure))
    assert result.exit_code == 0, result.output
    assert "NCCL proxy" in result.stdout and "crossover" in result.stdout
    assert figure.stat().st_size > 10_000


def test_sweep_incast_and_ring_print_tables_and_json():
    sweep = run("sweep", "--over", "loss", "--values", "0,1%", *SMALL, "--json")
    assert sweep.exit_code == 0, sweep.output
    rows = json.loads(sweep.stdout)["rows"]
    assert [r["loss"] for r in rows] == [0, 0.01]
    incast = run("incast", "--senders", "3", "--message", "32K", "--messages", "2", "--paths", "2")
    assert incast.exit_code == 0, incast.output
    assert "drops" in incast.stdout
    ring = run("ring", "--instance", "p4d.24xlarge", "--buffer", "1M", "--paths", "4", "--json")
    assert ring.exit_code == 0, ring.output
    payload = json.loads(ring.stdout)
    assert payload["num_ranks"] == 16 and payload["num_nics"] == 4
    assert [r["transport"] for r in payload["results"]] == ["srd", "rc", "tcp"]


@pytest.mark.parametrize(
    ("args", "part"),
    [
        (["compare", "--loss", "150%"], "--loss: '150%' is not a loss rate"),
        (["compare", "--loss", "abc"], "--loss: 'abc'"),
        (["compare", "--message", "0"], "--message"),
        (["compare", "--srd-rto", "5s"], "--srd-rto: '5s' is out of range"),
        (["compare", "--instance", "p9.huge"], "p9.huge"),
        (["compare", "--background", "1.5"], "--background"),
        (["sweep", "--over", "jitter"], "--over: 'jitter'"),
        (["datapath", "--message", "2G"], "--message: '2G' is out of range"),
        (["compare", "--message", "1G", "--messages", "17"], "more than the default bound of 2e7 packet events"),
        (["nccl", "--sizes", ","], "--sizes: give 1 to 40 sizes, got 0"),
        (["nccl", "--sizes", "8,2G"], "--sizes: '2G' is out of range"),
        (["nccl", "--path", "rdma"], "--path: 'rdma' is not efa-gdr or efa-host"),
        (["nccl", "--collective", "alltoall"], "collective: 'alltoall' is not one of all_reduce, all_gather"),
        (["nccl", "--protocol", "ll"], "protocol: 'll' is not one of LL, LL128, Simple"),
        (["nccl", "--collective", "all_gather", "--algorithm", "tree"], "all-gather has no tree"),
        (["nccl", "--instance", "trn2.48xlarge"], "not an NVLink GPU"),
        (["nccl", "--nodes", "0"], "--nodes"),
    ],
)
def test_bad_options_are_one_line_errors(args, part):
    result = run(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and part in lines[0], result.stderr


def test_errors_are_json_with_json():
    result = run("compare", "--loss", "2", "--json")
    assert result.exit_code == 2
    payload = json.loads(result.stderr)
    assert payload["field"] == "--loss" and payload["value"] == "2"


def test_the_main_app_has_the_transport_commands():
    from clustersim.cli.app import app

    result = runner.invoke(app, ["transport", "--help"], env=ENV)
    assert result.exit_code == 0
    for command in ("compare", "sweep", "incast", "ring", "datapath", "nccl"):
        assert command in result.stdout


def test_compare_takes_tcps_congestion_control_by_name():
    result = run("compare", *SMALL, "--loss", "1%", "--tcp-congestion", "cubic", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["scenario"]["tcp_congestion"] == "cubic"
    bad = run("compare", *SMALL, "--tcp-congestion", "bbr")
    assert bad.exit_code == 2
    assert "tcp_congestion: 'bbr' is not one of newreno, cubic" in bad.output


def test_nccl_json_gives_each_size_its_pick_breakdown_and_the_published_time():
    result = run("nccl", "--instance", "p5.48xlarge", "--nodes", "2", "--sizes", "8,1K,64K", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert (payload["instance"], payload["nodes"], payload["path"]) == ("p5.48xlarge", 2, "efa-gdr")
    rows = payload["rows"]
    assert [r["message_bytes"] for r in rows] == [8, 1024, 65536]
    for row in rows:
        assert row["time_s"] == pytest.approx(row["launch_s"] + sum(h["total_s"] for h in row["hops"]))
        assert row["busbw_bytes_per_s"] == pytest.approx(row["message_bytes"] / row["time_s"] * 2 * 15 / 16)
    first = rows[0]
    assert (first["algorithm"], first["protocol"], first["num_channels"]) == ("tree", "LL", 1)
    assert first["measured_time_s"] == pytest.approx(69.12e-6) and abs(first["error"]) < 0.01
    assert "awsome-distributed-training" in first["measured_source"]
    assert rows[2]["measured_time_s"] == pytest.approx(135.1e-6) and rows[2]["error"] < -0.2  # a listed miss


def test_nccl_honours_forced_choices_and_the_host_staged_path():
    forced = run("nccl", "--sizes", "8", "--algorithm", "ring", "--protocol", "Simple", "--json")
    assert forced.exit_code == 0, forced.output
    row = json.loads(forced.stdout)["rows"][0]
    assert (row["algorithm"], row["protocol"]) == ("ring", "Simple")
    staged, direct = (
        json.loads(run("nccl", "--sizes", "8", "--path", p, "--json").stdout) for p in ("efa-host", "efa-gdr")
    )
    assert (staged["path"], direct["path"]) == ("efa-host", "efa-gdr")
    assert staged["rows"][0]["time_s"] > direct["rows"][0]["time_s"] + 30e-6  # two cudaMemcpy pairs
    table = run("nccl", "--instance", "p4de.24xlarge", "--sizes", "8,1M")
    assert table.exit_code == 0, table.output
    assert "tree/Simple" in table.stdout and "164.3" in table.stdout and "network hops" in table.stdout


@pytest.mark.parametrize("command", ["compare", "sweep", "incast", "ring"])
def test_a_negative_seed_is_refused_naming_the_option(command):
    result = run(command, "--seed", "-1")
    assert result.exit_code == 2, result.output
    assert "--seed" in result.output and "Traceback" not in result.output


def test_loss_no_transport_delivers_through_is_a_one_line_refusal():
    result = run("compare", "--loss", "90%", "--message", "1M", "--messages", "20", "--json")
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["field"] == "loss"
    # RC's queue pair gives up after NCCL's 7 retries of its 4.3 s timeout; a transport that keeps trying runs out
    error = payload["error"]
    assert "went to the error state: 8 local ACK timeouts" in error or "messages delivered" in error
