"""Scenario files: a save/load round trip, atomic saves, and errors naming file, field, value and rule."""

import os
import tomllib
from pathlib import Path

import pytest

from clustersim.choices import Recompute
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.scenario.files import ScenarioFileError, load_scenario, save_scenario
from clustersim.scenario.schema import (
    LayoutSpec,
    LoadSpec,
    RequestSpec,
    ServingScenario,
    ServingSystemSpec,
    SystemSpec,
    TrainingJobSpec,
    TrainingOptions,
    TrainingScenario,
)


def training(tmp_path: Path) -> TrainingScenario:
    return TrainingScenario(
        model="llama3-70b",
        system=SystemSpec(instance="p5.48xlarge", nodes=8),
        layout=LayoutSpec(tp=8, pp=2, dp=4, zero=1, sequence_parallel=True, recompute=Recompute.FULL),
        job=TrainingJobSpec(global_batch=512, seq_len=4096, tokens=2e12, price="capacity_block"),
        options=TrainingOptions(catalog=(tmp_path / "catalog",), efficiency=(tmp_path / "fast.toml",)),
    )


def serving() -> ServingScenario:
    return ServingScenario(
        model="llama2-70b",
        system=ServingSystemSpec(instance="p5.48xlarge", tp=8),
        request=RequestSpec(input_tokens=512, output_tokens=256, precision="fp8", kv_cache="fp8"),
        load=LoadSpec(rate_per_s=2.0),
    )


@pytest.mark.parametrize("make", [training, lambda _: serving()])
def test_save_then_load_gives_the_same_scenario(tmp_path, make):
    scenario = make(tmp_path)
    path = save_scenario(tmp_path / "job.toml", scenario, header="a note\nand another")
    assert load_scenario(path) == scenario
    text = path.read_text()
    assert text.startswith("# a note\n# and another\n")
    assert tomllib.loads(text)["kind"] == scenario.kind


def test_a_chosen_layout_is_written_as_choose(tmp_path):
    scenario = TrainingScenario(model="llama3-8b", system=SystemSpec(instance="p5.48xlarge", nodes=1))
    path = save_scenario(tmp_path / "job.toml", scenario)
    assert tomllib.loads(path.read_text())["layout"] == "choose"
    assert load_scenario(path) == scenario


def test_the_layout_record_covers_every_layout_field():
    assert set(LayoutSpec.model_fields) == set(Layout.model_fields)


def test_tokens_may_be_written_with_a_suffix(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(
        'kind = "training"\nmodel = "llama3-8b"\n[system]\ninstance = "p5.48xlarge"\nnodes = 2\n[job]\ntokens = "15T"\n'
    )
    loaded = load_scenario(path)
    assert isinstance(loaded, TrainingScenario) and loaded.job.tokens == 15e12


def test_relative_paths_are_taken_from_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    path = tmp_path / "sub" / "job.toml"
    path.write_text(
        'kind = "training"\nmodel = "models/mine.toml"\n[system]\ninstance = "p5.48xlarge"\nnodes = 2\n'
        '[options]\ncatalog = ["hw"]\nefficiency = ["/abs/eff.toml"]\n'
    )
    loaded = load_scenario(path)
    assert loaded.model == str(tmp_path / "sub" / "models" / "mine.toml")
    assert loaded.options.catalog == (tmp_path / "sub" / "hw",)
    assert loaded.options.efficiency == (Path("/abs/eff.toml"),)


def test_a_save_replaces_the_file_whole_and_leaves_no_temporary(tmp_path):
    path = tmp_path / "job.toml"
    path.write_text("old\n")
    os.chmod(path, 0o640)
    save_scenario(path, serving())
    assert load_scenario(path) == serving()
    assert os.stat(path).st_mode & 0o777 == 0o640  # the replaced file's permissions are kept
    assert [p.name for p in tmp_path.iterdir()] == ["job.toml"]


def test_a_failed_save_keeps_the_old_file_and_leaves_no_temporary(tmp_path, monkeypatch):
    path = tmp_path / "job.toml"
    path.write_text("old\n")

    def fail(*_args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(ScenarioFileError, match="No space left on device"):
        save_scenario(path, serving())
    assert path.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["job.toml"]


def test_saving_into_a_missing_directory_is_a_clear_error(tmp_path):
    with pytest.raises(ClusterSimError, match="cannot write the file"):
        save_scenario(tmp_path / "no" / "job.toml", serving())


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ('kind = "training\n', ["not valid TOML"]),
        ('model = "x"\n', ["field 'kind'", "missing", "'training', 'serving'"]),
        ('kind = "trainng"\nmodel = "x"\n', ["field 'kind'", "'trainng'", "'training', 'serving'"]),
        (
            'kind = "training"\nmodel = "x"\n[system]\ninstance = "p5"\nnodes = 0\n',
            ["field 'system.nodes'", "value 0", "greater than or equal to 1"],
        ),
        (
            'kind = "training"\nmodel = "x"\n[system]\ninstance = "p5"\nnodes = 1\n[job]\nglobal_bath = 3\n',
            ["field 'job.global_bath'", "did you mean global_batch", "valid: global_batch"],
        ),
        (
            'kind = "training"\nmodel = "x"\n[system]\ninstance = "p5"\nnodes = 1\n[job]\nprecision = "int8"\n',
            ["field 'job.precision'", "'int8'", "not a training precision"],
        ),
        (
            'kind = "training"\nmodel = "x"\n[system]\ninstance = "p5"\nnodes = 1\n[layout]\ntp = 0\n',
            ["field 'layout.tp'", "value 0", "greater than or equal to 1"],
        ),
        (
            'kind = "training"\nmodel = "x"\nlayout = "chose"\n[system]\ninstance = "p5"\nnodes = 1\n',
            ["field 'layout'", "'chose'", "should be a table of fields", "should be 'choose'"],
        ),
        ('kind = "training"\nmodel = "x"\n', ["field 'system'", "missing"]),
        (
            'kind = "serving"\nmodel = "x"\n[system]\ninstance = "p5"\n[load]\nrate_per_s = 1.0\ntpot_target_s = 0.1\n',
            ["field 'load'", "either a rate or latency targets"],
        ),
    ],
)
def test_a_malformed_file_names_the_file_field_value_and_rule(tmp_path, text, parts):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ClusterSimError) as caught:
        load_scenario(path)
    message = str(caught.value)
    assert "bad.toml" in message
    for part in parts:
        assert part in message, message


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(ClusterSimError, match="no such scenario file"):
        load_scenario(tmp_path / "nope.toml")
