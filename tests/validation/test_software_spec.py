"""The software profiles' fitted constants have fitting code: the fit recovers them from the data."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.compute.software import software_profiles
from clustersim.validation.cases import bundled_dir, project_dir, read_cases
from clustersim.validation.fit import Constant, fit, loss, prepare_cases
from clustersim.validation.software_holdout import fitted_software, held_out_software
from clustersim.validation.software_spec import SOFTWARE, SOFTWARE_BOUNDS, SOFTWARE_PRIORS, fitted_frameworks
from clustersim.validation.training import case_estimator, training_value


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


def test_only_the_fitted_profiles_cases_enter_and_group_by_framework(catalog: Catalog) -> None:
    cases = read_cases(bundled_dir() / "training.jsonl")
    prepared, _ = prepare_cases(SOFTWARE, cases, catalog, software_profiles(use_env=False))
    assert fitted_frameworks() == {name for name, p in software_profiles().items() if p.fitted}
    assert prepared and {p.group for p in prepared} <= fitted_frameworks()
    assert {p.group for p in prepared} >= {"deepspeed", "fsdp"}


def test_a_moved_kernel_efficiency_is_fitted_back(catalog: Catalog) -> None:
    cases = [c for c in read_cases(bundled_dir() / "training.jsonl") if c.id.startswith("sc21_t2_zero3")]
    shipped = software_profiles(use_env=False)
    prepared, skipped = prepare_cases(SOFTWARE, cases, catalog, shipped)
    assert not skipped and {p.group for p in prepared} == {"deepspeed"}
    moved = SOFTWARE.replace(shipped, {Constant("deepspeed", "kernel_efficiency", 0.3, 1.0): 0.95})
    held = {("deepspeed", "layer_overhead_s"), ("deepspeed", "step_overhead_s")}
    result = fit(SOFTWARE, prepared, moved, priors=held, max_iterations=8)
    value = result.calibration["deepspeed"].kernel_efficiency
    assert abs(value - shipped["deepspeed"].kernel_efficiency) < abs(0.95 - shipped["deepspeed"].kernel_efficiency) / 2
    assert loss(SOFTWARE.loss, prepared, result.calibration) < loss(SOFTWARE.loss, prepared, moved)
    (group,) = result.groups
    assert [c.key for c in group.constants] == ["kernel_efficiency"]


def test_every_fitted_software_constant_has_bounds_and_a_prior() -> None:
    for profile in software_profiles(use_env=False).values():
        for key in fitted_software(profile):
            low, high = SOFTWARE_BOUNDS[key]
            assert low <= getattr(profile, key) <= high
            assert key in SOFTWARE_PRIORS


def test_constants_fitted_on_one_source_are_held_out_however_many_sources_use_the_framework(catalog: Catalog) -> None:
    # fsdp's constants were fitted on llm-foundry alone (fitted_on); fms-fsdp runs FSDP too but was not fitted on.
    rows = [c for c in read_cases(bundled_dir() / "training.jsonl") if c.id.startswith("llmfoundry")][:2]
    rows += [c for c in read_cases(project_dir() / "training.jsonl") if c.id.startswith("fmsfsdp")][:1]
    prepared, _ = prepare_cases(SOFTWARE, rows, catalog, software_profiles(use_env=False))
    assert len(prepared) == 3 and len({p.source for p in prepared}) == 2
    own, note = held_out_software(prepared, "mosaicml/llm-foundry", catalog)
    assert "fitted on it alone: held out at the priors" in note
    at_prior = dict(software_profiles(use_env=False))
    at_prior["fsdp"] = at_prior["fsdp"].model_copy(update={"kernel_efficiency": 1.0, "layer_overhead_s": 0.0})
    for held in own:
        expected = training_value(case_estimator(held.case, catalog, at_prior)(None), held.field)
        assert held.predict(None) == pytest.approx(expected, rel=1e-12)
    _, other = held_out_software(prepared, "foundation-model-stack/fms-fsdp", catalog)
    assert "fitted without it (its cases are out of sample already)" in other
