"""``clustersim transport`` over several seeds (``--seeds``): each figure the median over the seeds, with
its min-max; ``--seeds 1`` is one run of ``--seed`` as before."""

import json
import statistics
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.transport import transport_app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}
# the scenario of tests/network/transport/test_golden.py (a p5 NIC is its 100 Gbit/s line rate)
GOLDEN = Path(__file__).parents[1] / "data" / "transport" / "golden_compare.json"
GOLDEN_ARGS = ["--message", "64K", "--messages", "30", "--paths", "4", "--loss", "1%", "--background", "0.3"]
# RC as it ran before lossless links (drop-tail, go-back-N, a 67 ms timeout), as the golden file holds it
GOLDEN_ARGS += ["--lossy", "--rc-recovery", "go-back-n", "--rc-timeout", "14"]
SMALL = ["--message", "64K", "--messages", "5", "--paths", "4", "--loss", "1%"]
FIGURES = ("throughput_bits_per_s", "p50_s", "p99_s", "p999_s", "retransmissions", "timeouts", "num_events")


def run(*args: str):
    result = runner.invoke(transport_app, list(args), env=ENV)
    assert result.exit_code == 0, result.output
    return result


def payload(*args: str) -> dict:
    return json.loads(run(*args, "--json").stdout)


def test_one_seed_is_todays_single_run():
    out = payload("compare", *GOLDEN_ARGS, "--seed", "7", "--seeds", "1")
    assert [{k: v for k, v in r.items() if k != "spread"} for r in out["results"]] == json.loads(GOLDEN.read_text())
    assert out["seeds"] == [7] and out["one_draw"] is True
    table = run("compare", *GOLDEN_ARGS, "--seed", "7", "--seeds", "1").stdout
    assert "14.17 " in table and "(" not in table.split("┩")[1].split("└")[0]  # SRD's golden 14.17 Gbit/s, no ranges
    assert "one draw (seed 7)" in table and "--seeds N shows the spread" in table


def test_three_seeds_give_each_figures_median_of_the_three_single_runs():
    combined = payload("compare", *SMALL, "--seed", "4", "--seeds", "3")
    singles = [payload("compare", *SMALL, "--seed", str(s), "--seeds", "1")["results"] for s in (4, 5, 6)]
    assert combined["seeds"] == [4, 5, 6] and combined["one_draw"] is False
    varied = 0
    for i, row in enumerate(combined["results"]):
        for name in FIGURES:
            values = [single[i][name] for single in singles]
            assert row[name] == statistics.median(values), (row["transport"], name)
            assert row["spread"][name] == {"min": min(values), "max": max(values), "seeds": [4, 5, 6], "values": values}
            varied += min(values) != max(values)
        assert row["num_messages"] == 5 and "num_messages" not in row["spread"]
    assert varied  # the seeds draw different losses
    table = run("compare", *SMALL, "--seed", "4", "--seeds", "3").stdout
    assert "median of seeds 4-6" in table
    events = combined["results"][0]["spread"]["num_events"]
    assert events["min"] == events["max"] or f"({events['min']:,}-{events['max']:,})" in table


def test_the_json_keeps_each_key_and_adds_a_spread_per_figure():
    out = payload("incast", "--senders", "3", "--message", "32K", "--messages", "2", "--paths", "2", "--seeds", "2")
    assert out["seeds"] == [1, 2] and out["seeded"] == ["RC's and TCP's ECMP hash", "DCQCN's ECN marks"]
    for row in out["results"]:
        figures = {"completion_s", "p50_flow_s", "p99_flow_s", "retransmissions", "timeouts", "drops"}
        assert set(row) == {"transport", "spread", *figures} and set(row["spread"]) == figures
        for name, spread in row["spread"].items():
            assert set(spread) == {"min", "max", "seeds", "values"} and spread["seeds"] == [1, 2]
            assert spread["min"] <= row[name] <= spread["max"]
    sweep = payload("sweep", "--values", "0,1%", *SMALL[:6], "--seeds", "2")
    assert [r["results"][0]["spread"]["p50_s"]["seeds"] for r in sweep["rows"]] == [[1], [1, 2]]  # no loss: one run


def test_a_run_no_seed_draws_runs_once():
    out = payload("compare", "--message", "64K", "--messages", "5", "--paths", "4", "--seeds", "5")
    assert out["seeds"] == [1] and out["seeded"] == [] and out["one_draw"] is False
    assert all(r["spread"]["p50_s"]["values"] == [r["p50_s"]] for r in out["results"])


@pytest.mark.parametrize("command", ["compare", "sweep", "incast", "ring"])
@pytest.mark.parametrize(
    ("value", "valid"),
    [("0", "greater than or equal to 1"), ("101", "less than or equal to 100"), ("x", "a valid integer")],
)
def test_a_bad_seed_count_is_a_one_line_refusal_naming_the_option(command, value, valid):
    result = runner.invoke(transport_app, [command, "--seeds", value], env=ENV)
    assert result.exit_code == 2 and result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--seeds" in lines[0], result.stderr
    assert valid in lines[0] and f"(got '{value}')" in lines[0]


def test_dcqcns_random_marks_are_drawn_by_the_seed_even_on_one_path():
    """Eight senders on one path: no loss and no hash to draw, but RC over PFC runs DCQCN, whose switches mark
    with RED's probability between Kmin and Kmax, so the seeds are run and RC's times differ between them;
    SRD and TCP draw nothing here and are the same for every seed. Without DCQCN one run is the answer."""
    out = payload("incast", "--senders", "8", "--paths", "1", "--seeds", "2")
    assert out["seeds"] == [1, 2] and out["seeded"] == ["DCQCN's ECN marks"] and out["one_draw"] is False
    rows = {row["transport"]: row["spread"]["completion_s"] for row in out["results"]}
    assert rows["rc"]["min"] < rows["rc"]["max"]  # the marks, drawn apart, cut the senders' rates apart
    assert rows["srd"]["min"] == rows["srd"]["max"] and rows["tcp"]["min"] == rows["tcp"]["max"]
    plain = payload("incast", "--senders", "8", "--paths", "1", "--seeds", "2", "--no-dcqcn")
    assert plain["seeds"] == [1] and plain["seeded"] == []
    assert "DCQCN's ECN marks" in run("incast", "--senders", "8", "--paths", "1", "--seeds", "2").stdout


def test_flows_to_distinct_receivers_on_one_path_queue_nowhere_so_no_mark_is_drawn():
    """A ring step on one path: each NIC's flow goes to its own receiver and the leaf's uplinks carry every NIC
    at once, so no queue builds and DCQCN marks nothing: one run is the answer, and another seed gives it too."""
    args = ["ring", "--instance", "p5.48xlarge", "--buffer", "4M", "--paths", "1", "--loss", "0"]
    out = payload(*args)
    assert out["seeds"] == [1] and out["seeded"] == []
    other = payload(*args, "--seed", "2", "--seeds", "1")
    assert [r["completion_s"] for r in other["results"]] == [r["completion_s"] for r in out["results"]]
    hashed = payload(*args[:-4], "--paths", "4", "--loss", "0", "--seeds", "2")
    assert hashed["seeded"] == ["RC's and TCP's ECMP hash", "DCQCN's ECN marks"]
