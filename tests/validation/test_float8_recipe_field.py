"""An FP8 case may say its float8 scaling recipe (``software.float8_recipe``, torchao's names); the reader
takes it into the case's software profile, and refuses an unknown recipe or a recipe on a non-FP8 run; a
software file (``--software``) may set a profile's recipe the same way."""

from __future__ import annotations

import json

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.software import software_profiles
from clustersim.errors import CatalogFileError, ClusterSimError
from clustersim.validation.cases import project_dir
from clustersim.validation.training import case_setup
from clustersim.workload.float8 import Float8Recipe

CATALOG = load_catalog(use_env=False)


def _titan_cases() -> list[dict]:
    with (project_dir() / "training.jsonl").open() as lines:
        return [c for c in map(json.loads, lines) if c["id"].startswith("titan")]


def _rowwise_case() -> dict:
    return next(c for c in _titan_cases() if c["software"].get("float8_recipe") == "rowwise")


def _with_software(case: dict, **software: object) -> dict:
    return dict(case, software=dict(case["software"], **software))


def test_every_torchtitan_fp8_row_names_the_recipe_its_source_states():
    cases = _titan_cases()
    fp8 = [c for c in cases if c["precision"] == "fp8"]
    assert len(cases) == 43 and len(fp8) == 26
    assert all("float8_recipe" not in c["software"] for c in cases if c["precision"] != "fp8")
    # the rowwise rows are the ones whose command sets --float8.recipe_name=rowwise; the rest run torchao's default
    stated_rowwise = {c["id"] for c in fp8 if "recipe_name=rowwise" in c["notes"]}
    marked = {c["id"]: c["software"]["float8_recipe"] for c in fp8}
    assert stated_rowwise == {i for i, r in marked.items() if r == "rowwise"} and len(stated_rowwise) == 4
    assert {r for i, r in marked.items() if i not in stated_rowwise} == {"tensorwise"}


def test_the_reader_puts_the_cases_recipe_into_its_software_profile():
    case = _rowwise_case()
    assert case_setup(case, CATALOG).software.float8_recipe is Float8Recipe.ROWWISE
    unstated = _with_software(case, float8_recipe=None)
    assert case_setup(unstated, CATALOG).software.float8_recipe is Float8Recipe.TENSORWISE  # torchtitan's default


def test_an_unknown_recipe_is_refused_naming_the_valid_ones():
    with pytest.raises(ClusterSimError) as error:
        case_setup(_with_software(_rowwise_case(), float8_recipe="blockwise"), CATALOG)
    message = str(error.value)
    assert "float8_recipe" in message and "'blockwise'" in message
    assert "tensorwise, rowwise, rowwise_with_gw_hp" in message and "\n" not in message.strip()


def test_a_recipe_on_a_run_that_is_not_fp8_is_refused():
    case = dict(_with_software(_rowwise_case()), precision="bf16")
    with pytest.raises(ClusterSimError, match=r"software\.float8_recipe 'rowwise' needs precision 'fp8', got 'bf16'"):
        case_setup(case, CATALOG)


def test_a_software_file_sets_a_profiles_recipe_and_an_unknown_one_is_refused(tmp_path):
    ours = tmp_path / "ours.toml"
    ours.write_text(
        '[titan-rowwise]\nbased_on = "torchtitan"\ndescription = "torchtitan, rowwise float8"\n'
        'float8_recipe = "rowwise"\nsource = "our runs"\n',
        encoding="utf-8",
    )
    profiles = software_profiles([ours], use_env=False)
    assert profiles["titan-rowwise"].float8_recipe is Float8Recipe.ROWWISE
    assert profiles["torchtitan"].float8_recipe is Float8Recipe.TENSORWISE
    bad = tmp_path / "bad.toml"
    bad.write_text('[torchtitan]\nfloat8_recipe = "blockwise"\nsource = "x"\n', encoding="utf-8")
    with pytest.raises(CatalogFileError, match="float8_recipe"):
        software_profiles([bad], use_env=False)
