"""Software profiles: the framework as an input, separate from the hardware's efficiencies."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import DEFAULT_FRAMEWORK, software_for, software_profiles
from clustersim.errors import CatalogFileError, UnknownNameError
from clustersim.execution import Layout
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)


def test_the_packaged_profiles_cover_the_ground_truth_frameworks():
    profiles = software_profiles(use_env=False)
    assert {"megatron", "megatron-deepspeed", "deepspeed", "fsdp", "torchtitan", "neuronx"} <= set(profiles)
    assert DEFAULT_FRAMEWORK == "megatron"
    for name, profile in profiles.items():
        assert profile.name == name and profile.source and profile.description


def test_a_family_table_says_what_the_framework_did_on_that_hardware():
    hopper, ampere = software_for("megatron", "hopper"), software_for("megatron", "ampere")
    assert hopper.fused_attention and hopper.tp_overlap
    assert not ampere.fused_attention and not ampere.tp_overlap  # Megatron-LM 2021-22 on A100
    assert software_for("fsdp", "ampere").fused_attention  # llm-foundry's flash attention
    deepspeed = software_for("deepspeed", "ampere")
    assert deepspeed.zero3_collectives_per_layer == 2 and not deepspeed.zero3_hierarchical
    assert software_for(None, "hopper") == hopper


def test_an_unknown_framework_names_the_known_ones():
    with pytest.raises(UnknownNameError, match="unknown framework 'fdsp'; did you mean fsdp"):
        software_for("fdsp", "hopper")


def test_a_user_file_replaces_the_fields_it_gives(tmp_path, monkeypatch):
    ours = tmp_path / "ours.toml"
    ours.write_text(
        '[fsdp]\nkernel_efficiency = 0.5\nsource = "our trainer"\n\n'
        '[our-trainer]\nbased_on = "fsdp"\ndescription = "ours"\nlayer_overhead_s = 0.001\nsource = "measured"\n',
        encoding="utf-8",
    )
    profiles = software_profiles([ours], use_env=False)
    assert profiles["fsdp"].kernel_efficiency == 0.5 and profiles["fsdp"].fused_attention
    assert profiles["our-trainer"].layer_overhead_s == 0.001 and profiles["our-trainer"].kernel_efficiency == 0.5
    bad = tmp_path / "bad.toml"
    bad.write_text('[fsdp]\nkernel_efficiency = 1.5\nsource = "x"\n', encoding="utf-8")
    with pytest.raises(CatalogFileError, match="kernel_efficiency"):
        software_profiles([bad], use_env=False)


def test_the_software_changes_the_answer_the_way_it_should():
    model = load_model("llama3-8b", use_env=False)
    system = system_for_instance(CATALOG, "p4d.24xlarge", 1)
    job = TrainingJob(global_batch=16, seq_len=8192)
    layout = Layout(dp=8, zero=3)
    unfused = estimate_training(model, system, layout, job, software=software_for("megatron", "ampere"))
    fused = estimate_training(model, system, layout, job, software=software_for("fsdp", "ampere"))
    assert fused.memory.activations_bytes < unfused.memory.activations_bytes  # no score matrices
    assert fused.step_s < unfused.step_s
    assert (fused.framework, unfused.framework) == ("fsdp", "megatron")
    slower = software_for("fsdp", "ampere").model_copy(update={"kernel_efficiency": 0.5})
    half = estimate_training(model, system, layout, job, software=slower)
    forward = {t.name: t.exposed_s for t in half.terms}["forward"]
    assert forward > 1.5 * {t.name: t.exposed_s for t in fused.terms}["forward"]
