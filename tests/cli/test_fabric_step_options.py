"""``clustersim fabric step`` honours train's job options that shape the layout as ``train`` does (the same
flags, parsed by ``train._scenario_of_options``): --uneven-stages/--even-stages, --torch-compile/--no-torch-compile,
--ep-overlap, --offload-layers, --headroom, --beyond-context and the --software and --efficiency files; what train
refuses, it refuses in the same line."""

from __future__ import annotations

import json
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
FABRIC = ["--fabric-hosts", "64"]
# llama3-8b: 32 layers; at pp 3 the stages hold 11, 11 and 10 layers
PP3 = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "3", "--tp", "8", "--pp", "3", "--global-batch", "48"]
TITAN = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--framework", "torchtitan"]


def _run(command: str, *args: str) -> dict:
    extra = FABRIC if command == "fabric" else []
    result = runner.invoke(app, [*([command, "step"] if command == "fabric" else [command]), *args, *extra, "--json"],
                           env=ENV)  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _refused(command: str, *args: str) -> str:
    words = [*(["fabric", "step"] if command == "fabric" else [command]), *args, *(FABRIC * (command == "fabric"))]
    result = runner.invoke(app, words, env=ENV)
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip()
    return result.stderr.strip()


def test_uneven_stages_take_a_pipeline_degree_that_does_not_divide_the_layers() -> None:
    words = _refused("fabric", *PP3)
    assert "layers 32 must divide by pp*vp = 3 (or allow uneven stages" in words
    assert words == _refused("train", *PP3)
    step = _run("fabric", *PP3, "--uneven-stages")
    assert step["layout"] == _run("train", *PP3, "--uneven-stages")["layout"]
    assert step["layout"]["uneven_stages"] is True
    # the fullest stage paces the step: 48 micro-batches x 11 layers x 5 all-reduces (4, and 1 for SP) per layer
    per_step = {c["kind"]: c["per_step"] for c in step["collectives"]}
    assert per_step["tp"] == 48 * 11 * 5 and per_step["pp"] == 48 * 2


@pytest.mark.parametrize("flag", ["--uneven-stages", "--even-stages"])
def test_a_chosen_layout_follows_the_stages_flag_as_train_chooses_it(flag: str) -> None:
    job = ["llama3-70b", "--instance", "p5.48xlarge", "--nodes", "3", "--pp", "3", flag]
    if flag == "--even-stages":  # 80 layers over 3 stages: no even layout
        assert _refused("fabric", *job) == _refused("train", *job)
        return
    step = _run("fabric", *job)
    assert step["layout"] == _run("train", *job)["layout"] and step["layout"]["pp"] == 3
    assert step["layout"]["uneven_stages"] is True and step["layout_chosen"] is True


@pytest.mark.parametrize("flag", ["--torch-compile", "--no-torch-compile", None])
def test_torch_compile_is_carried_as_train_carries_it(flag: str | None) -> None:
    args = [*TITAN, *([flag] if flag else [])]
    step, train = _run("fabric", *args), _run("train", *args)
    assert step["torch_compile"] == train["torch_compile"] == (flag == "--torch-compile")
    assert step["layout"] == train["layout"]  # chosen with the same profile, compiled or eager
    text = runner.invoke(app, ["fabric", "step", *args, *FABRIC], env=ENV)
    said = "compiled (torch.compile)" if flag == "--torch-compile" else "eager ("
    assert text.exit_code == 0 and f"note: torchtitan priced {said}" in text.stdout


@pytest.mark.parametrize("flag", ["--torch-compile", "--no-torch-compile"])
def test_torch_compile_is_refused_for_a_profile_with_its_own_fused_kernels(flag: str) -> None:
    job = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1", flag]
    words = _refused("fabric", *job)
    assert words == _refused("train", *job)
    assert f"torch_compile ({flag}): megatron's profile prices its own fused kernels" in words


def test_ep_overlap_headroom_and_beyond_context_as_train() -> None:
    moe = ["mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1", "--ep", "2",
           "--zero", "3", "--recompute", "selective", "--seq", "4096"]  # fmt: skip
    assert _run("fabric", *moe, "--ep-overlap")["layout"]["ep_overlap"] is True
    given = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1"]
    assert "--headroom is the memory a chosen layout leaves free" in _refused("fabric", *given, "--headroom", "0.2")
    long = [*given, "--seq", "16384", "--global-batch", "16"]
    assert "beyond_context (--beyond-context)" in _refused("fabric", *long)
    assert _run("fabric", *long, "--beyond-context")["layout"] == _run("train", *long, "--beyond-context")["layout"]


def test_offload_layers_as_train() -> None:
    given = ["llama3-8b", "--instance", "p6e-gb200.36xlarge", "--nodes", "2", "--tp", "1", "--pp", "1", "--zero", "3",
             "--recompute", "none", "--global-batch", "16"]  # fmt: skip
    layout = _run("fabric", *given, "--offload-layers", "4")["layout"]
    assert layout["offload_layers"] == 4 and layout == _run("train", *given, "--offload-layers", "4")["layout"]
    assert "a search offloads the fewest layers" in _refused("fabric", "llama3-8b", "--offload-layers", "4")
    on_pipeline = [*given[:7], "--pp", "2", "--offload-layers", "4"]
    assert _refused("fabric", *on_pipeline) == _refused("train", *on_pipeline)


def test_software_and_efficiency_files_are_read_as_train_reads_them(tmp_path: Path) -> None:
    """Without fused attention (a --software file) llama3-8b's attention scores no longer fit at tp 1, and with a
    GEMM's fixed cost 10,000x the prior's (an --efficiency file) bigger micro-batches pay: each file moves the
    chosen layout on fabric step as on train, and the note says so; a missing file is refused in train's words."""
    unfused = tmp_path / "unfused.toml"
    unfused.write_text('[megatron]\nfused_attention = false\nsource = "a stack without flash attention"\n')
    slow = tmp_path / "slow.toml"
    slow.write_text('[hopper]\ngemm_half_flop = 1e13\nsource = "GEMMs with a large fixed cost"\n')
    job = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2"]
    plain = _run("fabric", *job)
    assert plain["layout"] == _run("train", *job)["layout"]
    assert (plain["layout"]["tp"], plain["layout"]["micro_batch"]) == (1, 1)
    moves = (
        ("--software", unfused, "tp", 8, "tp 8 pp 1 dp 2 mb 1 zero 1 sp recompute none"),
        ("--efficiency", slow, "micro_batch", 4, "tp 1 pp 1 dp 16 mb 4 zero 2 recompute full"),
    )
    for flag, path, field, value, described in moves:
        given = _run("fabric", *job, flag, str(path))
        assert given["layout"] == _run("train", *job, flag, str(path))["layout"] and given["layout"][field] == value
        text = runner.invoke(app, ["fabric", "step", *job, flag, str(path), *FABRIC], env=ENV)
        assert text.exit_code == 0, text.output
        assert f"note: layout chosen (fastest that fits): {described}" in text.stdout
    missing = [*job, "--software", str(tmp_path / "missing.toml")]
    refused = _refused("fabric", *missing)
    assert "missing.toml" in refused and refused == _refused("train", *missing)
