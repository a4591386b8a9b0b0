"""The model's own limits at the API and on the command line: a training sequence or a served prompt +
output beyond the model's context is refused (one line naming the option, the value and the context)
unless asked for, and then the estimate says so; a quantized checkpoint is served at its stored width
and refused for training; a checkpoint larger than the nodes' memory is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.cli.app import app
from clustersim.errors import ClusterSimError
from clustersim.scenario.schema import LayoutSpec, SystemSpec, TrainingJobSpec, TrainingScenario
from clustersim.scenario.training import run_training
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs import GPTQ_4BIT, LLAMA3_8B

runner = CliRunner()


def _training(seq_len: int, beyond: bool = False, model: str = "llama3-8b") -> TrainingScenario:
    return TrainingScenario(
        model=model,
        system=SystemSpec(instance="p5.48xlarge", nodes=2),
        layout=LayoutSpec(tp=8, cp=2),
        job=TrainingJobSpec(global_batch=64, seq_len=seq_len, beyond_context=beyond),
    )


def _gptq(tmp_path: Path) -> Path:
    path = tmp_path / "llama3-8b-gptq" / "config.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**LLAMA3_8B, "_name_or_path": "llama3-8b-gptq", "quantization_config": GPTQ_4BIT}))
    return path


# ---- training ----------------------------------------------------------------------------------------------
def test_training_beyond_the_context_is_refused_at_the_api() -> None:
    with pytest.raises(ClusterSimError, match=r"^seq_len \(--seq\) is 32,768 tokens, beyond the context of llama3-8b"):
        run_training(_training(32768))


def test_training_beyond_the_context_when_asked_says_so() -> None:
    run = run_training(_training(32768, beyond=True))
    assert run.estimate.notes[0].startswith("beyond context: seq_len (--seq) is 32,768 tokens")
    assert run.scenario.job.beyond_context  # a saved scenario replays it


def test_training_within_the_context_has_no_note() -> None:
    assert not any("beyond" in note for note in run_training(_training(8192)).estimate.notes)


def test_the_cli_refuses_seq_beyond_the_context_in_one_line() -> None:
    result = runner.invoke(app, ["train", "llama3-8b", "--nodes", "2", "--seq", "1000000", "--global-batch", "64"])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--seq" in lines[0] and "1,000,000" in lines[0] and "8,192 tokens" in lines[0]
    assert "--beyond-context" in lines[0]


def test_the_cli_prices_it_when_asked_and_says_so_in_json() -> None:
    args = ["train", "llama3-8b", "--nodes", "2", "--seq", "16384", "--global-batch", "64", "--beyond-context"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    assert any(note.startswith("beyond context:") for note in json.loads(result.stdout)["notes"])
    text = runner.invoke(app, args)
    assert text.exit_code == 0 and "beyond context: seq_len (--seq) is 16,384 tokens" in text.stdout


def test_training_a_quantized_checkpoint_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match=r"4-bit gptq, groups of 128 checkpoint; training is priced for 16-bit"):
        run_training(_training(8192, model=str(_gptq(tmp_path))))


# ---- serving ----------------------------------------------------------------------------------------------
def _serve(model_spec: str, request: Request):  # type: ignore[no-untyped-def]
    catalog = load_catalog(use_env=False)
    system = serving_system_for_instance(catalog, "p5.48xlarge", tp=1)
    return estimate_offline(load_model(model_spec, use_env=False), system, request)


def test_serving_beyond_the_context_is_refused_at_the_api() -> None:
    with pytest.raises(ClusterSimError, match=r"^input_tokens \+ output_tokens .* 200,000 \+ 128, is 200,128 tokens"):
        _serve("llama3-8b", Request(input_tokens=200_000, output_tokens=128))


def test_serving_beyond_the_context_when_asked_says_so() -> None:
    estimate = _serve("llama3-8b", Request(input_tokens=16_000, output_tokens=128, beyond_context=True))
    assert estimate.notes and estimate.notes[0].startswith("beyond context:")
    assert _serve("llama3.1-8b", Request(input_tokens=16_000, output_tokens=128)).notes == ()


def test_a_gptq_checkpoint_is_served_at_4_bits(tmp_path: Path) -> None:
    bf16_path = tmp_path / "bf16.json"
    bf16_path.write_text(json.dumps(LLAMA3_8B))
    request = Request(input_tokens=2048, output_tokens=128, precision=Dtype.BF16)
    before, after = _serve(str(bf16_path), request), _serve(str(_gptq(tmp_path)), request)
    assert after.weights_bytes_per_device < 0.4 * before.weights_bytes_per_device
    assert after.gemm_memory_s < 0.5 * before.gemm_memory_s  # the decode reads the 4-bit weights
    assert any("4-bit gptq" in note for note in after.notes)


def test_the_cli_serves_a_gptq_config_at_its_width(tmp_path: Path) -> None:
    result = runner.invoke(app, ["serve", str(_gptq(tmp_path)), "--tp", "1", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["weights_bytes_per_device"] < 6 * 2**30  # 5.3 GiB, not the 15.0 GiB of bf16
    assert any("4-bit gptq" in note for note in data["notes"])


def test_the_cli_refuses_a_prompt_beyond_the_context() -> None:
    result = runner.invoke(app, ["serve", "llama3-8b", "--input", "200000"])
    assert result.exit_code == 2
    assert "200,000 + 128, is 200,128 tokens, beyond the context of llama3-8b, 8,192 tokens" in result.stderr


# ---- checkpoints ------------------------------------------------------------------------------------------
def test_the_cli_refuses_a_405b_checkpoint_from_one_node() -> None:
    result = runner.invoke(app, ["storage", "checkpoint", "llama3.1-405b", "--nodes", "1"])
    assert result.exit_code == 2
    assert "1 x p5.48xlarge hold 2.62 TiB" in result.stderr and "5.17 TiB megatron checkpoint" in result.stderr


def test_the_cli_serves_beyond_the_context_when_asked_and_says_so() -> None:
    result = runner.invoke(app, ["serve", "llama3-8b", "--input", "16000", "--beyond-context", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["notes"][0].startswith("beyond context: input_tokens + output_tokens")


def test_a_dataset_whose_longest_request_is_beyond_the_context_is_refused() -> None:
    # mlperf_llama3_405b: prompts up to 19,988 tokens and outputs up to 1,830, beyond Llama 3's 8,192
    result = runner.invoke(app, ["serve", "llama3-8b", "--dataset", "mlperf_llama3_405b"])
    assert result.exit_code == 2
    assert "dataset (--dataset) mlperf_llama3_405b's longest request, 19,988 + 1,830, is 21,818 tokens" in result.stderr
    assert runner.invoke(app, ["serve", "llama3.1-8b", "--dataset", "mlperf_llama3_405b"]).exit_code == 0


def test_models_shows_each_context() -> None:
    result = runner.invoke(app, ["models", "llama3.1-8b", "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.stdout)
    row = row[0] if isinstance(row, list) else row
    assert (row["seq_len"], row["context_tokens"], row["max_context_tokens"]) == (8192, 131072, 131072)


def test_a_generator_is_checked_at_its_lengths() -> None:
    # vLLM's random generator (range ratio 0) draws every request at --input/--output
    assert (
        runner.invoke(
            app, ["serve", "llama3-8b", "--dataset", "random", "--input", "8000", "--output", "100"]
        ).exit_code
        == 0
    )
    result = runner.invoke(app, ["serve", "llama3-8b", "--dataset", "random", "--input", "8100", "--output", "100"])
    assert result.exit_code == 2 and "random's longest request, 8,100 + 100, is 8,200 tokens" in result.stderr


def test_a_json_refusal_names_the_field() -> None:
    result = runner.invoke(app, ["serve", "llama3-8b", "--input", "8192", "--json"])
    assert result.exit_code == 2 and json.loads(result.stderr.strip() or result.stdout)["field"] == "input_tokens"
    result = runner.invoke(app, ["train", "llama3-8b", "--seq", "9000", "--json"])
    assert result.exit_code == 2 and json.loads(result.stderr.strip() or result.stdout)["field"] == "seq_len"
