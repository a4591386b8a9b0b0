"""Leave-one-source-out with software constants: a profile fitted on one source alone is held out at its priors."""

from __future__ import annotations

import json

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.compute.software import software_profiles
from clustersim.validation.cases import Case, bundled_dir
from clustersim.validation.fit import prepare_cases
from clustersim.validation.software_holdout import fitted_software, held_out_software
from clustersim.validation.specs import TRAINING
from clustersim.validation.training import case_estimator, estimate_case, training_value


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


def _case(prefix: str, source: str | None = None) -> Case:
    for line in (bundled_dir() / "training.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["id"].startswith(prefix):
            if source is not None:
                row["source"] = source
            return Case.model_validate(row)
    raise AssertionError(prefix)


def _prepared(cases: list[Case], catalog: Catalog):
    scored, _ = prepare_cases(TRAINING, cases, catalog, TRAINING.current(), selected=False)
    return scored


def test_the_packaged_fsdp_profile_says_which_constants_were_fitted():
    fsdp = software_profiles(use_env=False)["fsdp"]
    assert set(fitted_software(fsdp)) == {"kernel_efficiency", "layer_overhead_s"}
    assert fitted_software(software_profiles(use_env=False)["megatron"]) == {}


def test_a_framework_only_one_source_uses_is_held_out_at_the_priors(catalog: Catalog):
    fsdp_case, megatron_case = _case("llmfoundry_mpt-7b_h100"), _case("mcore080_h100_weak_gpt-1.7b")
    scored = _prepared([fsdp_case, megatron_case], catalog)
    held, note = held_out_software(scored, scored[0].source, catalog)
    assert "fsdp.kernel_efficiency, fsdp.layer_overhead_s fitted on it alone" in note
    # The held-out prediction is the estimate under a profile with kernels at 1 and no host overhead.
    priors = dict(software_profiles(use_env=False))
    priors["fsdp"] = priors["fsdp"].model_copy(update={"kernel_efficiency": 1.0, "layer_overhead_s": 0.0})
    field = held[0].field
    expected = training_value(case_estimator(fsdp_case, catalog, priors)(None), field)
    shipped = training_value(estimate_case(fsdp_case, catalog), field)
    assert held[0].predict(None) == pytest.approx(expected, rel=1e-12)
    assert field == "tokens_per_s_per_device"
    assert held[0].predict(None) > 1.05 * shipped  # kernels at the full hardware rate, no overhead: faster
    # The other source's case is not among the held-out ones.
    assert [p.case.id for p in held] == [fsdp_case.id]


def test_a_framework_two_sources_use_keeps_its_constants_and_says_so(catalog: Catalog):
    one, two = _case("llmfoundry_mpt-7b_h100"), _case("llmfoundry_mpt-3b_h100", source="another source")
    scored = _prepared([one, two], catalog)
    held, note = held_out_software(scored, scored[0].source, catalog)
    assert "fitted with it (not refit)" in note
    assert held[0].predict(None) == scored[0].predict(None)


def test_a_source_on_unfitted_frameworks_is_unchanged(catalog: Catalog):
    scored = _prepared([_case("mcore080_h100_weak_gpt-1.7b")], catalog)
    held, note = held_out_software(scored, scored[0].source, catalog)
    assert note == ""
    assert held[0] is scored[0]
