"""Fitting: the generic machinery on a toy spec, the profile, and the three real specs at tiny budgets."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import Case, bundled_dir, read_cases
from clustersim.validation.fit import ALL, Constant, FitSpec, Prepared, fit, groups_of, loss, prepare_cases
from clustersim.validation.profile import profile
from clustersim.validation.specs import COLLECTIVE, INFERENCE, SPECS, TRAINING
from tests.validation.helpers import collective

Toy = dict[str, float]  # table name -> value
SCALE = Constant("scale", "value", 0.1, 10.0)
IDLE = Constant("idle", "value", 0.1, 10.0)  # no case depends on it
TOY = {"scale": 1.0, "idle": 1.0}


def toy_spec(constants: Sequence[Constant] = (SCALE, IDLE), loss_kind: Any = "log-by-case") -> FitSpec[Toy]:
    """Cases predict ``measured x scale / 2`` (so scale = 2 fits exactly); ``refused`` cannot be predicted."""

    def prepare(case: Case, field: str, catalog: Catalog, cal: Toy) -> tuple[str, Callable[[Toy], float]]:
        if case.id == "refused":
            raise ClusterSimError("no topology")
        measured = case.measured[field] * (1.1 if case.source.startswith("skewed") else 1.0)
        return (case.op or ALL), lambda c: measured * c["scale"] / 2

    return FitSpec(
        kind="collective",
        package="clustersim.network",
        file_name="calibration.toml",
        env_var="UNUSED",
        loss=loss_kind,
        method="coordinate",
        max_iterations=60,
        objective="toy",
        current=lambda: {"scale": 1.0, "idle": 1.0},
        selects=lambda case: (case.size_bytes or 0) >= 1024,
        prepare=prepare,
        constants=lambda cal, group, cases: list(constants),
        get=lambda cal, c: cal[c.table],
        replace=lambda cal, values: {**cal, **{c.table: v for c, v in values.items()}},
        fallback=lambda group: None,
    )


def cases(rows: Sequence[dict[str, Any]]) -> list[Case]:
    return [Case.model_validate(r) for r in rows]


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


def test_prepare_skips_what_cannot_be_predicted_and_what_the_spec_leaves_out(catalog: Catalog) -> None:
    rows = [collective("a", 10.0), collective("refused", 10.0), collective("small", 10.0, size_bytes=10)]
    prepared, skipped = prepare_cases(toy_spec(), cases(rows), catalog, TOY)
    assert [p.case.id for p in prepared] == ["a"]
    assert [(s.id, s.reason) for s in skipped] == [("refused", "no topology")]
    everything, _ = prepare_cases(toy_spec(), cases(rows), catalog, TOY, selected=False)
    assert [p.case.id for p in everything] == ["a", "small"]
    assert (
        everything[0].field == "busbw_GBps" and everything[0].source == "test" and everything[0].group == "all_reduce"
    )


def test_the_fit_finds_the_constant_and_records_its_cases_and_residual(catalog: Catalog) -> None:
    spec = toy_spec()
    prepared, _ = prepare_cases(spec, cases([collective(f"c{i}", 10.0 * (i + 1)) for i in range(3)]), catalog, TOY)
    result = fit(spec, prepared, {"scale": 1.0, "idle": 1.0}, digits=3)
    assert result.calibration["scale"] == pytest.approx(2.0, rel=0.01)
    assert result.calibration["idle"] == 1.0  # nothing depends on it: never moved
    (group,) = result.groups
    assert group.case_ids == ("c0", "c1", "c2") and group.start_residual == pytest.approx(math.log(2))
    assert group.residual < 0.01 and group.residual == loss("log-by-case", prepared, result.calibration)
    assert float(f"{result.calibration['scale']:.3g}") == result.calibration["scale"]  # rounded to 3 digits
    assert result.values() == {SCALE: result.calibration["scale"], IDLE: 1.0}


def test_priors_are_not_fitted(catalog: Catalog) -> None:
    spec = toy_spec()
    prepared, _ = prepare_cases(spec, cases([collective("a", 10.0)]), catalog, TOY)
    result = fit(spec, prepared, {"scale": 1.0, "idle": 1.0}, priors={("scale", "value")})
    assert result.calibration["scale"] == 1.0
    assert result.groups[0].constants == (IDLE,) and result.groups[0].priors == (SCALE,)


def test_groups_fit_apart_and_only_groups_limits_the_work(catalog: Catalog) -> None:
    spec = toy_spec(constants=(SCALE,))
    rows = [collective("r", 10.0), collective("g", 10.0, op="all_gather")]
    prepared, _ = prepare_cases(spec, cases(rows), catalog, TOY)
    assert list(groups_of(prepared)) == ["all_reduce", "all_gather"]
    result = fit(spec, prepared, {"scale": 1.0}, only_groups={"all_gather"})
    assert [g.group for g in result.groups] == ["all_gather"] and result.groups[0].case_ids == ("g",)


def test_log_by_source_weighs_every_source_the_same(catalog: Catalog) -> None:
    rows = [collective(f"many{i}", 10.0) for i in range(9)] + [collective("one", 10.0)]
    rows[-1]["source"] = "skewed source"  # predicted 10% high
    spec = toy_spec(loss_kind="log-by-source")
    prepared, _ = prepare_cases(spec, cases(rows), catalog, TOY)
    at_two = {"scale": 2.0, "idle": 1.0}
    assert loss("log-by-source", prepared, at_two) == pytest.approx(math.log(1.1) / 2)
    assert loss("log-by-case", prepared, at_two) == pytest.approx(math.log(1.1) / 10)
    assert loss("relative-by-case", prepared, at_two) == pytest.approx(0.1 / 10)
    assert loss("log-by-case", [], at_two) == 0.0


def test_the_profile_finds_the_constant_nothing_depends_on(catalog: Catalog) -> None:
    spec = toy_spec()
    prepared, _ = prepare_cases(spec, cases([collective("a", 10.0), collective("b", 20.0)]), catalog, TOY)
    result = fit(spec, prepared, {"scale": 1.0, "idle": 1.0}, priors={("idle", "value")})
    profiles = {p.constant.name: p for p in profile(result, prepared)}
    assert profiles["idle"].flat and profiles["idle"].prior and profiles["idle"].change == 0.0
    assert not profiles["scale"].flat and not profiles["scale"].prior
    assert profiles["scale"].low == pytest.approx(profiles["scale"].value / 2)
    assert profiles["scale"].high == pytest.approx(profiles["scale"].value * 2)
    at_bound = fit(spec, prepared, {"scale": 1.0, "idle": 10.0}, max_iterations=0)  # idle at its upper bound
    idle = next(p for p in profile(at_bound, prepared) if p.constant == IDLE)
    assert (idle.low, idle.high) == (pytest.approx(5.0), 10.0)  # the range tried, cut at the bound


def _skewed(case: Case, field: str) -> float:
    return case.measured[field] * (1.1 if case.source.startswith("skewed") else 1.0)


def test_a_refitted_profile_finds_a_ridge_that_one_at_a_time_misses(catalog: Catalog) -> None:
    """Two constants that only act as a product: each alone looks pinned, together they slide."""
    other = Constant("other", "value", 0.1, 10.0)
    spec = dataclasses.replace(
        toy_spec(constants=(SCALE, other)),
        prepare=lambda case, field, cat, cal: (ALL, lambda c: _skewed(case, field) * c["scale"] * c["other"] / 2),
    )
    start = {"scale": 1.0, "other": 1.0}
    rows = [collective("a", 10.0), collective("b", 20.0) | {"source": "skewed source"}]  # b: 10% off
    prepared, _ = prepare_cases(spec, cases(rows), catalog, start)
    result = fit(spec, prepared, start)
    alone = {p.constant.name: p for p in profile(result, prepared)}
    refitted = {p.constant.name: p for p in profile(result, prepared, refit_iterations=30)}
    assert not alone["scale"].flat and not alone["other"].flat
    assert refitted["scale"].flat and refitted["other"].flat


# the real specs


def test_every_spec_starts_inside_its_bounds() -> None:
    """A current value outside its bounds would move at the first step of any refit."""
    for spec in SPECS.values():
        start = spec.current()
        for constant in _all_constants(spec, start):
            assert constant.low <= spec.get(start, constant) <= constant.high, constant
            assert 0 < constant.low < constant.high


def test_get_and_replace_agree_and_change_one_constant() -> None:
    for spec in SPECS.values():
        start = spec.current()
        constants = _all_constants(spec, start)
        for constant in constants:
            value = (constant.low * constant.high) ** 0.5
            changed = spec.replace(start, {constant: value})
            assert spec.get(changed, constant) == pytest.approx(value)
            assert all(spec.get(changed, c) == spec.get(start, c) for c in constants if c != constant)
        assert spec.get(spec.current(), constants[0]) == spec.get(start, constants[0])  # start untouched


def test_training_groups_by_family_and_fits_fp8_only_where_there_are_fp8_cases(catalog: Catalog) -> None:
    rows = read_cases(bundled_dir() / "training.jsonl")
    chosen = [next(c for c in rows if c.id.startswith(p)) for p in ("korthikanti", "neuron", "nemo2407")]
    prepared, skipped = prepare_cases(TRAINING, chosen, catalog, TRAINING.current())
    assert skipped == [] and [p.group for p in prepared] == ["ampere", "trainium", "hopper"]
    keys = {p.group: [c.key for c in TRAINING.constants(TRAINING.current(), p.group, [p])] for p in prepared}
    assert "fp8_efficiency_ratio" not in keys["ampere"] and "fp8_efficiency_ratio" in keys["hopper"]


@pytest.mark.parametrize(
    ("spec", "name"), [(TRAINING, "training"), (COLLECTIVE, "collectives"), (INFERENCE, "inference")]
)
def test_one_iteration_of_each_real_spec_does_not_worsen_its_objective(catalog: Catalog, spec: FitSpec[Any], name: str):
    rows = read_cases(bundled_dir() / f"{name}.jsonl")[::12]  # a few cases of each file, quickly
    start = spec.current()
    prepared, _ = prepare_cases(spec, rows, catalog, start)
    assert prepared
    result = fit(spec, prepared, start, max_iterations=1)
    for group in result.groups:
        assert group.residual <= group.start_residual
        assert set(group.case_ids) <= {p.case.id for p in prepared}
    assert spec.current() == start  # nothing cached was changed


def _all_constants(spec: FitSpec[Any], start: Any) -> list[Constant]:
    if spec is TRAINING:
        return [c for family in start for c in TRAINING.constants(start, family, [_fp8()])]
    return spec.constants(start, ALL, [])


def _fp8() -> Prepared[Any]:
    case = Case.model_validate({"id": "x", "kind": "training", "measured": {"step_time_s": 1.0}, "precision": "fp8"})
    return Prepared(case, "step_time_s", 1.0, "s", "g", lambda cal: 1.0)
