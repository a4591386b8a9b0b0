"""``plan --safe``: rows ranked by the upper end of their interval of the objective (issue 22 item 5), not by
the prediction; the two orders differ where intervals differ (scale buckets, layout features)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
PLAN = ["plan", "mixtral-8x7b", "--tokens", "1T", "--instances", "p5.48xlarge", "--nodes", "4,8,16", "--ep", "1,8",
        "--top", "3", "--objective", "cost", "--json"]  # fmt: skip


def _plan(*extra: str) -> dict:
    result = runner.invoke(app, [*PLAN, *extra], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_safe_ranks_by_the_interval_upper_end_and_says_so() -> None:
    nominal, safe = _plan(), _plan("--safe")
    assert nominal["safe"] is False and safe["safe"] is True
    costs = [row["cost_usd"] for row in nominal["top"]]
    uppers = [row["interval"]["cost_usd"]["high"] for row in safe["top"]]
    assert costs == sorted(costs) and uppers == sorted(uppers)
    # the cheapest prediction (4 nodes, an interval from the 1-64 device runs) is not the cheapest upper end
    assert nominal["top"][0]["nodes"] != safe["top"][0]["nodes"]
    assert {row["nodes"] for row in nominal["top"]} == {row["nodes"] for row in safe["top"]}


def _train(*args: str) -> dict:
    result = runner.invoke(app, ["train", *args, "--json"], env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""})
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_safe_keeps_only_layouts_that_fit_at_the_upper_end_of_their_memory_interval() -> None:
    """Llama 3 70B on 4 p5: the fastest layout that fits by the prediction (66.8 GiB of 72 usable) is over what is
    usable at the upper end of its memory's 80% interval (75.5 GiB); --safe chooses one that is not."""
    job = ("llama3-70b", "--instance", "p5.48xlarge", "--nodes", "4")
    nominal, safe = _train(*job), _train(*job, "--safe")
    assert nominal["fits"] and safe["fits"]
    assert nominal["intervals"]["memory_required_bytes"]["high"] > 0.9 * nominal["capacity_bytes"]
    assert safe["intervals"]["memory_required_bytes"]["high"] <= 0.9 * safe["capacity_bytes"]  # the headroom too
    assert safe["step_s"] > nominal["step_s"]  # what the margin costs
    assert any("fit at their memory interval's upper end" in note for note in safe["notes"])
    two = runner.invoke(app, ["train", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "2", "--safe"])
    assert two.exit_code != 0 and "--headroom sets it, and --safe the upper end of the memory's interval" in " ".join(
        two.output.split()
    )


def test_plan_safe_keeps_only_rows_that_fit_at_the_upper_end_of_their_memory_interval() -> None:
    args = ["plan", "llama3-70b", "--tokens", "1T", "--instances", "p5.48xlarge", "--nodes", "2,3,4", "--json"]
    env = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": ""}
    nominal = json.loads(runner.invoke(app, args, env=env).stdout)
    safe = json.loads(runner.invoke(app, [*args, "--safe"], env=env).stdout)
    layouts = {row["nodes"]: row for row in nominal["top"]}
    safer = {row["nodes"]: row for row in safe["top"]}
    usable = 0.9 * 80 * 2**30  # the default headroom
    # 4 p5: the fastest layout needs 66.8 GiB, under 72 usable but not at its interval's upper end; --safe's needs less
    assert layouts[4]["memory_required_bytes"] < usable < layouts[4]["memory_required_bytes"] * 1.2
    assert safer[4]["memory_required_bytes"] < layouts[4]["memory_required_bytes"]
    assert safer[4]["layout"] != layouts[4]["layout"]
    # 2 p5: neither fits; --safe says how much more it keeps free
    assert any("of 72.0 GiB usable (10% headroom)" in note for note in nominal["notes"])
    (kept,) = [note for note in safe["notes"] if "2 x p5.48xlarge" in note]
    assert int(re.search(r"\((\d+)% headroom\)", kept).group(1)) > 10  # the interval's upper end, more than 10%


def test_each_plan_row_gives_its_memory_the_interval_of_published_peaks() -> None:
    plan = _plan()
    for row in plan["top"]:
        memory = row["memory_interval"]
        assert memory["low"] < row["memory_required_bytes"] < memory["high"] and memory["level"] == 0.8
        assert memory["basis"].startswith("memory, ")
