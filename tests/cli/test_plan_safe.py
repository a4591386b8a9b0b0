"""``plan --safe``: rows ranked by the upper end of their interval of the objective (issue 22 item 5), not by
the prediction; the two orders differ where intervals differ (scale buckets, layout features)."""

from __future__ import annotations

import json

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
