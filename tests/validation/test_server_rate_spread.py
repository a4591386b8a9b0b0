"""benchmarks/server_rate_spread.py: the spread of the rates submitters chose for one server benchmark."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "server_rate_spread.py"


def _script():
    spec = importlib.util.spec_from_file_location("server_rate_spread", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_seven_submitters_of_deepseek_r1_on_b300_are_one_group_with_their_spread():
    """MLPerf Inference v6.0's DeepSeek-R1 Server on 8 B300s: seven rows (NVIDIA's and six partners'), one group;
    the least rate is Quanta's 9.46 requests/s over 8 devices, the greatest Nebius's 16.05."""
    script = _script()
    (group,) = script.spread(script.DEFAULT_FILES, ["deepseek-r1", "_8xb300", "mlperf60"])
    assert (group["model"], group["accelerator"], group["round"]) == ("deepseek-r1", "b300", "mlperf60")
    assert len(group["rows"]) == 7
    rates = [row["measured_per_device"] for row in group["rows"]]
    assert group["least_per_device"] == min(rates) == pytest.approx(1.182, abs=1e-3)
    assert group["greatest_per_device"] == max(rates) == pytest.approx(2.006, abs=1e-3)
    assert group["spread"] == pytest.approx(max(rates) / min(rates))
    fastest = max(group["rows"], key=lambda row: row["measured_per_device"])
    assert "nebius" in fastest["id"]
    assert group["model_over_greatest"] == pytest.approx(fastest["model_per_device"] / max(rates) - 1.0)


def test_only_server_rows_at_a_chosen_rate_are_read():
    script = _script()
    ids = [row.id for row in script.server_rows(script.DEFAULT_FILES, ["mlperf60"])]
    assert ids and all("server" in i for i in ids)
    assert not any("disaggregated" in i or "offline" in i for i in ids)
