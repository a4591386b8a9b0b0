"""``clustersim explain --log`` on real torchtitan logs (tests/data/ingest/SOURCES.md): tokens per second per
device as the measurement, the config the log prints as options, torchtitan as the framework; logs that
cannot be priced, refused in one line."""

from __future__ import annotations

import json
import statistics
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_COLLECTIVE_CALIBRATION": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
# step 50: 1,874 tps, 389.87 TFLOP/s, 39.42% MFU, 81.85 GiB reserved = 86.17% of its device: an H100 96GB
QWEN3_LOG = DATA / "torchtitan_qwen3_32b_fsdp8_pr1690.log"
CP2_LOG = DATA / "torchtitan_llama3_8b_flex_cp2_pr1884.log"  # NGPU=4, context parallel 2, full AC
DEBUG_LOG = DATA / "torchtitan_flex_debug_pr1437.log"  # no batch or config line
# torchtitan's qwen3_32b preset (8 H100s, here the catalogued H100 96GB host the log's memory share points to; an
# 80 GB p5 cannot hold the run): local batch 2, seq_len 4096, full activation checkpointing
# (https://github.com/pytorch/torchtitan/blob/main/torchtitan/models/qwen3/train_configs/qwen3_32b.py)
QWEN3 = ["qwen3-32b", "--instance", "grand-teton-h100-96gb", "--nodes", "1", "--tp", "1", "--pp", "1",
         "--micro-batch", "2", "--global-batch", "16", "--seq", "4096", "--recompute", "full"]  # fmt: skip


def _invoke(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_torchtitan_log_is_measured_by_its_tokens_per_second_and_priced_as_torchtitan() -> None:
    out = _invoke("explain", *QWEN3, "--log", str(QWEN3_LOG))
    # 16 sequences x 4096 tokens at 1,874 tokens/s on each of 8 devices
    assert out["measured_step_s"] == pytest.approx(16 * 4096 / (1874 * 8), rel=1e-12)
    measured = out["measured"]
    assert (measured["framework"], measured["measure"], measured["measured"], measured["steps"]) == (
        "torchtitan", "tokens_per_s_per_device", 1874.0, 1)  # fmt: skip
    assert measured["settings"] == {"zero": 3, "precision": "bf16"}  # FSDP by default, no float8 converter
    assert out["framework"] == "torchtitan" and out["layout"]["zero"] == 3 and out["layout"]["dp"] == 8
    # the same job as train prices it with torchtitan's profile, and the log's MFU is near the predicted one
    train = _invoke("train", *QWEN3, "--zero", "3", "--framework", "torchtitan")
    assert out["predicted_step_s"] == pytest.approx(train["step_s"], rel=1e-12)
    assert train["mfu"] == pytest.approx(0.3942 * out["measured_step_s"] / out["predicted_step_s"], rel=0.05)
    # the run compiled; priced eager on its own H100 96GB host it is 14.6% faster than predicted, at the low end of
    # the interval (just inside it since the Hopper residuals hold the GPT-OSS H100 rows, 2026-12-05): the GEMMs,
    # moved up 1.30x, would close it alone (past their plausible range), and the hint says to explain a compiled run
    # with --torch-compile (test_torch_compile: -4.5%, well inside)
    top = out["candidates"][0]
    low, high = out["interval"]["low_s"], out["interval"]["high_s"]
    assert out["gap"] < -0.1 and out["within_interval"] is (low <= out["measured_step_s"] <= high)
    assert out["measured_step_s"] < low * 1.05  # at the low end, whichever side
    assert top["term"] == "compute (GEMMs)" and 1.2 < top["factor_needed"] < 1.4
    assert "priced eager: if the run compiled, explain it with --torch-compile" in top["hint"]
    assert "NVTE_" not in top["hint"]
    memory = next(c for c in out["candidates"] if c["term"] == "memory-bound operations")
    assert "torch.compile fuses them (--compile.enable" in memory["hint"]


def test_a_compiled_run_is_explained_with_a_software_file_that_says_so(tmp_path: Path) -> None:
    """PR #1690's run used torch.compile (SOURCES.md); torchtitan's profile is eager unless told: a --software
    file that turns eager element-wise kernels off prices the run as it ran, and most of the gap closes."""
    compiled = tmp_path / "compiled.toml"
    compiled.write_text('[torchtitan]\neager_elementwise = false\nsource = "the run used torch.compile"\n')
    eager = _invoke("explain", *QWEN3, "--log", str(QWEN3_LOG))
    fused = _invoke("explain", *QWEN3, "--log", str(QWEN3_LOG), "--software", str(compiled))
    assert fused["measured_step_s"] == eager["measured_step_s"]
    assert fused["predicted_step_s"] < eager["predicted_step_s"] and abs(fused["gap"]) < abs(eager["gap"]) / 2
    # --torch-compile says the same without a file (the README's example: 4.596 s predicted, -4.9%)
    flagged = _invoke("explain", *QWEN3, "--log", str(QWEN3_LOG), "--torch-compile")
    assert flagged["predicted_step_s"] == pytest.approx(fused["predicted_step_s"], rel=1e-12)
    assert (flagged["torch_compile"], eager["torch_compile"]) == (True, False)
    assert flagged["predicted_step_s"] == pytest.approx(4.596, abs=5e-4)
    assert flagged["gap"] == pytest.approx(-0.0488, abs=1e-3)
    # priced compiled: no lever is told to turn torch.compile on
    assert not any("--compile.enable" in c["hint"] or "--torch-compile" in c["hint"] for c in flagged["candidates"])
    memory = next(c for c in flagged["candidates"] if c["term"] == "memory-bound operations")
    assert "priced compiled" in memory["hint"] and "graph breaks" in memory["hint"]


def test_a_log_that_says_it_compiled_is_priced_compiled(tmp_path: Path) -> None:
    """torchtitan prints ``Compiling each TransformerBlock with torch.compile`` (apply_compile) when it compiles;
    PR #1690's metric line after that line (the format of torchtitan_agpt_2b_xpu_2nodes_compiled_ezpz.log) is
    priced as --torch-compile prices it, and a flag that disagrees is refused naming the line."""
    said = tmp_path / "compiled.log"
    compiling = (
        "[rank0]:[titan] 2025-09-11 15:20:01,871 - root - INFO - Compiling each TransformerBlock with torch.compile"
    )
    said.write_text(compiling + "\n" + QWEN3_LOG.read_text())
    out = _invoke("explain", *QWEN3, "--log", str(said))
    flagged = _invoke("explain", *QWEN3, "--log", str(QWEN3_LOG), "--torch-compile")
    assert out["measured"]["settings"]["torch_compile"] is True and out["torch_compile"] is True
    assert out["predicted_step_s"] == flagged["predicted_step_s"]
    agreed = _invoke("explain", *QWEN3, "--log", str(said), "--torch-compile")  # the flag may repeat the log
    assert agreed["predicted_step_s"] == out["predicted_step_s"]
    result = runner.invoke(app, ["explain", *QWEN3, "--log", str(said), "--no-torch-compile"], env=ENV)
    assert result.exit_code == 2, result.output
    assert "compiled.log, line 1: the log ran torch.compile on, --no-torch-compile says off" in result.stderr
    assert "\n" not in result.stderr.strip()


def test_a_multi_node_log_runs_its_ranks_per_node_times_the_nodes() -> None:
    """run_train.sh's NGPU is per node: issue #1232's Llama 3 70B, PP 16 on 2 nodes of 8 GPUs, prints NGPU=8."""
    from clustersim.cli.explain_log import read_log

    logged = read_log(DATA / "torchtitan_llama3_70b_pp16_2nodes_issue1232.log")
    assert logged.world_size is None and logged.settings["global_batch"] == 2 and logged.settings["seq"] == 4096
    assert logged.world(2) == (16, "line 1: the log ran 8 ranks per node x 2 node(s) (--nodes) = 16 ranks")
    assert logged.world(1)[0] == 8
    assert read_log(QWEN3_LOG).world(4)[0] is None  # one metric line: no mesh, no NGPU


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((*QWEN3, "--log", str(QWEN3_LOG), "--framework", "megatron"),
         "the log is a torchtitan run, --framework says megatron"),
        ((*QWEN3, "--log", str(QWEN3_LOG), "--zero", "1"), "the log says zero 3, --zero says 1"),
        (("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1", "--global-batch", "8",
          "--log", str(CP2_LOG)),
         "line 1: the log ran 4 ranks per node x 1 node(s) (--nodes) = 4 ranks, the system given has 8"),
        (("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--log", str(DEBUG_LOG)),
         "the log does not state the global batch"),
    ],
)  # fmt: skip
def test_a_torchtitan_log_that_cannot_be_this_job_is_refused_in_one_line(args: tuple[str, ...], words: str) -> None:
    result = runner.invoke(app, ["explain", *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert words in result.stderr and "\n" not in result.stderr.strip()


LINE = (
    "[rank0]:[titan] 2025-09-11 15:23:55,616 - root - INFO - step: {step:2d}  loss:  7.1291  grad_norm:  8.3760  "
    "memory: 81.85GiB(86.17%)  tps: {tps:,}  tflops: 389.87  mfu: 39.42%"
)  # the format of QWEN3_LOG's line


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=1, max_value=10**6), min_size=3, max_size=9))
def test_the_measurement_is_the_median_tokens_per_second_after_two_warm_up_steps(tps: list[int]) -> None:
    from clustersim.cli.explain_log import read_log

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "titan.log"
        path.write_text("\n".join(LINE.format(step=n, tps=t) for n, t in enumerate(tps, start=1)) + "\n")
        logged = read_log(path)
    assert (logged.framework, logged.measure, logged.steps) == ("torchtitan", "tokens_per_s_per_device", len(tps) - 2)
    assert logged.value == statistics.median(tps[2:])


@pytest.mark.parametrize("flag", ["--torch-compile", "--no-torch-compile"])
def test_the_text_prints_the_estimate_s_notes_as_train_does(flag: str) -> None:
    """How the run was priced (compiled or eager) is said in explain's text, in train's own lines."""
    explained = runner.invoke(app, ["explain", *QWEN3, "--log", str(QWEN3_LOG), flag], env=ENV)
    trained = runner.invoke(app, ["train", *QWEN3, "--zero", "3", "--framework", "torchtitan", flag], env=ENV)
    assert explained.exit_code == 0 and trained.exit_code == 0, explained.output + trained.output
    notes = [line for line in trained.stdout.splitlines() if line.startswith("note: ")]
    said = "compiled (torch.compile)" if flag == "--torch-compile" else "eager (--no-torch-compile)"
    assert any(f"note: torchtitan priced {said}" in line for line in notes)
    assert notes == [line for line in explained.stdout.splitlines() if line.startswith("note: ")]
