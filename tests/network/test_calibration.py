"""The collective model's calibration file: its fit redone from the data, user overlays, errors, the write path."""

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import load_calibration, update_toml_file
from clustersim.errors import CatalogFileError
from clustersim.network import Op, predict_collective
from clustersim.network.analytic import (
    DEFAULT_CALIBRATION,
    ENV_VAR,
    CommCalibration,
    calibration_entries,
    collective_calibration,
    collective_time_s,
    default_calibration,
)
from clustersim.network.topology import fabric_for_instance
from clustersim.validation.cases import bundled_dir
from clustersim.validation.fit import ALL
from clustersim.validation.manifest import priors, read_manifest
from clustersim.validation.specs import COLLECTIVE
from tests.calibration_fits import FittedGroup, check_brought_back, check_recorded_residual, fitted_groups, refit_one

CATALOG = load_catalog(use_env=False)
PACKAGED = Path(__file__).resolve().parents[2] / "src" / "clustersim" / "network" / "calibration.toml"
GROUND_TRUTH = bundled_dir() / "collectives.jsonl"
HELD = priors(read_manifest(COLLECTIVE, use_env=False))
FITTED = [c.name for c in COLLECTIVE.constants(DEFAULT_CALIBRATION, ALL, []) if (c.table, c.key) not in HELD]


@pytest.fixture(scope="module")
def fitted() -> FittedGroup:
    """The packaged file's one collective group with the bundled cases it was fitted on."""
    assert collective_calibration(use_env=False) is DEFAULT_CALIBRATION  # no user files: the packaged values
    (group,) = fitted_groups("collective", DEFAULT_CALIBRATION).values()
    return group


def test_the_recorded_residual_is_the_objective_at_the_packaged_constants(fitted: FittedGroup):
    check_recorded_residual(fitted)
    assert set(fitted.constants) == set(FITTED) and fitted.cases


@pytest.mark.parametrize("name", FITTED)
def test_the_fit_brings_a_perturbed_constant_back_to_the_packaged_value(fitted: FittedGroup, name: str):
    check_brought_back(refit_one(fitted, name), name)


def test_every_entry_says_where_it_comes_from():
    entries = calibration_entries(use_env=False)
    assert set(entries) == {f.name for f in dataclasses.fields(CommCalibration)}
    assert all(entry.source.strip() for entry in entries.values())
    assert "nccl#1455" in entries["nvlink_efficiency"].source
    assert entries["ramp_intra_node_bytes"].source.startswith("derived, not fitted")
    # The network's achieved fraction is a stated prior (the error is flat across it); the ramp is fitted.
    assert entries["network_efficiency"].source.startswith("prior") and entries["network_efficiency"].fitted is None
    for name in ("ramp_exponent", "ramp_bytes", "ramp_node_exponent"):
        assert "1 MiB" in str(entries[name].fitted) and "collectives.jsonl" in str(entries[name].fitted), name
    assert "p4de_" in PACKAGED.read_text(encoding="utf-8")  # the manifest (fitted_on) lists the p4de cases


def test_a_user_file_changes_only_what_it_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    mine = tmp_path / "mine.toml"
    mine.write_text("[network_efficiency]\nvalue = 0.7\n\n[ramp_bytes]\nreduce = 1e6\n")
    cal = collective_calibration([mine], use_env=False)
    assert cal.network_efficiency == 0.7 and cal.ramp_bytes.reduce == 1e6
    assert cal.ramp_bytes.gather == DEFAULT_CALIBRATION.ramp_bytes.gather
    restored = dataclasses.replace(cal, network_efficiency=0.97, ramp_bytes=DEFAULT_CALIBRATION.ramp_bytes)
    assert restored == DEFAULT_CALIBRATION
    entries = calibration_entries([mine], use_env=False)
    assert entries["network_efficiency"].source == f"set in {mine}" and entries["network_efficiency"].fitted is None
    assert entries["nvlink_efficiency"].source == calibration_entries(use_env=False)["nvlink_efficiency"].source

    # A lower network efficiency: a lower multi-node busbw (large messages are bandwidth-bound).
    fabric = fabric_for_instance(CATALOG, "p5.48xlarge", 4)
    sizes = np.array([2.0**30, 2.0**33])
    slower = predict_collective(Op.ALL_REDUCE, sizes, fabric, cal=cal).busbw_bytes_per_s
    packaged = predict_collective(Op.ALL_REDUCE, sizes, fabric).busbw_bytes_per_s
    assert np.all(slower < packaged)

    # The environment variable does the same for every call that gives no calibration.
    monkeypatch.setenv(ENV_VAR, str(mine))
    assert default_calibration() is cal
    assert np.allclose(predict_collective(Op.ALL_REDUCE, sizes, fabric).busbw_bytes_per_s, slower)
    assert np.allclose(collective_time_s(Op.ALL_REDUCE, sizes, fabric), sizes / slower * 2 * 31 / 32)
    monkeypatch.delenv(ENV_VAR)
    assert default_calibration() is DEFAULT_CALIBRATION


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[network_efficiency\n", "not valid TOML"),
        (
            "[network_efficiency]\nvalue = 1.5\n",
            "entry 'network_efficiency', field 'value': value 1.5: .*less than or equal to 1",
        ),
        ("[nvls_efficiency]\nvalue = 0\n", "entry 'nvls_efficiency', field 'value': value 0: .*greater than 0"),
        ("[ramp_bytes]\nreduce = -1e6\n", "entry 'ramp_bytes', field 'reduce': value -1000000.0: .*greater than or eq"),
        ("[ramp_bytes]\nscatter = 1e6\n", "entry 'ramp_bytes', field 'scatter': value 1000000.0: unknown field"),
        (
            "[network_efficiency]\nvalu = 0.8\n",
            "field 'valu': value 0.8: unknown field \\(valid: value, source, fitted\\)",
        ),
        (
            "[network_eficiency]\nvalue = 0.8\n",
            "entry 'network_eficiency': unknown entry \\(did you mean network_efficiency",
        ),
        ('[ramp_exponent]\nvalue = "fast"\n', "entry 'ramp_exponent', field 'value': value 'fast': .*valid number"),
        ("network_efficiency = 0.8\n", "entry 'network_efficiency': value 0.8: each entry is a table"),
    ],
)
def test_bad_files_name_the_file_entry_field_value_and_rule(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CatalogFileError, match=message) as info:
        collective_calibration([path], use_env=False)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_a_missing_file_is_named(tmp_path: Path):
    with pytest.raises(CatalogFileError, match="no such calibration file"):
        collective_calibration([tmp_path / "absent.toml"], use_env=False)


def test_the_write_path_round_trips(tmp_path: Path):
    copy = tmp_path / "calibration.toml"
    shutil.copy(PACKAGED, copy)
    update_toml_file(
        copy, {"network_efficiency": {"value": 0.85}, "ramp_bytes": {"gather": 5e6}}, fitted="2030-01-01 test"
    )
    text = copy.read_text()
    assert text.startswith("# The collective model's calibration")
    cal, entries = load_calibration(CommCalibration, "clustersim.network", "calibration.toml", (str(copy),))
    assert cal.network_efficiency == 0.85 and cal.ramp_bytes.gather == 5e6
    assert cal.ramp_bytes.reduce == DEFAULT_CALIBRATION.ramp_bytes.reduce
    assert entries["network_efficiency"].fitted == "2030-01-01 test"
    assert entries["network_efficiency"].source == calibration_entries(use_env=False)["network_efficiency"].source
    assert entries["nvlink_efficiency"].fitted is None


def test_the_calibration_script_writes_what_it_fitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    copy = tmp_path / "calibration.toml"
    shutil.copy(PACKAGED, copy)
    script = _script("calibrate_collectives")
    cal = script.main([str(GROUND_TRUTH), "--rounds", "0", "--write", "--toml", str(copy)])
    assert cal == DEFAULT_CALIBRATION  # no rounds: the packaged values, written back as they were
    load_calibration.cache_clear()  # files are read once per process; this one changed since
    written, entries = load_calibration(CommCalibration, "clustersim.network", "calibration.toml", (str(copy),))
    assert written == cal
    assert "by benchmarks/calibrate_collectives.py (0 rounds)" in str(entries["ramp_exponent"].fitted)
    assert entries["nvlink_efficiency"].fitted is None and entries["network_efficiency"].fitted is None  # a prior
    assert f"wrote {copy}" in capsys.readouterr().out


def _script(name: str):
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
