"""Every shipped fitted constant is identified by two independent sources, or says why one is accepted."""

from __future__ import annotations

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.validation.cases import project_dir, read_cases
from clustersim.validation.identification import MIN_SOURCES, Identification, identify, unidentified
from clustersim.validation.software_spec import SOFTWARE
from clustersim.validation.specs import SPECS

ALL_SPECS = {**SPECS, "software": SOFTWARE}  # the hardware fits and the software profiles' fitted constants


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


@pytest.mark.parametrize("kind", sorted(ALL_SPECS))
def test_every_fitted_constant_has_two_sources_or_a_stated_exemption(kind: str, catalog: Catalog) -> None:
    found = identify(ALL_SPECS[kind], catalog)
    assert found, f"no fitted constants found for {kind}"
    missing = {i.constant: sorted(i.sources) for i in unidentified(found)}
    assert not missing, (
        f"fitted on fewer than {MIN_SOURCES} sources with no single_source exemption beside them "
        f"in the calibration file: {missing}"
    )


def test_an_exemption_that_is_no_longer_needed_is_not_kept(catalog: Catalog) -> None:
    """An exemption beside a constant that two sources identify is stale: it must be removed."""
    found = [i for spec in ALL_SPECS.values() for i in identify(spec, catalog)]
    stale = [i.constant for i in found if i.exemption and len(i.sources) > 1]
    assert not stale, f"single_source exemptions on constants that {MIN_SOURCES}+ sources identify: {stale}"


def test_one_source_without_an_exemption_is_reported(catalog: Catalog) -> None:
    # Given Megatron-Bridge's Blackwell rows alone, one source informs each Blackwell constant.
    cases = [c for c in read_cases(project_dir() / "training.jsonl") if c.id.startswith("mbridge2")]
    found = {i.constant: i for i in identify(SPECS["training"], catalog, cases)}
    assert found["blackwell.step_s"].sources == {"NVIDIA-NeMo/Megatron-Bridge"}
    bare = Identification("x.y", frozenset({"one"}), None)
    assert unidentified([bare, Identification("x.z", frozenset({"a", "b"}), None)]) == [bare]
    assert Identification("x.y", frozenset({"one"}), "why").identified
