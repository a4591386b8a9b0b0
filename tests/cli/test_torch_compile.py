"""``--torch-compile/--no-torch-compile`` on ``train`` and ``plan``: a PyTorch eager stack (torchtitan, eager
by default) priced compiled or eager, carried by the scenario file, said in the output, and refused for a
framework whose profile prices its own fused kernels."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {
    "CLUSTERSIM_COLLECTIVE_CALIBRATION": "",
    "CLUSTERSIM_EFFICIENCY": "",
    "CLUSTERSIM_SOFTWARE": "",
    "COLUMNS": "200",
}
# PR #1690's Qwen3 32B run (tests/cli/test_explain_torchtitan.py): 8 H100 96GB, FSDP, local batch 2, full AC
QWEN3 = ["qwen3-32b", "--instance", "grand-teton-h100-96gb", "--nodes", "1", "--tp", "1", "--pp", "1",
         "--micro-batch", "2", "--global-batch", "16", "--seq", "4096", "--recompute", "full", "--zero", "3",
         "--framework", "torchtitan"]  # fmt: skip


def _train(*args: str) -> dict:
    result = runner.invoke(app, ["train", *args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_compiled_torchtitan_is_faster_and_its_default_is_eager_said_so() -> None:
    default, eager, compiled = _train(*QWEN3), _train(*QWEN3, "--no-torch-compile"), _train(*QWEN3, "--torch-compile")
    assert (default["torch_compile"], eager["torch_compile"], compiled["torch_compile"]) == (False, False, True)
    assert default["step_s"] == eager["step_s"]  # torchtitan's default is eager
    # fused element-wise ops and loss: the eager kernels' extra traffic goes, every other operation stays
    assert compiled["step_s"] < eager["step_s"]
    ops = {
        run: {op["name"]: op["forward_s"] for op in out["operations"]} for run, out in (("c", compiled), ("e", eager))
    }
    eager_only = {"eager element-wise", "eager loss"}
    assert eager_only <= set(ops["e"]) and not eager_only & set(ops["c"])
    assert ops["c"] == {name: s for name, s in ops["e"].items() if name not in eager_only}
    kinds = {op["name"]: op["kind"] for op in eager["operations"]}  # what bounds each, as the comparison reads it
    assert kinds["eager loss"] == kinds["eager element-wise"] == "memory" and kinds["mlp"] == "gemm"
    assert any("torchtitan priced compiled (torch.compile)" in note for note in compiled["notes"])
    assert any("torchtitan priced eager (its default; --torch-compile" in note for note in default["notes"])
    assert any("torchtitan priced eager (--no-torch-compile)" in note for note in eager["notes"])


@pytest.mark.parametrize("flag", ["--torch-compile", "--no-torch-compile"])
@pytest.mark.parametrize("framework", [[], ["--framework", "megatron"], ["--framework", "fsdp"]])
def test_a_framework_with_its_own_fused_kernels_refuses_either_flag(flag: str, framework: list[str]) -> None:
    args = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1", *framework, flag]
    result = runner.invoke(app, ["train", *args], env=ENV)
    assert result.exit_code == 2, result.output
    name = framework[1] if framework else "megatron"  # the GPUs' default
    words = f"torch_compile ({flag}): {name}'s profile prices its own fused kernels; torch.compile does not change it"
    assert words in result.stderr and "valid only with a PyTorch eager framework: torchtitan" in result.stderr
    assert "\n" not in result.stderr.strip()


def test_the_scenario_file_keeps_the_setting_and_replays_it(tmp_path: Path) -> None:
    compiled, default, megatron = tmp_path / "compiled.toml", tmp_path / "default.toml", tmp_path / "megatron.toml"
    first = _train(*QWEN3, "--torch-compile", "--save-scenario", str(compiled))
    eager = _train(*QWEN3, "--save-scenario", str(default))
    _train("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--save-scenario", str(megatron))
    assert tomllib.loads(compiled.read_text())["torch_compile"] is True
    assert tomllib.loads(default.read_text())["torch_compile"] is False  # the default, named
    assert "torch_compile" not in tomllib.loads(megatron.read_text())  # not a setting of megatron
    again = _train("--scenario", str(compiled))
    assert (again["step_s"], again["torch_compile"]) == (first["step_s"], True)
    assert _train("--scenario", str(default))["step_s"] == eager["step_s"]
    refused = runner.invoke(app, ["train", "--scenario", str(compiled), "--no-torch-compile"], env=ENV)
    assert refused.exit_code == 2 and "--no-torch-compile" in refused.stderr  # the file holds every input
    edited = tmp_path / "edited.toml"
    edited.write_text(compiled.read_text().replace('framework = "torchtitan"', 'framework = "megatron"'))
    refused = runner.invoke(app, ["train", "--scenario", str(edited)], env=ENV)
    assert refused.exit_code == 2 and "megatron's profile prices its own fused kernels" in refused.stderr


def test_plan_prices_torchtitan_compiled_and_refuses_a_framework_with_fused_kernels() -> None:
    args = ["plan", "llama3-8b", "--instances", "p5.48xlarge", "--nodes", "1", "--tokens", "1B", "--top", "1"]
    runs = {}
    for flag in ("--torch-compile", "--no-torch-compile"):
        result = runner.invoke(app, [*args, "--framework", "torchtitan", flag, "--json"], env=ENV)
        assert result.exit_code == 0, result.output
        runs[flag] = json.loads(result.stdout)
    compiled, eager = runs["--torch-compile"], runs["--no-torch-compile"]
    assert any("torchtitan priced compiled (torch.compile)" in note for note in compiled["notes"])
    assert any("torchtitan priced eager (--no-torch-compile)" in note for note in eager["notes"])
    assert compiled["top"][0]["step_s"] < eager["top"][0]["step_s"]
    refused = runner.invoke(app, [*args, "--framework", "torchtitan,megatron", "--torch-compile"], env=ENV)
    assert refused.exit_code == 2 and "megatron's profile prices its own fused kernels" in refused.stderr
