"""``train --network sim --background SHARE[:PATTERN]`` and ``fabric step --background``: other tenants'
traffic on the fabric's other hosts, sharing the links with the job's collectives (issue 23 item 2).

The fabric is held to 48 hosts (--fabric-hosts: 32 hosts of tenants) and two seeds to keep the runs short."""

from __future__ import annotations

import json
from functools import cache

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
DP_HEAVY = ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1",
            "--zero", "1", "--global-batch", "128", "--json"]  # fmt: skip
SMALL = ["--network", "sim", "--fabric-hosts", "48", "--fabric-seeds", "2"]
THIN = ["--placement", "random", "--routing", "ecmp", "--oversubscription", "2"]
FAT = ["--placement", "packed", "--routing", "spray", "--oversubscription", "1"]


@cache
def _run(*extra: str) -> dict:
    """The JSON of a run (each asked once: the tests share them)."""
    result = runner.invoke(app, [*DP_HEAVY, *SMALL, *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_no_background_share_is_todays_answer_exactly_and_says_so():
    today, zero = _run(*THIN), _run(*THIN, "--background", "0")
    assert zero["step_s"] == today["step_s"] and zero["network"]["factors"] == today["network"]["factors"]
    assert today["network"]["background"] is None
    background = zero["network"]["background"]
    assert (background["share"], background["pattern"], background["hosts"]) == (0.0, "permutation", 32)
    assert background["factors_without"] == today["network"]["factors"]


def test_tenants_on_a_thin_hashed_spine_slow_the_data_parallel_step_further():
    """Random hosts, ECMP, 2:1: the tenants' flows hash onto the uplinks the DP ring crosses, so its
    steps (each as slow as its slowest flow) slow down beyond the oversubscription's own cost."""
    found = _run(*THIN, "--background", "0.6")
    net = found["network"]
    without = net["background"]["factors_without"]
    assert net["factors"]["tp"] == pytest.approx(1.0)
    for kind in ("dp reduce-scatter", "dp all-gather"):
        assert net["factors"][kind] > 1.2 * without[kind] > 1.2
        low, high = net["spread"][kind]["min"], net["spread"][kind]["max"]
        assert low <= net["factors"][kind] <= high
    assert found["step_s"] > _run(*THIN)["step_s"]


def test_tenants_beside_a_packed_job_on_a_sprayed_non_blocking_fabric_cost_it_nothing():
    """Packed, the DP rings stay on their rail's leaf and the leaves' downlinks are per host: no tenant
    crosses a link of the job's, so the step is the analytic one, as without them."""
    found = _run(*FAT, "--background", "0.6")
    net = found["network"]
    assert all(f == pytest.approx(1.0, abs=1e-9) for f in net["factors"].values())
    assert net["added_fraction"] == pytest.approx(0.0, abs=1e-9)
    assert net["background"]["factors_without"] == net["factors"]


def test_the_note_line_names_the_background_and_the_factors_without_it():
    result = runner.invoke(app, [*DP_HEAVY[:-1], *SMALL, *FAT, "--background", "0.5:shift"])
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "(packed placement, seed 0, spray, 1:1 leaf-to-spine)" in flat  # a shift draws nothing: one run
    assert "background: 0.5 of the other hosts' NICs busy (shift), 32 hosts; without it tp x1.00" in flat


def test_bad_backgrounds_are_refused_by_name():
    cases = {
        ("--background", "0.5"): "--background 0.5: other tenants' traffic runs on the simulated fabric; it needs "
        "--network sim",
        ("--network", "sim", "--background", "1.5"): "share '1.5' must be a number from 0 to 0.99",
        ("--network", "sim", "--background", "0.5:flood"): "unknown pattern 'flood'",
        ("--network", "sim", "--fabric-hosts", "16", "--background", "0.5"): "the fabric's 16 hosts are all the job's",
    }
    for options, message in cases.items():
        result = runner.invoke(app, [*DP_HEAVY[:-1], *options])
        assert result.exit_code == 2, result.output
        assert message in " ".join(result.output.split())


def test_fabric_step_takes_the_same_option_and_reports_the_background():
    step = ["fabric", "step", "llama3-8b", "--nodes", "16", "--tp", "8", "--pp", "1", "--zero", "1", "--global-batch",
            "128", "--fabric-hosts", "48", *THIN, "--json"]  # fmt: skip
    runs = [runner.invoke(app, [*step, *extra]) for extra in ([], ["--background", "0.6"])]
    assert all(r.exit_code == 0 for r in runs), [r.output for r in runs]
    quiet, loaded = (json.loads(r.stdout) for r in runs)
    assert quiet["background"] is None
    assert loaded["background"] == {"share": 0.6, "pattern": "permutation", "hosts": 32}
    assert "the background's permutation" in loaded["seeded"]
    times = [{c["kind"]: c["time_s"] for c in run["collectives"]} for run in (quiet, loaded)]
    assert times[1]["dp reduce-scatter"] > times[0]["dp reduce-scatter"]
    assert times[1]["tp"] == pytest.approx(times[0]["tp"])
    # the tenants' bytes count for the job's window only: no link is busier than its line rate
    assert 0.9 < loaded["max_link_utilization"] <= 1.0 + 1e-9
    assert all(c["max_link_utilization"] <= 1.0 + 1e-9 for c in loaded["collectives"])
    crowded = runner.invoke(app, [*(o if o != "48" else "16" for o in step), "--background", "0"])
    assert crowded.exit_code == 2 and "the fabric's 16 hosts are all the job's" in " ".join(crowded.output.split())
