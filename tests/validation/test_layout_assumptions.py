"""Null means not stated: the validation reader resolves a case's null layout fields with its framework's
documented defaults (the same ``resolve_layout`` that ``train`` uses for the options not given), never
overrides a stated value, and reports per case what it assumed; ``train`` and ``validate`` agree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.compute.software import software_for
from clustersim.validation.run import validate_cases
from clustersim.validation.training import case_assumptions, case_setup, predict_training_case

CATALOG = load_catalog(use_env=False)
ENV = {
    "CLUSTERSIM_CATALOG": "",
    "CLUSTERSIM_MODELS": "",
    "CLUSTERSIM_EFFICIENCY": "",
    "CLUSTERSIM_SOFTWARE": "",
    "COLUMNS": "200",
}
MODEL = {
    "name": "llama-like-1b",
    "layers": 16,
    "hidden": 2048,
    "ffn_hidden": 8192,
    "heads": 32,
    "kv_heads": 8,
    "vocab": 128256,
    "seq_len": 4096,
    "ffn_type": "swiglu",
}
UNSTATED = {"micro_batch": None, "zero": None, "sequence_parallel": None, "recompute": None}


# Each framework on hardware it runs on (neuronx: Trainium; the others: GPUs), 16 devices.
TRAINIUM_SYSTEM = {"accelerator": "trainium1", "devices": 16, "devices_per_node": 16, "instance": "trn1.32xlarge"}
GPU_SYSTEM = {"accelerator": "h100-sxm", "devices": 16, "devices_per_node": 8, "instance": "p5.48xlarge"}


def _case(framework: str, **parallel: Any) -> dict[str, Any]:
    layout = {"tp": 2, "pp": 1, "dp": 8, "cp": 1, "ep": 1, "vp": 1, "global_batch": 64} | UNSTATED | parallel
    return {
        "id": f"t_{framework}",
        "kind": "training",
        "source": "test",
        "software": {"framework": framework, "version": "test"},
        "model": MODEL,
        "system": TRAINIUM_SYSTEM if framework == "neuronx" else GPU_SYSTEM,
        "parallel": layout,
        "precision": "bf16",
        "measured": {"step_time_s": 1.0},
    }


def test_the_same_nulls_resolve_to_each_frameworks_defaults():
    megatron, fsdp = case_setup(_case("megatron"), CATALOG), case_setup(_case("fsdp"), CATALOG)
    assert megatron.assumed == {"zero": 1, "sequence_parallel": True, "recompute": "none", "micro_batch": 1}
    assert fsdp.assumed == {"zero": 3, "sequence_parallel": False, "recompute": "none", "micro_batch": 1}
    assert (megatron.layout.zero, megatron.layout.sequence_parallel) == (1, True)
    assert (fsdp.layout.zero, fsdp.layout.sequence_parallel) == (3, False)
    hopper = software_for("megatron", "hopper").layout_defaults
    assert megatron.layout.zero == hopper.zero and "distributed optimizer" in hopper.source


def test_a_stated_value_is_never_overridden_and_not_reported_as_assumed():
    stated = {"micro_batch": 2, "zero": 0, "sequence_parallel": False, "recompute": "full", "vp": 1}
    for framework in ("megatron", "fsdp", "neuronx", "deepspeed"):
        setup = case_setup(_case(framework, **stated), CATALOG)
        assert setup.assumed == {}
        layout = setup.layout
        assert (layout.micro_batch, layout.zero, layout.sequence_parallel, layout.recompute.value) == (
            2,
            0,
            False,
            "full",
        )
    only_zero = case_assumptions(_case("fsdp", zero=2), CATALOG)
    assert "zero" not in only_zero and only_zero["micro_batch"] == 1


def test_without_tensor_parallelism_nothing_is_assumed_about_sequence_parallelism():
    setup = case_setup(_case("megatron", tp=1, dp=16), CATALOG)
    assert "sequence_parallel" not in setup.assumed and setup.layout.sequence_parallel is False


def test_unstated_interleaving_and_degrees_are_one_and_said_so():
    assumed = case_assumptions(_case("megatron", pp=2, dp=4, vp=None, cp=None, ep=None), CATALOG)
    assert {k: assumed[k] for k in ("vp", "cp", "ep")} == {"vp": 1, "cp": 1, "ep": 1}


def test_without_a_pipeline_there_is_no_interleaving_to_assume():
    setup = case_setup(_case("megatron", vp=None), CATALOG)
    assert "vp" not in setup.assumed and setup.layout.vp == 1


def test_validate_json_reports_what_each_case_assumed(tmp_path: Path):
    path = tmp_path / "cases.jsonl"
    stated = _case("megatron", micro_batch=1, zero=1, sequence_parallel=True, recompute="none") | {"id": "stated"}
    rows = [_case("megatron"), _case("fsdp"), stated]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    cases = validate_cases([path], CATALOG).to_json()["cases"]
    assumed = {case["id"]: case["assumed"] for case in cases}
    assert assumed["t_megatron"]["zero"] == 1 and assumed["t_fsdp"]["zero"] == 3
    assert assumed["t_fsdp"]["sequence_parallel"] is False
    assert assumed["stated"] == {}
    # A null stands for the framework's default: the case that states those defaults scores the same.
    predicted = {case["id"]: case["predicted"] for case in cases}
    assert predicted["stated"] == pytest.approx(predicted["t_megatron"], rel=1e-12)


def _train(model_file: Path, framework: str, *layout: str) -> dict[str, Any]:
    system = TRAINIUM_SYSTEM if framework == "neuronx" else GPU_SYSTEM
    nodes = "1" if framework == "neuronx" else "2"  # 16 devices, as the case
    args = ["train", str(model_file), "--instance", str(system["instance"]), "--nodes", nodes, "--tp", "2", "--pp", "1"]
    args += ["--global-batch", "64", "--framework", framework, *layout, "--json"]
    result = CliRunner().invoke(app, args, env=ENV)
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


@pytest.mark.parametrize("framework", ["megatron", "fsdp", "neuronx"])
def test_train_and_validate_give_the_same_estimate_for_the_same_job(tmp_path: Path, framework: str):
    model_file = tmp_path / "model.toml"
    lines = [f"[{MODEL['name']}]", 'source = "test"']
    lines += [f"{key} = {json.dumps(value)}" for key, value in MODEL.items() if key != "name"]
    model_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # The same job, fully stated, through both paths.
    full = {"micro_batch": 2, "zero": 1, "sequence_parallel": True, "recompute": "selective"}
    flags = ("--micro-batch", "2", "--zero", "1", "--sp", "--recompute", "selective")
    trained = _train(model_file, framework, *flags)
    validated = predict_training_case(_case(framework, **full), "step_time_s", CATALOG)
    assert trained["step_s"] == pytest.approx(validated, rel=1e-9)
    # Unstated in the case, not given to train: the same defaults, the same estimate.
    defaults = _train(model_file, framework)
    setup = case_setup(_case(framework), CATALOG)
    assert {k: defaults["layout"][k] for k in setup.assumed} == setup.assumed
    assert defaults["step_s"] == pytest.approx(
        predict_training_case(_case(framework), "step_time_s", CATALOG), rel=1e-9
    )
