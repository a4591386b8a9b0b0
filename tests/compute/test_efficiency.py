"""Per-family efficiencies: the packaged table and its fit redone from the data, user overrides and their errors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from clustersim.catalog.overlay import load_records
from clustersim.catalog.registry import load_catalog
from clustersim.compute.efficiency import ENV_VAR, efficiency_for, efficiency_table
from clustersim.errors import CatalogFileError
from clustersim.validation.cases import bundled_dir
from clustersim.validation.manifest import priors, read_manifest
from clustersim.validation.specs import TRAINING, TRAINING_BOUNDS
from tests.calibration_fits import FittedGroup, check_brought_back, check_recorded_residual, fitted_groups, refit_one

CATALOG = load_catalog(use_env=False)
PACKAGED = Path(__file__).resolve().parents[2] / "src" / "clustersim" / "compute" / "efficiency.toml"
GROUND_TRUTH = bundled_dir() / "training.jsonl"
MANIFEST = read_manifest(TRAINING, use_env=False)
RECORDED = sorted(family for family, entry in MANIFEST.items() if entry.residual is not None)
REFITTED = "hopper"  # the family whose constants are each refitted (the others: their residual only, for time)
FITTED = [f"{REFITTED}.{key}" for key in TRAINING_BOUNDS if (REFITTED, key) not in priors(MANIFEST)]


def test_packaged_table_covers_the_catalogued_families_with_sources():
    table = efficiency_table(use_env=False)
    assert {"ampere", "hopper", "trainium", "blackwell"} <= set(table)
    assert all(entry.source for entry in table.values())
    blackwell, hopper = table["blackwell"], table["hopper"]
    # Blackwell has its own fit (two sources), not Hopper's fractions under another name
    assert blackwell.fitted and blackwell.model_dump(exclude={"source", "fitted"}) != hopper.model_dump(
        exclude={"source", "fitted"}
    )
    assert efficiency_for(CATALOG.accelerator("h200-sxm"), table) is hopper
    assert efficiency_for(CATALOG.accelerator("gb200"), table) is blackwell


@pytest.fixture(scope="module")
def fitted() -> dict[str, FittedGroup]:
    """Each family the packaged file records a fit of, with the bundled cases it was fitted on."""
    return fitted_groups("training", efficiency_table(use_env=False))


@pytest.mark.parametrize("family", RECORDED)
def test_the_recorded_residual_is_the_objective_at_the_packaged_constants(fitted: dict[str, FittedGroup], family: str):
    assert set(fitted) == set(RECORDED)
    check_recorded_residual(fitted[family])


@pytest.mark.parametrize("name", FITTED)
def test_the_fit_brings_a_perturbed_constant_back_to_the_packaged_value(fitted: dict[str, FittedGroup], name: str):
    assert set(fitted[REFITTED].constants) == set(FITTED)
    check_brought_back(refit_one(fitted[REFITTED], name), name)


def test_gemm_fraction_rises_to_the_ceiling():
    hopper = efficiency_table(use_env=False)["hopper"]
    small, large = hopper.gemm_fraction([1e8, 1e15])
    assert small < large < hopper.gemm_max and large == pytest.approx(hopper.gemm_max, rel=1e-3)


def test_a_user_file_replaces_only_the_fields_it_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    mine = tmp_path / "mine.toml"
    mine.write_text('[hopper]\ngemm_max = 0.8\nsource = "our cluster, measured"\n\n[newchip]\nbased_on = "ampere"\n')
    table = efficiency_table([mine], use_env=False)
    packaged = efficiency_table(use_env=False)["hopper"]
    assert table["hopper"].gemm_max == 0.8 and table["hopper"].attention == packaged.attention
    assert table["newchip"].gemm_max == table["ampere"].gemm_max
    monkeypatch.setenv(ENV_VAR, str(mine))
    assert efficiency_table()["hopper"].gemm_max == 0.8


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[hopper]\ngemm_max = 2.0\n", "entry 'hopper'.*gemm_max"),
        ('[x]\nbased_on = "nochip"\n', "field 'based_on': value 'nochip': no such family"),
        ("[hopper\n", "cannot read"),
        ("[hopper]\nspeed = 1\n", "speed"),
    ],
)
def test_bad_files_name_the_file_family_and_field(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CatalogFileError, match=message) as info:
        efficiency_table([path], use_env=False)
    assert str(path) in str(info.value)


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(CatalogFileError, match="no such efficiency file"):
        efficiency_table([tmp_path / "absent.toml"], use_env=False)


def test_the_calibration_script_writes_what_it_fitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    copy = tmp_path / "efficiency.toml"
    copy.write_text(PACKAGED.read_text())
    script = _script("calibrate_training")
    fitted = script.main([str(GROUND_TRUTH), "--rounds", "0", "--family", "trainium", "--write", "--toml", str(copy)])
    assert set(fitted) == {"trainium"}
    load_records.cache_clear()  # the script changed the cached table; and files are read once per process
    table = efficiency_table([copy], use_env=False)
    packaged = efficiency_table(use_env=False)
    assert table["trainium"].model_dump(exclude={"fitted"}) == packaged["trainium"].model_dump(exclude={"fitted"})
    assert "by benchmarks/calibrate_training.py (0 rounds)" in str(table["trainium"].fitted)
    assert table["hopper"].fitted == packaged["hopper"].fitted  # only the family asked for is rewritten
    assert table["blackwell"].fitted == packaged["blackwell"].fitted
    assert f"wrote {copy}" in capsys.readouterr().out


def _script(name: str):
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
