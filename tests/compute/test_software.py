"""Software profiles: the framework as an input, separate from the hardware's efficiencies."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.choices import Recompute
from clustersim.compute.software import (
    DEFAULT_FRAMEWORK,
    default_framework,
    resolve_layout,
    software_for,
    software_profiles,
)
from clustersim.errors import CatalogFileError, ClusterSimError, UnknownNameError
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


def test_every_profile_says_how_it_lays_out_a_job_that_does_not_say():
    for name, profile in software_profiles(use_env=False).items():
        for family in ("ampere", "hopper", "blackwell", "trainium"):
            defaults = profile.on(family).layout_defaults
            assert defaults.source and 0 <= defaults.zero <= 3 and defaults.micro_batch >= 1, (name, family)
    assert software_for("fsdp", "hopper").layout_defaults.zero == 3  # FULL_SHARD
    assert software_for("torchtitan", "hopper").layout_defaults.zero == 3
    assert software_for("deepspeed", "ampere").layout_defaults.zero == 0  # zero_optimization.stage default
    assert software_for("megatron-deepspeed", "ampere").layout_defaults.zero == 0
    neuron = software_for("neuronx", "trainium").layout_defaults
    assert (neuron.zero, neuron.sequence_parallel, neuron.recompute) == (1, True, Recompute.SELECTIVE)
    # Megatron: NVIDIA's Megatron-Core / NeMo / Megatron-Bridge recipes; on A100 the Megatron-LM of 2021-22.
    hopper, ampere = software_for("megatron", "hopper").layout_defaults, software_for("megatron", "ampere")
    assert (hopper.zero, hopper.sequence_parallel, hopper.recompute) == (1, True, Recompute.NONE)
    assert (ampere.layout_defaults.zero, ampere.layout_defaults.sequence_parallel) == (0, False)
    assert "2021-22" in ampere.layout_defaults.source


def test_resolve_layout_fills_only_what_is_not_stated():
    fsdp = software_for("fsdp", "hopper")
    fields, assumed = resolve_layout({"tp": 1, "pp": 2, "dp": 4, "zero": None, "micro_batch": 4}, fsdp)
    assert fields["zero"] == 3 and fields["micro_batch"] == 4 and fields["sequence_parallel"] is False
    assert assumed == {"vp": 1, "cp": 1, "ep": 1, "zero": 3, "recompute": "none"}
    stated = {"tp": 8, "pp": 1, "vp": 2, "cp": 2, "ep": 1, "zero": 0, "sequence_parallel": False}
    fields, assumed = resolve_layout(stated | {"recompute": Recompute.FULL, "micro_batch": 1}, fsdp)
    assert assumed == {} and fields["zero"] == 0 and fields["sequence_parallel"] is False
    megatron = software_for("megatron", "hopper")
    assert resolve_layout({"tp": 4}, megatron)[1]["sequence_parallel"] is True
    assert "sequence_parallel" not in resolve_layout({"tp": 1}, megatron)[1]  # nothing to choose without TP


def test_megatron_runs_whole_experts_where_a_moe_layout_does_not_say():
    megatron = software_for("megatron", "hopper")
    fields, assumed = resolve_layout({"tp": 2, "pp": 8, "ep": 64}, megatron)
    assert fields["etp"] == 1 and assumed["etp"] == 1  # the recipes' expert_tensor_parallel_size=1, said so
    fields, assumed = resolve_layout({"tp": 2, "pp": 8, "ep": 64, "etp": 2}, megatron)
    assert fields["etp"] == 2 and "etp" not in assumed  # a stated degree is kept
    for unsplit in ({"tp": 4, "pp": 1}, {"tp": 4, "pp": 1, "ep": 1}, {"tp": 1, "pp": 1, "ep": 8}):  # nothing to split
        fields, assumed = resolve_layout(unsplit, megatron)
        assert fields.get("etp") is None and "etp" not in assumed
    for other in ("fsdp", "torchtitan", "megatron-deepspeed"):  # library defaults: tp's degree (derived)
        fields, assumed = resolve_layout({"tp": 2, "pp": 1, "ep": 8}, software_for(other, "hopper"))
        assert fields.get("etp") is None and "etp" not in assumed


def test_a_default_expert_tp_that_does_not_divide_tp_is_left_derived(tmp_path):
    ours = tmp_path / "ours.toml"
    ours.write_text('[ours]\nbased_on = "megatron"\ndescription = "x"\nsource = "x"\ndefault_etp = 4\n', "utf-8")
    profile = software_profiles([ours], use_env=False)["ours"].on("hopper")
    assert resolve_layout({"tp": 8, "pp": 1, "ep": 8}, profile)[0]["etp"] == 4
    assert resolve_layout({"tp": 2, "pp": 1, "ep": 8}, profile)[0].get("etp") is None
    bad = tmp_path / "bad.toml"
    bad.write_text('[megatron]\ndefault_etp = 0\nsource = "x"\n', encoding="utf-8")
    with pytest.raises(CatalogFileError, match="default_etp"):
        software_profiles([bad], use_env=False)


def test_a_user_file_can_change_a_frameworks_layout_defaults(tmp_path):
    ours = tmp_path / "ours.toml"
    ours.write_text(
        '[our-fsdp]\nbased_on = "fsdp"\ndescription = "ours"\nsource = "ours"\n'
        'default_zero = 2\nlayout_source = "our SHARD_GRAD_OP runs"\n',
        encoding="utf-8",
    )
    profile = software_profiles([ours], use_env=False)["our-fsdp"]
    assert profile.layout_defaults.zero == 2 and profile.layout_defaults.source == "our SHARD_GRAD_OP runs"
    bad = tmp_path / "bad.toml"
    bad.write_text('[fsdp]\ndefault_zero = 4\nsource = "x"\n', encoding="utf-8")
    with pytest.raises(CatalogFileError, match="default_zero"):
        software_profiles([bad], use_env=False)


# --- which hardware each framework runs on -------------------------------------------------------------


def test_each_profile_names_the_accelerator_families_it_runs_on_with_a_source():
    families = {CATALOG.accelerator(chip).family for chip in CATALOG.ids("accelerator")}
    for name, profile in software_profiles(use_env=False).items():
        assert profile.accelerator_families and profile.families_source, name
        assert set(profile.default_on) <= set(profile.accelerator_families), name
        assert set(profile.accelerator_families) <= families, name


@pytest.mark.parametrize(
    ("framework", "family"),
    [("neuronx", "hopper"), ("neuronx", "ampere"), ("fsdp", "trainium"), ("megatron", "trainium"),
     ("deepspeed", "trainium"), ("torchtitan", "trainium"), ("megatron-deepspeed", "trainium")],
)  # fmt: skip
def test_a_framework_on_hardware_it_cannot_run_on_is_refused_naming_both_and_what_fits(framework, family):
    with pytest.raises(ClusterSimError) as caught:
        software_for(framework, family, accelerator="chip-x")
    message = str(caught.value)
    assert f"framework {framework!r} does not run on chip-x ({family})" in message
    fits = "neuronx" if family == "trainium" else "megatron"
    assert f"frameworks for {family}: " in message and fits in message
    assert caught.value.field == "framework" and "\n" not in message


@pytest.mark.parametrize(("family", "expected"), [("trainium", "neuronx"), ("hopper", "megatron"),
                                                  ("ampere", "megatron"), ("blackwell", "megatron")])  # fmt: skip
def test_the_default_framework_follows_the_accelerator_family(family, expected):
    assert default_framework(family) == expected
    assert software_for(None, family).name == expected


def test_a_family_no_profile_runs_on_has_no_default_and_says_how_to_add_one():
    with pytest.raises(ClusterSimError, match=r"no default framework for 'rubin' accelerators .*none profiled"):
        software_for(None, "rubin")


def test_a_user_profile_may_not_default_on_a_family_it_does_not_run_on(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('[ours]\nbased_on = "fsdp"\ndefault_on = ["trainium"]\n', encoding="utf-8")
    with pytest.raises(CatalogFileError, match="default_on"):
        software_profiles([bad], use_env=False)


def test_train_without_framework_on_trainium_runs_neuronx_and_refuses_gpu_frameworks(tmp_path):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    runner = CliRunner(env={"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_SOFTWARE": ""})
    base = ["train", "llama3-8b", "--instance", "trn1.32xlarge", "--nodes", "2", "--json"]
    result = runner.invoke(app, base)
    assert result.exit_code == 0, result.output
    assert '"framework": "neuronx"' in result.output
    for framework in ("fsdp", "megatron"):
        refused = runner.invoke(app, [*base, "--framework", framework])
        assert refused.exit_code == 2 and "does not run on trainium1 (trainium)" in refused.output
    gpu = runner.invoke(app, ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--framework",
                              "neuronx"])  # fmt: skip
    assert gpu.exit_code == 2 and "framework 'neuronx' does not run on h100-sxm (hopper)" in gpu.output
