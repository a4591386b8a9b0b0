"""The manifest and the priors in the calibration files: read, checked, written, and shown by ``validate``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import (
    Table,
    calibration_from_tables,
    merge_tables,
    packaged_path,
    read_toml,
    validate_tables,
)
from clustersim.compute import efficiency
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_table
from clustersim.errors import CatalogFileError
from clustersim.network.analytic import CommCalibration
from clustersim.validation.calibrate import calibrate, summary_lines, write_calibration
from clustersim.validation.cases import bundled_dir, read_cases
from clustersim.validation.fit import Constant
from clustersim.validation.manifest import fitted_case_ids, fitted_on_by_kind, manifest_updates, priors, read_manifest
from clustersim.validation.scoring import CaseScore, ValidationReport, fit_status
from clustersim.validation.specs import COLLECTIVE, SPECS, TRAINING, TRAINING_BOUNDS

PACKAGED_EFFICIENCY = packaged_path(efficiency.PACKAGE, efficiency.FILE_NAME)


def test_every_packaged_prior_names_a_field_and_says_where_its_value_comes_from() -> None:
    for spec in SPECS.values():
        manifest = read_manifest(spec, use_env=False)
        for table, entry in manifest.items():
            for key, why in entry.priors.items():
                assert len(why) > 40, (table, key)  # a stated source, not a word
    held = priors(read_manifest(TRAINING, use_env=False))
    assert held, "efficiency.toml states its priors"
    constants = {(c.table, c.key) for f in efficiency_table(use_env=False) for c in _training_constants(f)}
    assert held <= constants  # only fitted fields can be held as priors


def test_a_prior_is_left_out_of_the_fit() -> None:
    catalog = load_catalog(use_env=False)
    rows = [c for c in read_cases(bundled_dir() / "training.jsonl") if c.id.startswith("neuron")][:2]
    result = calibrate(TRAINING, rows, catalog, efficiency_table(use_env=False), PACKAGED_EFFICIENCY, max_iterations=0)
    held = {(c.table, c.key) for g in result.fit.groups for c in g.priors}
    assert held == {k for k in priors(read_manifest(TRAINING, use_env=False)) if k[0] == "trainium"}
    assert not {(c.table, c.key) for g in result.fit.groups for c in g.constants} & held
    assert any("(prior)" in line for line in summary_lines(result))


def test_metadata_keys_pass_the_loaders_and_never_reach_the_records(tmp_path: Path) -> None:
    fields = {"value": 0.9, "source": "s", "prior": {"value": "a measurement, somewhere"}}
    fields |= {"fitted_on": ["a", "b"], "residual": 0.05}
    tables = {"network_efficiency": Table(fields, "f.toml")}
    packaged = merge_tables([(str(p), read_toml(p)) for p in [packaged_path("clustersim.network", "calibration.toml")]])
    record, entries = calibration_from_tables(CommCalibration, {**packaged, **tables})
    assert record.network_efficiency == 0.9 and entries["network_efficiency"].source == "s"
    family = dict(efficiency_table(use_env=False)["hopper"].model_dump(exclude={"fitted"}))
    family |= {"prior": {"gemm_half_flop": "a published sweep"}, "fitted_on": ["x"], "residual": 0.1}
    validated = validate_tables({"hopper": Table(family, "e.toml")}, FamilyEfficiency)
    assert validated["hopper"] == efficiency_table(use_env=False)["hopper"].model_copy(update={"fitted": None})


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"prior": "all of them"}, "prior is a table"),
        ({"prior": {"gemm_halfflop": "x"}}, r"prior\.gemm_halfflop.*no such field \(did you mean gemm_half_flop"),
        ({"prior": {"attention": ""}}, "prior.attention needs the prior's source"),
        ({"single_source": ["attention"]}, "single_source is a table"),
        ({"single_source": {"expert_gemm": "x"}}, r"single_source\.expert_gemm.*did you mean expert_gemm_s"),
        ({"single_source": {"attention": " "}}, "needs why one source is accepted"),
        ({"fitted_on": "case-1"}, "fitted_on is a list of case ids"),
        ({"residual": -0.1}, "residual is a number >= 0"),
        ({"residual": True}, "residual is a number >= 0"),
    ],
)
def test_bad_metadata_is_named(extra: dict[str, object], message: str) -> None:
    family = dict(efficiency_table(use_env=False)["hopper"].model_dump(exclude={"fitted"})) | extra
    with pytest.raises(CatalogFileError, match=message) as info:
        validate_tables({"hopper": Table(family, "e.toml")}, FamilyEfficiency)
    assert "e.toml" in str(info.value) and "hopper" in str(info.value)


def test_a_family_based_on_another_keeps_its_priors_but_not_its_fit() -> None:
    doc = {"hopper": {"gemm_max": 0.7, "prior": {"attention": "why"}, "fitted_on": ["a"], "residual": 0.1}}
    doc["hopper"]["single_source"] = {"gemm_max": "only one publisher"}
    merged = merge_tables([("f.toml", doc), ("g.toml", {"blackwell": {"based_on": "hopper"}})])
    assert merged["blackwell"].fields == {"gemm_max": 0.7, "prior": {"attention": "why"}}


def test_the_manifest_is_written_beside_the_fitted_values_and_read_back(tmp_path: Path) -> None:
    copy = tmp_path / "calibration.toml"
    shutil.copy(packaged_path("clustersim.network", "calibration.toml"), copy)
    catalog = load_catalog(use_env=False)
    rows = [c for c in read_cases(bundled_dir() / "collectives.jsonl") if (c.size_bytes or 0) >= 2**30][:4]
    start = COLLECTIVE.current()
    result = calibrate(COLLECTIVE, rows, catalog, start, copy, max_iterations=1)
    updates = manifest_updates(result.fit)
    (group,) = result.fit.groups
    assert all(u["fitted_on"] == sorted(group.case_ids) for u in updates.values())
    write_calibration(result, copy, "a test (1 round)", "collectives.jsonl")
    manifest = read_manifest(COLLECTIVE, copy)
    assert fitted_case_ids(manifest) == frozenset(c.id for c in rows)
    written = read_toml(copy)
    for constant in group.constants:
        table = written[constant.table]
        assert table[constant.key] == COLLECTIVE.get(result.fit.calibration, constant)
        assert table["residual"] == pytest.approx(group.residual, rel=1e-3)
        assert "by a test (1 round)" in table["fitted"] and "in fitted_on" in table["fitted"]
    assert "fitted_on" not in written["nvlink_efficiency"]  # not fitted: no manifest


def test_without_a_manifest_nothing_is_claimed() -> None:
    assert fitted_case_ids({}) is None
    assert set(fitted_on_by_kind(use_env=False)) == set(SPECS)


def test_fit_status_per_source() -> None:
    def case(case_id: str, source: str, kind: str = "collective") -> CaseScore:
        return CaseScore(case_id, kind, 1.0, 1.0, 0.0, "busbw_GBps", "g", "f", source)

    report = ValidationReport(cases=[case("a", "in"), case("b", "out"), case("c", "half"), case("d", "half")])
    report.cases.append(case("m", "memory", kind="memory"))
    report.fitted_on = {"collective": frozenset({"a", "c"}), "training": None}
    statuses = {s: report.fit_status("f", s) for s in ("in", "out", "half", "memory")}
    assert statuses == {"in": "in-sample", "out": "held-out", "half": "in-sample 1/2", "memory": "no fitted constants"}
    report.fitted_on["collective"] = None
    assert report.fit_status("f", "in") == "no manifest"
    assert fit_status([], frozenset()) == "in-sample"  # vacuous: no case to hold out


def _training_constants(family: str) -> list[Constant]:
    return [Constant(family, key, low, high) for key, (low, high) in TRAINING_BOUNDS.items()]
