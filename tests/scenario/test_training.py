"""Running a training scenario: the scenario as run (layout and sequence length filled in) replays the
same estimate; the user's files from the environment are captured, and a run reads no environment."""

from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.scenario.files import load_scenario, save_scenario
from clustersim.scenario.schema import LayoutSpec, SystemSpec, TrainingJobSpec, TrainingScenario
from clustersim.scenario.training import run_training, training_scenario


def scenario(**changes) -> TrainingScenario:
    base = TrainingScenario(
        model="llama3-8b",
        system=SystemSpec(instance="p5.48xlarge", nodes=2),
        layout=LayoutSpec(tp=8),
        job=TrainingJobSpec(global_batch=256, tokens=1e12),
    )
    return base.model_copy(update=changes)


def test_the_scenario_as_run_fills_in_dp_sp_and_the_sequence_length():
    run = run_training(scenario())
    layout = run.scenario.layout
    assert isinstance(layout, LayoutSpec)
    assert (layout.tp, layout.dp, layout.sequence_parallel) == (8, 2, True)
    assert run.scenario.job.seq_len == run.model.seq_len == 8192
    assert not run.layout_chosen and run.estimate.notes == ()


def test_a_chosen_layout_is_filled_in_and_replays_the_same_step(tmp_path):
    run = run_training(scenario(layout="choose"))
    assert run.layout_chosen and isinstance(run.scenario.layout, LayoutSpec)
    replay = run_training(load_scenario(save_scenario(tmp_path / "job.toml", run.scenario)))
    assert replay.estimate.layout == run.estimate.layout
    assert replay.estimate.step_s == run.estimate.step_s
    assert replay.scenario == run.scenario


def test_a_saved_run_replays_to_the_same_estimate(tmp_path):
    run = run_training(scenario())
    replay = run_training(load_scenario(save_scenario(tmp_path / "job.toml", run.scenario)))
    assert replay.estimate.to_json() == run.estimate.to_json()


def test_dp_that_does_not_fill_the_devices_is_refused():
    with pytest.raises(ClusterSimError, match="does not divide the 16 devices"):
        run_training(scenario(layout=LayoutSpec(tp=3)))
    with pytest.raises(ClusterSimError):
        run_training(scenario(layout=LayoutSpec(tp=8, dp=4)))


def test_compare_runs_the_same_degrees_with_dp_filling_the_other_system():
    run = run_training(scenario(), compare=SystemSpec(instance="p5e.48xlarge", nodes=4))
    assert run.compared is not None
    assert run.compared.layout.tp == 8 and run.compared.layout.dp == 4


def test_the_environment_files_are_captured_and_not_read_again(tmp_path, monkeypatch):
    catalog = tmp_path / "hw"
    catalog.mkdir()
    (catalog / "mine.toml").write_text(
        '[[instance]]\nid = "p5.48xlarge"\nbased_on = "p5.48xlarge"\n'
        'on_demand = { usd_per_hour = 1.0, as_of = 2026-11-01, region = "us-east-1", source = "our contract" }\n'
    )
    monkeypatch.setenv("CLUSTERSIM_CATALOG", str(catalog))
    monkeypatch.setenv("CLUSTERSIM_MODELS", "")
    monkeypatch.setenv("CLUSTERSIM_EFFICIENCY", "")
    given = training_scenario(
        model="llama3-8b",
        system=SystemSpec(instance="p5.48xlarge", nodes=2),
        layout=LayoutSpec(tp=8),
        job=TrainingJobSpec(tokens=1e12),
        catalog=[Path("relative-dir")],
    )
    assert given.options.catalog == (catalog.resolve(), Path("relative-dir").resolve())
    cheap = run_training(given.model_copy(update={"options": given.options.model_copy(update={"catalog": (catalog,)})}))
    monkeypatch.setenv("CLUSTERSIM_CATALOG", "/no/such/dir")  # a replay reads no environment variable
    again = run_training(cheap.scenario)
    assert again.estimate.totals is not None and again.estimate.totals.price_usd_per_hour == 1.0


def test_a_constrained_choice_holds_its_values_and_round_trips(tmp_path):
    from clustersim.choices import Recompute
    from clustersim.scenario.schema import LayoutSearchSpec

    wanted = LayoutSearchSpec(choose=True, zero=0, recompute=Recompute.FULL, sequence_parallel=False, tp=4)
    run = run_training(scenario(layout=wanted))
    layout = run.estimate.layout
    assert run.layout_chosen and (layout.zero, layout.recompute, layout.sequence_parallel, layout.tp) == (
        0,
        Recompute.FULL,
        False,
        4,
    )
    assert load_scenario(save_scenario(tmp_path / "job.toml", scenario(layout=wanted))).layout == wanted


def test_a_given_layout_that_does_not_fit_is_refused():
    big = scenario(model="llama3.1-405b", system=SystemSpec(instance="p5.48xlarge", nodes=1))
    with pytest.raises(ClusterSimError, match=r"does not fit on 1 x p5\.48xlarge: it needs .* GiB per device"):
        run_training(big.model_copy(update={"layout": LayoutSpec(tp=8, zero=0)}))


def test_compare_carries_the_ranks_per_chip_or_says_why_not():
    trn1 = scenario(
        model="llama2-7b",
        system=SystemSpec(instance="trn1.32xlarge", nodes=2, devices_per_node=32),
        layout=LayoutSpec(tp=8),
        job=TrainingJobSpec(global_batch=64, tokens=1e10),
    )
    run = run_training(trn1, compare=SystemSpec(instance="trn1n.32xlarge", nodes=2))
    assert run.compared is not None and run.compared.num_devices == run.estimate.num_devices == 64
    with pytest.raises(ClusterSimError, match="2 ranks per chip"):
        run_training(trn1, compare=SystemSpec(instance="p5.48xlarge", nodes=2))
