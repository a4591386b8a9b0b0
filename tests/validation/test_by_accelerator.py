"""Error by kind and accelerator: now and left out, each case in the group of the chip it ran on."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.intervals import Residual, ResidualTable
from clustersim.validation.by_accelerator import accelerator_groups
from clustersim.validation.scoring import CaseScore


def _score(case_id: str, error: float, accelerator: str, kind: str = "training") -> CaseScore:
    return CaseScore(case_id, kind, 1.0 + error, 1.0, error, "step_time_s", "g", accelerator=accelerator)


def _residual(case_id: str, kind: str, field: str, r: float) -> Residual:
    return Residual(case_id, "src", kind, "blackwell", "b300", "megatron", 8, field, r)


def test_each_case_counts_in_its_kind_and_accelerator_in_order():
    scores = [
        _score("b300_a", 0.20, "b300"),
        _score("b300_b", -0.40, "b300"),
        _score("h100", 0.05, "h100-sxm"),
        _score("served", 0.10, "b300", kind="inference"),
        _score("nowhere", 0.50, ""),
    ]
    groups = [(g.kind, g.accelerator, g.cases, g.mape) for g in accelerator_groups(scores, ResidualTable(()))]
    assert groups == [
        ("training", "b300", 2, pytest.approx(0.30)),
        ("training", "h100-sxm", 1, pytest.approx(0.05)),
        ("training", "unstated", 1, pytest.approx(0.50)),
        ("inference", "b300", 1, pytest.approx(0.10)),
    ]


def test_the_left_out_error_is_of_the_cases_own_primary_field():
    # r = ln(measured / predicted) of the duration; a rate's residual has its sign flipped
    scores = [_score("step", 0.0, "b300"), _score("served", 0.0, "b300", kind="inference")]
    table = ResidualTable(
        (
            _residual("step", "training", "step_time_s", math.log(2)),  # predicted at half: 50% off
            _residual("served", "inference", "output_tokens_per_s", math.log(1.25)),  # a rate 25% high
            _residual("served", "inference", "ttft_s", 3.0),  # a latency field sizes only its own intervals
            _residual("other", "training", "step_time_s", 5.0),  # not scored: counts nowhere
        )
    )
    training, inference = accelerator_groups(scores, table)
    assert (training.left_out_cases, training.left_out_mape) == (1, pytest.approx(0.5))
    assert (inference.left_out_cases, inference.left_out_mape) == (1, pytest.approx(0.25))


def test_validate_reports_the_newest_chips_held_out_in_json_and_on_the_console():
    runner = CliRunner()
    result = runner.invoke(app, ["validate", "--json"])
    assert result.exit_code == 0, result.output
    groups = {(g["kind"], g["accelerator"]): g for g in json.loads(result.stdout)["accelerators"]}
    # Blackwell Ultra's published runs, held out of every fit: Megatron-Bridge's 23 GB300 (26.04.01 to 26.08) and 7 B300
    # training rows, its Nemotron 3 Nano rows (6 on GB300 and 4 on B300, 26.02.01 to 26.08) and Nemotron 3 Super and
    # Ultra rows (11 on GB300 and 6 on B300, 26.04 to 26.08) and the Megatron-Core
    # MoE model zoo's GB300 row, MLPerf Training v5.1's GB300 (NVIDIA's Llama 3.1 8B
    # on 8, 72 and 512 and 405B on 512, Lambda's 8B on 72) and B300 runs (Dell, Lenovo, Nebius and Supermicro's 8B on
    # 8), and MLPerf Training v6.0's 14 GB300 runs (DeepSeek-V3 by NVIDIA on 256 and 512 and CoreWeave on 2,048-8,192,
    # GPT-OSS-20B by HPE, Oracle and NVIDIA on 8 and NVIDIA on 72, Llama 3.1 405B by NVIDIA on 2,048, 8B on a rack by
    # NVIDIA, Nebius, Oracle and Lambda) and 12 B300 runs (GPT-OSS-20B by Cisco, Dell and Nebius on 8-64, 8B by Dell,
    # Supermicro, Cisco, Nebius and Quanta on 8-64); MLPerf v5.1's four GB300 NVL72 serving runs (Llama
    # 3.1 405B and DeepSeek-R1, offline and server) and v6.0's Llama 2 70B on 8 B300 (offline and server) and the GB300
    # NVL72 rack (offline), Llama 3.1 405B (8 B300 offline and server, the GB300 NVL72 rack offline) and DeepSeek-R1 (8
    # B300 and the GB300 NVL72 rack, offline and server), the partners' 26 runs on 8 B300 (ASUSTeK, Cisco, Dell,
    # GigaComputing, Quanta, Nebius) and 8 on GB300 (Nebius's and CoreWeave's two trays, Nebius's rack) and NVIDIA's 288
    # GB300 (offline and server), and the GB300 rack's three disaggregated runs (Llama 2 70B server and interactive,
    # Llama 3.1 405B interactive); SGLang's Qwen3.6-35B-A3B cookbook runs on one B300 (4); MLPerf v6.1's partner runs
    # whose own engine files state their settings (DeepSeek-R1 by GigaComputing on 8 B300 and Azure on a GB300 rack,
    # server; Llama 2 70B by Supermicro and CoreWeave on 8 B300), each with a left-out residual
    expected = {
        ("training", "gb300"): 60,
        ("training", "b300"): 33,
        ("inference", "gb300"): 20,
        ("inference", "b300"): 39,
    }
    for key, cases in expected.items():
        assert groups[key]["cases"] == groups[key]["left_out_cases"] == cases
        assert 0 < groups[key]["mape"] < 1 and 0 < groups[key]["left_out_mape"] < 1
    memory = groups[("memory", "a100-sxm4-80gb")]  # nothing of memory is fitted: held out already, residual and all
    assert memory["left_out_mape"] == pytest.approx(memory["mape"], abs=1e-3) and memory["left_out_cases"] == 8
    console = runner.invoke(app, ["validate"], env={"COLUMNS": "200"})
    assert "by accelerator: MAPE now and left out" in console.stdout
