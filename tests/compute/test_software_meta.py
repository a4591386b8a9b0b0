"""The ``meta`` profile: Meta's in-house 4D-parallel stack of the Llama 3 paper (arXiv 2407.21783, section
3.3.2), the ground-truth format's ``meta`` label, scored with its documented defaults instead of refused."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app
from clustersim.compute.software import resolve_layout, software_for, software_profiles
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.validation.cases import project_case_files, read_cases
from clustersim.validation.training import case_assumptions, predict_training_case
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
META = software_profiles(use_env=False)["meta"]
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}


def test_an_unstated_interleaving_is_the_papers_where_there_is_a_pipeline():
    fields, assumed = resolve_layout({"tp": 8, "pp": 16, "dp": 64}, META)
    assert (fields["vp"], assumed["vp"], fields["zero"], assumed["zero"]) == (2, 2, 2, 2)
    fields, assumed = resolve_layout({"tp": 8, "pp": 1, "dp": 64}, META)
    assert fields["vp"] == 1 and "vp" not in assumed
    fields, assumed = resolve_layout({"tp": 8, "pp": 16, "dp": 64, "vp": 4}, META)
    assert fields["vp"] == 4 and "vp" not in assumed
    assert resolve_layout({"tp": 8, "pp": 16, "dp": 64}, software_for("megatron", "hopper"))[0]["vp"] == 1


def test_its_fsdp_is_stage_2_only_and_another_stage_is_refused_naming_the_field():
    with pytest.raises(ClusterSimError, match="meta implements ZeRO stages 2, not 1") as refused:
        resolve_layout({"tp": 8, "pp": 16, "zero": 1}, META)
    assert (refused.value.field, refused.value.value) == ("zero", 1)


@pytest.mark.parametrize("family", ["ampere", "blackwell", "trainium"])
def test_it_runs_on_the_h100s_it_is_described_on_only(family):
    with pytest.raises(ClusterSimError, match=f"meta.*{family}"):
        software_for("meta", family)


def test_fp32_gradient_reduction_doubles_the_gradients_share_of_the_data_parallel_traffic():
    """ZeRO 2: a reduce-scatter of the gradients (4 bytes an element here, 2 in Megatron's BF16 recipes) and an
    all-gather of the 16-bit parameters, so 6 bytes an element against 4."""
    model = load_model("llama3-8b", use_env=False)
    system = system_for_instance(CATALOG, "p5.48xlarge", 8)
    layout = Layout(tp=8, dp=8, zero=2)
    job = TrainingJob(global_batch=64, seq_len=8192)
    links = [
        {t.name: t.link_s for t in estimate_training(model, system, layout, job, software=software).terms}["dp comm"]
        for software in (software_for("megatron", "hopper"), META)
    ]
    assert links[1] == pytest.approx(1.5 * links[0], rel=0.05)


def test_the_llama_3_paper_runs_are_predicted_within_ten_percent_out_of_sample():
    """Table 4 of the paper; no fit uses them (the profile's kernel constants are Megatron's, a prior)."""
    cases = [c for path in project_case_files() for c in read_cases(path) if c.id.startswith("llama3paper_")]
    assert len(cases) == 3
    for case in cases:
        measured = case.measured["model_tflops_per_device"]
        predicted = predict_training_case(case, "model_tflops_per_device", CATALOG)
        assert abs(predicted / measured - 1) < 0.10, (case.id, predicted, measured)
        assert case_assumptions(case, CATALOG)["vp"] == 2


def test_train_takes_the_frameworks_interleaving_unless_vp_is_given():
    base = ["train", "llama3-70b", "--framework", "meta", "--instance", "p5.48xlarge", "--nodes", "8"]
    layouts = []
    for extra in ([], ["--vp", "1"]):
        result = CliRunner().invoke(app, [*base, "--tp", "8", "--pp", "4", *extra, "--json"], env=ENV)
        assert result.exit_code == 0, result.output
        layouts.append(json.loads(result.stdout)["layout"])
    assert [(x["vp"], x["zero"]) for x in layouts] == [(2, 2), (1, 2)]
