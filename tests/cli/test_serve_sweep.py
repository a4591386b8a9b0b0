"""``serve --rates`` (a rate sweep, one row per rate) and ``serve --plot`` (the simulation's figures)."""

import itertools
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.serving.rate_grid import MAX_RATES, parse_rates

runner = CliRunner()
SMALL = ("llama3.1-8b", "--tp", "1", "--dataset", "sharegpt", "--requests", "200")


def run(*args):
    return runner.invoke(
        app, ["serve", *args], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
    )


# ---- the grid ---------------------------------------------------------------------------------------------------


def test_a_range_doubles_and_ends_at_its_top():
    assert parse_rates("1:64") == [1, 2, 4, 8, 16, 32, 64]
    assert parse_rates("1:50") == [1, 2, 4, 8, 16, 32, 50]
    assert parse_rates("3:3") == [3]


def test_a_step_and_a_list():
    assert parse_rates("2:10:2") == pytest.approx([2, 4, 6, 8, 10])
    assert parse_rates("0.5:1.6:0.5") == pytest.approx([0.5, 1.0, 1.5])
    assert parse_rates("8, 1,2,2") == [1, 2, 8]


@given(st.floats(0.01, 1000), st.floats(1.0, 1000))
def test_a_doubling_grid_is_increasing_within_its_ends(low, span):
    rates = parse_rates(f"{low!r}:{low * span!r}")
    assert rates[0] == low and rates[-1] == pytest.approx(low * span)
    assert all(b > a for a, b in itertools.pairwise(rates))
    assert all(b <= 2 * a * (1 + 1e-9) for a, b in itertools.pairwise(rates))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("64:1", "down to"),
        ("1:x", "not a number"),
        ("0:4", "positive"),
        ("1:2:3:4", "not a range or a list"),
        ("1:1000:1", f"more than {MAX_RATES}"),
        (",", "no rate"),
    ],
)
def test_a_bad_grid_is_one_error_naming_the_option(text, why):
    with pytest.raises(ClusterSimError, match=why) as caught:
        parse_rates(text)
    assert caught.value.field == "--rates" and "A:B" in str(caught.value)


# ---- the sweep --------------------------------------------------------------------------------------------------


def test_a_sweep_gives_a_row_per_rate_and_throughput_follows_the_rate():
    result = run(*SMALL, "--rates", "4:32", "--slo", "ttft=2s,itl=50ms", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["mode"] == "sweep" and payload["slo"] == {"ttft_s": 2.0, "itl_s": 0.05}
    rows = payload["rates"]
    assert [row["rate_per_s"] for row in rows] == [4, 8, 16, 32]
    for row in rows:
        assert set(row["ttft_s"]) == set(row["itl_s"]) == {"p50", "p90", "p99", "mean"}
        assert row["requests"] == 200 and 0 <= row["goodput"]["fraction"] <= 1
        assert row["closed_form"]["scenario"] == "server"
        # a run cannot serve more than it is offered (Poisson over 200 requests: within 25%); its span ends at the
        # last token, so a short run reads below the offered rate
        assert row["throughput"]["requests_per_s"] <= row["rate_per_s"] * 1.25
    achieved = [row["throughput"]["output_tokens_per_s"] for row in rows]
    assert achieved == sorted(achieved)


def test_a_sweeps_row_is_the_single_run_at_that_rate():
    sweep = json.loads(run(*SMALL, "--rates", "2,16", "--json").stdout)
    single = json.loads(run(*SMALL, "--rate", "16", "--json").stdout)
    row = sweep["rates"][1]
    assert row["ttft_s"] == single["ttft_s"] and row["itl_s"] == single["itl_s"]
    assert row["throughput"] == single["throughput"]


def test_a_sweep_shows_its_progress_on_stderr_only():
    result = runner.invoke(
        app,
        ["serve", *SMALL, "--rates", "2:4", "--json"],
        env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_PROGRESS": "1"},
    )
    assert result.exit_code == 0, result.output
    assert "simulating 2 rates" in result.stderr and json.loads(result.stdout)["mode"] == "sweep"


def test_a_sweep_over_seeds_gives_each_rows_medians_and_spread():
    payload = json.loads(run(*SMALL, "--rates", "2,8", "--seeds", "2", "--json").stdout)
    assert payload["seeds"] == [0, 1]
    for row in payload["rates"]:
        low, high = row["spread"]["ttft_s"]["p99"]
        assert low <= row["ttft_s"]["p99"] <= high


def test_the_sweep_table_has_a_row_per_rate():
    result = run(*SMALL, "--rates", "2:8", "--slo", "ttft=1s")
    assert result.exit_code == 0, result.output
    assert "simulated rate sweep" in result.output and "goodput" in result.output
    assert all(f"│ {rate:>6} │" in result.output for rate in ("2", "4", "8"))


@pytest.mark.parametrize(("extra", "flag"), [(("--rate", "4"), "--rate"), (("--concurrency", "4"), "--concurrency")])
def test_a_sweep_is_the_one_load(extra, flag):
    result = run(*SMALL, "--rates", "1:4", *extra, "--json")
    assert result.exit_code == 2
    error = json.loads(result.stderr)
    assert "give one load" in error["error"] and "--rates" in error["error"]


def test_a_bad_rates_text_is_one_line():
    result = run(*SMALL, "--rates", "8:1")
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "--rates" in result.output and "down to" in result.output


# ---- the figures ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", ["png", "svg"])
def test_plot_writes_the_cdf_of_a_run_and_the_curve_of_a_sweep(tmp_path, suffix):
    cdf, curve = tmp_path / f"cdf.{suffix}", tmp_path / f"sweep.{suffix}"
    one = run(*SMALL, "--rate", "8", "--slo", "ttft=1s,itl=40ms", "--plot", str(cdf), "--json")
    sweep = run(*SMALL, "--rates", "4:8", "--slo", "ttft=1s", "--plot", str(curve), "--json")
    assert one.exit_code == 0 and sweep.exit_code == 0, one.output + sweep.output
    head = {"png": b"\x89PNG", "svg": b"<?xml"}[suffix]
    assert cdf.read_bytes().startswith(head) and curve.read_bytes().startswith(head)
    if suffix == "svg":
        assert "TTFT" in cdf.read_text() or "TTFT" in curve.read_text()


def test_plot_alone_turns_the_simulator_on_and_a_bad_path_is_refused(tmp_path):
    result = run(*SMALL, "--rate", "4", "--plot", str(tmp_path / "fig.txt"))
    assert result.exit_code == 2 and "--plot" in result.output
    missing = tmp_path / "no" / "such" / "dir" / "fig.png"
    result = run(*SMALL, "--rate", "4", "--plot", str(missing), "--json")
    assert result.exit_code == 2 and json.loads(result.stderr)["field"] == "--plot"
