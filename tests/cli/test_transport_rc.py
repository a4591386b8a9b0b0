"""``clustersim transport``'s RC options: the links follow the instance's fabric (credit on InfiniBand
NICs, PFC with DCQCN on Ethernet ones), --lossy and --flow-control none give the old drop-tail links,
and combinations that make no sense are refused in one line naming the option and what is valid."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.transport import transport_app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "240"}
SMALL = ["--message", "64K", "--messages", "2", "--paths", "4", "--senders", "2", "--seeds", "1"]


def run(*args: str):
    return runner.invoke(transport_app, list(args), env=ENV)


def scenario(*args: str) -> dict:
    result = run("incast", *SMALL, *args, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["results"][1]["transport"] == "rc" and payload["results"][1]["drops"] >= 0
    return payload


def test_rc_follows_the_instances_fabric_by_default():
    ib = run("incast", "--instance", "dgx-h100", *SMALL)
    assert ib.exit_code == 0, ib.output
    assert "RC: credit, selective, timeout 2^20" in ib.stdout
    roce = run("incast", "--instance", "p5.48xlarge", *SMALL)
    assert "RC: PFC + DCQCN, selective, timeout 2^20" in roce.stdout


def test_lossy_is_flow_control_none_and_keeps_the_old_links():
    payload = scenario("--lossy", "--rc-recovery", "go-back-n", "--rc-timeout", "14", "--rc-retry", "3")
    same = scenario("--flow-control", "none", "--rc-recovery", "go-back-n", "--rc-timeout", "14", "--rc-retry", "3")
    assert payload["results"] == same["results"]
    table = run("incast", *SMALL, "--lossy", "--no-dcqcn").stdout
    assert "RC: lossy, selective, timeout 2^20" in table


def test_a_lossless_incast_drops_nothing_where_the_lossy_one_drops():
    args = ["--senders", "8", "--message", "256K", "--messages", "2", "--seeds", "1"]
    lossless = json.loads(run("incast", *args, "--no-dcqcn", "--json").stdout)["results"][1]
    lossy = json.loads(run("incast", *args, "--lossy", "--json").stdout)["results"][1]
    assert lossless["drops"] == 0 and lossy["drops"] > 0
    assert lossless["completion_s"] < lossy["completion_s"]


@pytest.mark.parametrize(
    ("args", "option", "text"),
    [
        (["--lossy", "--flow-control", "pfc"], "--lossy", "it means --flow-control none"),
        (["--flow-control", "credit"], "--flow-control", "(efa-v2 NICs; valid: pfc, none)"),
        (["--instance", "dgx-h100", "--flow-control", "pfc"], "--flow-control", "(infiniband-ndr NICs; valid: credit"),
        (["--flow-control", "xoff"], "--flow-control", "not one of none, pfc, credit"),
        (["--lossy", "--dcqcn"], "--dcqcn", "valid: --dcqcn with --flow-control pfc"),
        (["--instance", "dgx-h100", "--dcqcn"], "--dcqcn", "runs with --flow-control credit"),
        (["--rc-recovery", "sack"], "--rc-recovery", "not one of selective, go-back-n"),
    ],
)
def test_impossible_rc_options_are_refused_in_one_line(args, option, text):
    for command in ("compare", "incast", "sweep", "ring"):
        result = run(command, *args, "--json")
        assert result.exit_code == 2, (command, result.output)
        payload = json.loads(result.output)
        assert payload["field"] == option and text in payload["error"], payload


def test_outstanding_messages_show_in_the_title_and_the_scenario():
    payload = json.loads(
        run("compare", "--message", "16K", "--messages", "8", "--rc-outstanding", "4", "--json").stdout
    )
    assert payload["scenario"]["rc_outstanding"] == 4
    assert (
        "timeout 2^20, 4 outstanding"
        in run("compare", "--message", "16K", "--messages", "8", "--rc-outstanding", "4").stdout
    )


def test_the_retry_count_is_a_3_bit_field():
    result = run("compare", "--rc-retry", "8")
    assert result.exit_code == 2 and "--rc-retry" in result.output
