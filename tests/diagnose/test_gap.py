"""``clustersim.diagnose``: a step made slower by one known parameter is explained by that parameter, at the
factor it was moved by (the estimate re-run, not a guess), and each lever's sensitivity is the step's slope."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.compute.efficiency import efficiency_for, efficiency_table
from clustersim.compute.software import software_for, software_profiles
from clustersim.diagnose import Bounds, StepInputs, explain_step
from clustersim.diagnose.levers import levers_for, scaled_bandwidth
from clustersim.diagnose.solve import factor_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout
from clustersim.intervals import spread_for
from clustersim.intervals.layout import layout_features
from clustersim.network.analytic import collective_calibration
from clustersim.network.cost import AnalyticCost
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload import zoo

BOUNDS = Bounds(network_efficiency=(0.3, 1.0), step_s=(1e-3, 0.3), source="the fits' bounds")
LEVEL = 0.8


def _inputs(model: str, nodes: int, layout: Layout, global_batch: int) -> StepInputs:
    system = system_for_instance(load_catalog((), use_env=False), "p5.48xlarge", nodes)
    transformer = zoo.load_model(model, use_env=False)
    return StepInputs(
        model=transformer,
        system=system,
        layout=layout,
        job=TrainingJob(global_batch=global_batch, seq_len=transformer.seq_len),
        efficiency=efficiency_for(system.accelerator, efficiency_table((), use_env=False)),
        software=software_for(None, system.accelerator.family, software_profiles((), use_env=False)),
        calibration=collective_calibration((), use_env=False),
    )


# DP exposed: llama3-8b, TP inside each p5, 16 data-parallel replicas, ZeRO-1 (train's --calibration case).
DP_HEAVY = _inputs("llama3-8b", 16, Layout(tp=8, dp=16, zero=1, sequence_parallel=True), 128)
# Compute-bound: no TP, the gradient reduce-scatter hidden behind a long backward pass with slack.
COMPUTE_BOUND = _inputs("llama3-8b", 16, Layout(tp=1, dp=128, zero=2), 128)
# A pipeline: TP, PP and DP collectives, the bubble holding a share of the per-micro-batch ones.
PIPELINE = _inputs("llama3-70b", 16, Layout(tp=8, pp=4, dp=4, zero=1, sequence_parallel=True), 64)


def _step(inputs: StepInputs) -> float:
    return sum(inputs.terms_s().values())


def test_the_prediction_is_the_estimators_own() -> None:
    for inputs in (DP_HEAVY, COMPUTE_BOUND, PIPELINE):
        estimate = estimate_training(
            inputs.model, inputs.system, inputs.layout, inputs.job, efficiency=inputs.efficiency,
            software=inputs.software, cost=AnalyticCost(inputs.calibration),
        )  # fmt: skip
        assert _step(inputs) == pytest.approx(estimate.step_s, rel=1e-12)


def test_a_slower_network_is_explained_by_data_parallel_communication_at_the_factor_it_was_slowed_by() -> None:
    slow = replace(DP_HEAVY.calibration, network_efficiency=0.4)
    measured = _step(replace(DP_HEAVY, calibration=slow))
    explained = explain_step(DP_HEAVY, measured, bounds=BOUNDS, level=LEVEL)
    top = explained.candidates[0]
    assert top.lever == "dp comm" and top.plausible is True
    assert top.factor_needed == pytest.approx(0.4 / DP_HEAVY.calibration.network_efficiency, rel=1e-6)
    by_lever = {c.lever: c for c in explained.candidates}
    gemm = by_lever["gemm"]  # the GEMMs alone would have to run 13% slower
    assert gemm.factor_needed is not None and gemm.factor_needed < 0.9
    assert explained.gap > 0.05 and "DP exposed communication" in explained.summary()


def test_a_slower_gemm_is_explained_by_compute_at_the_factor_it_was_slowed_by() -> None:
    eff = COMPUTE_BOUND.efficiency
    slower = eff.model_copy(update={"gemm_max": eff.gemm_max * 0.92, "attention": eff.attention / 0.92})
    measured = _step(replace(COMPUTE_BOUND, efficiency=slower))
    explained = explain_step(COMPUTE_BOUND, measured, bounds=BOUNDS, level=LEVEL)
    top = explained.candidates[0]
    assert top.lever == "gemm" and top.plausible is True
    assert top.factor_needed == pytest.approx(0.92, rel=1e-6)
    dp = next(c for c in explained.candidates if c.lever == "dp comm")  # hidden, but a slower network exposes it
    assert dp.plausible is False and dp.factor_needed is not None and dp.factor_needed < 0.3


def test_a_measurement_inside_the_interval_is_put_down_to_the_models_own_uncertainty() -> None:
    predicted = _step(DP_HEAVY)
    explained = explain_step(DP_HEAVY, predicted * 1.01, bounds=BOUNDS, level=LEVEL)
    assert explained.within_interval is True
    assert explained.interval is not None and explained.interval[0] < predicted < explained.interval[1]
    assert "the model's own uncertainty explains it" in explained.summary()
    assert explained.to_json()["within_interval"] is True


def test_the_interval_is_the_one_train_gives_the_same_layout() -> None:
    """explain sizes the step's interval as train does: widened by the layout's features (a pipeline; a sequence of
    32K tokens, ``long_sequence``), so the two never disagree on whether a measurement is plausible."""
    long = replace(PIPELINE, job=TrainingJob(global_batch=16, seq_len=32768))
    for inputs in (PIPELINE, long):
        features = layout_features(
            pp=inputs.layout.pp, cp=inputs.layout.cp, ep=inputs.layout.ep, zero=inputs.layout.zero,
            precision=inputs.job.precision.value, seq_len=inputs.job.seq_len,
        )  # fmt: skip
        spread = spread_for(
            "training", accelerator="h100-sxm", family="hopper", framework="megatron", devices=128, level=LEVEL,
            layout=features,
        )  # fmt: skip
        assert spread is not None
        predicted = _step(inputs)
        explained = explain_step(inputs, predicted, bounds=BOUNDS, level=LEVEL)
        assert explained.interval is not None and explained.interval_basis == spread.basis
        assert explained.interval[1] == pytest.approx(predicted * math.exp(spread.q_hi))
    assert "long_sequence" in explain_step(long, _step(long), bounds=BOUNDS, level=LEVEL).interval_basis


def test_a_faster_run_names_the_terms_that_may_be_over_priced_and_the_limits_of_each() -> None:
    predicted = _step(DP_HEAVY)
    explained = explain_step(DP_HEAVY, predicted * 0.93, bounds=BOUNDS, level=LEVEL)
    assert explained.gap < 0 and "faster" in explained.summary()
    by_lever = {c.lever: c for c in explained.candidates}
    assert by_lever["gemm"].factor_needed is not None and by_lever["gemm"].factor_needed > 1
    # the network is at 0.97 of line rate: DP's exposed 0.04 s cannot give back 7% of the step
    assert by_lever["dp comm"].factor_needed is None and by_lever["dp comm"].plausible is False
    assert by_lever["data loading"].plausible is False  # an unmodelled wait cannot be negative


def test_each_sensitivity_is_the_steps_slope_in_its_parameter() -> None:
    explained = explain_step(DP_HEAVY, _step(DP_HEAVY) * 1.2, bounds=BOUNDS, level=LEVEL)
    by_lever = {c.lever: c for c in explained.candidates}
    # the optimizer's fixed cost is paid once per step: d step / d step_s = 1
    assert by_lever["optimizer"].sensitivity.d_step_s_d_parameter == pytest.approx(1.0, rel=1e-9)
    # a faster GEMM shortens the step, by less than the whole step; the attention core is apart from it
    gemm = by_lever["gemm"].sensitivity
    assert -1 < gemm.elasticity < 0 and gemm.step_plus_s < gemm.step_minus_s
    assert by_lever["gemm"].seconds + by_lever["attention"].seconds < _step(DP_HEAVY)
    assert by_lever["data loading"].sensitivity.d_step_s_d_parameter == 1.0


def test_each_collective_alone_plus_its_bubble_share_adds_up_to_the_whole_network_slowed() -> None:
    """The pipeline bubble idles (pp - 1) / vp micro-batch times, so a term run every micro-batch moves the
    step by (1 + (pp - 1) / vp / m) of its own change: each lever alone, summed, is the whole re-estimate."""
    base = PIPELINE.terms_s()
    comm = [lever for lever in levers_for(PIPELINE, base) if lever.key.endswith("comm")]
    assert {lever.key for lever in comm} == {"tp comm", "pp comm", "dp comm"}
    whole = sum(PIPELINE.terms_s(calibration=scaled_bandwidth(PIPELINE.calibration, 0.5)).values())
    alone = sum(lever.step_s(base, 0.5) - sum(base.values()) for lever in comm)
    assert whole - sum(base.values()) == pytest.approx(alone, rel=1e-9)


@settings(max_examples=12, deadline=None)
@given(st.floats(min_value=0.35, max_value=1.0))
def test_the_factor_found_is_the_factor_that_made_the_step(factor: float) -> None:
    base = DP_HEAVY.terms_s()
    dp = next(lever for lever in levers_for(DP_HEAVY, base) if lever.key == "dp comm")
    target = dp.step_s(base, factor)
    found = factor_for(lambda f: dp.step_s(base, f), target, 1e-3, dp.max_factor)
    assert found is not None and math.isclose(found, factor, rel_tol=1e-5)


@pytest.mark.parametrize("measured", [0.0, -1.0, math.nan, math.inf])
def test_a_measured_step_that_is_not_a_positive_time_is_refused(measured: float) -> None:
    with pytest.raises(ClusterSimError, match="not a positive time"):
        explain_step(DP_HEAVY, measured, bounds=BOUNDS, level=LEVEL)
