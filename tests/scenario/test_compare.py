"""`train --compare` on several systems: each compared run equals the same job run on its own, each
ratio is the figures' ratio, the compute ratio splits exactly into work, peak and achieved fraction,
and what was adjusted to run a system is said."""

import json
import math

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.intervals import Spread
from clustersim.present.training import ranking, ranking_line
from clustersim.scenario.compare import compare_training
from clustersim.scenario.schema import LayoutSpec, SystemSpec, TrainingJobSpec
from clustersim.scenario.training import run_training, training_scenario

FOUR = ("p6-b200.48xlarge", "p6e-gb200.36xlarge", "trn2.48xlarge")


def _scenario(instance="p5en.48xlarge", nodes=4, layout=None):
    return training_scenario(
        model="llama3-8b",
        system=SystemSpec(instance=instance, nodes=nodes),
        layout=layout or LayoutSpec(tp=8, pp=1),
        job=TrainingJobSpec(global_batch=256, tokens=1e11, price="capacity_block"),
    )


@pytest.fixture(scope="module")
def comparison():
    return compare_training(_scenario(), FOUR)


def test_every_system_runs_the_same_devices_and_equals_its_own_run(comparison):
    names = [s.estimate.system for s in comparison.systems]
    assert names == ["4 x p5en.48xlarge", "4 x p6-b200.48xlarge", "8 x p6e-gb200.36xlarge", "2 x trn2.48xlarge"]
    assert {s.estimate.num_devices for s in comparison.systems} == {32}
    for system in comparison.systems[1:]:
        alone = run_training(_scenario(system.instance, system.nodes, LayoutSpec(tp=8, pp=1)))
        assert system.estimate.step_s == pytest.approx(alone.estimate.step_s, rel=1e-12)
        assert system.estimate.totals.cost_usd == pytest.approx(alone.estimate.totals.cost_usd, rel=1e-12)


def test_each_ratio_is_the_ratio_of_the_runs(comparison):
    rows = {row.key: row for row in comparison.rows}
    first = comparison.systems[0].estimate
    for system, ratio in zip(comparison.systems[1:], rows["step_s"].ratios[1:], strict=True):
        assert ratio == pytest.approx(system.estimate.step_s / first.step_s)
    for system, ratio in zip(comparison.systems[1:], rows["cost_usd"].ratios[1:], strict=True):
        assert ratio == pytest.approx(system.estimate.totals.cost_usd / first.totals.cost_usd)
    assert rows["cost_usd"].reasons[2].startswith(f"{rows['cost_usd'].ratios[2]:.2f}x: $42.33/h vs $54.92/h")


def test_a_scale_up_reason_quotes_the_bandwidth_the_collectives_are_priced_at(comparison):
    """A trn2.48xlarge's torus has 4 NeuronLinks of 128 GB/s per chip each way (the chip's 640 GB/s datasheet
    figure counts the UltraServer link, which a trn2.48xlarge does not have)."""
    reasons = [r for row in comparison.rows for r in row.reasons if "NeuronLink" in r]
    assert reasons and all("NeuronLink 512 GB/s vs NVLink 450 GB/s" in r for r in reasons)


def test_the_compute_ratio_is_work_over_peak_over_fraction(comparison):
    from clustersim.training.comparison import _split

    splits = [_split(comparison.model, s.estimate) for s in comparison.systems]
    rows = {row.key: row for row in comparison.rows}
    for split, ratio in zip(splits[1:], rows["compute_bound_s"].ratios[1:], strict=True):
        first = splits[0]
        factors = (split.work_per_device / first.work_per_device) * (first.peak / split.peak)
        assert ratio == pytest.approx(factors * first.fraction / split.fraction)
    # Blackwell's 2.25 PFLOPS vs Hopper's 989.4 TFLOPS names the peak as the reason
    assert "peak 2.25 PFLOPS vs 989.4 TFLOPS" in rows["compute_bound_s"].reasons[1]
    assert "HBM 7.7 TB/s vs 4.8 TB/s" in rows["memory_bound_s"].reasons[1]


def test_a_system_that_cannot_hold_the_devices_exactly_says_what_changed():
    comparison = compare_training(_scenario(nodes=1), ["trn2.48xlarge"])
    trn2 = comparison.systems[1]
    assert trn2.nodes == 1 and trn2.estimate.num_devices == 16
    assert trn2.adjustments == (
        "8 devices is not a whole number of 16-device trn2.48xlarge instances: 1 instance, 16 devices",
    )
    given = compare_training(_scenario(nodes=1), ["p5.48xlarge"], nodes=2)
    assert (
        given.systems[1].estimate.num_devices == 16 and "as given (--compare-nodes)" in given.systems[1].adjustments[0]
    )


def test_a_system_without_a_price_has_an_unknown_cost_and_says_why():
    comparison = compare_training(_scenario(), ["trn2u.48xlarge"])
    cost = next(row for row in comparison.rows if row.key == "cost_usd")
    assert cost.values[1] is None and cost.ratios[1] is None and cost.reasons[1].startswith("unknown")


def test_cli_takes_repeated_and_comma_separated_instances():
    runner = CliRunner()
    env = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "300"}
    base = ["train", "llama3-8b", "--instance", "p5en.48xlarge", "--nodes", "4", "--tp", "8", "--pp", "1"]
    base += ["--global-batch", "256", "--tokens", "100B", "--price", "capacity_block"]
    result = runner.invoke(
        app,
        [*base, "--compare", "p6-b200.48xlarge,p6e-gb200.36xlarge", "--compare", "trn2.48xlarge", "--json"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert [s["instance"] for s in payload["systems"]] == ["p5en.48xlarge", *FOUR]
    assert payload["second"]["system"] == "4 x p6-b200.48xlarge" and len(payload["compared"]) == 3
    rows = {row["figure"]: row for row in payload["rows"]}
    assert rows["step_s"]["ratios_to_first"]["2 x trn2.48xlarge"] == pytest.approx(
        payload["compared"][2]["step_s"] / payload["first"]["step_s"]
    )
    table = runner.invoke(app, [*base, "--compare", "p6e-gb200.36xlarge"], env=env)
    assert table.exit_code == 0 and "compute-bound work" in table.stdout and "ratios to the first" in table.stdout
    empty = runner.invoke(app, [*base, "--compare", "p6-b200.48xlarge,", "--json"], env=env)
    assert empty.exit_code == 2 and json.loads(empty.output)["field"] == "--compare"


def test_the_ranking_puts_the_fastest_first_and_for_a_safe_choice_the_lowest_upper_bound(comparison):
    steps = {s.estimate.system: s.estimate.step_s for s in comparison.systems}
    by_step = sorted(steps, key=steps.get)
    # The fastest gets a wide interval, every other a narrow one: the safest is the second fastest.
    wide, narrow = Spread(-2.0, 2.0, 0.8), Spread(-0.01, 0.01, 0.8)
    spreads = [wide if s.estimate.system == by_step[0] else narrow for s in comparison.systems]
    ranked = ranking(comparison, spreads)
    assert ranked["by_step"] == by_step and ranked["level"] == 0.8
    assert ranked["by_upper_bound"][0] == by_step[1]
    assert ranked["upper_bounds_s"][by_step[0]] == pytest.approx(steps[by_step[0]] * math.exp(2.0), rel=1e-12)
    assert f"safest at 80%: {by_step[1]}" in ranking_line(comparison, spreads)
    none = ranking(comparison, [None] * len(comparison.systems))
    assert none["by_upper_bound"] and "no intervals" in ranking_line(comparison, [None] * len(comparison.systems))
