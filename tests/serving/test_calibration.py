"""The serving model's calibration file: its fit redone from the data, user overlays, errors, the write path."""

import dataclasses
import importlib.util
import shutil
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.catalog.tomlfiles import load_calibration, update_toml_file
from clustersim.errors import CatalogFileError
from clustersim.serving.engine import (
    DEFAULT_CALIBRATION,
    ENV_VAR,
    InferenceCalibration,
    calibration_entries,
    default_calibration,
    serving_calibration,
    serving_system_for_instance,
)
from clustersim.serving.estimate import Request, estimate_offline
from clustersim.validation.cases import bundled_dir
from clustersim.validation.fit import ALL
from clustersim.validation.manifest import priors, read_manifest
from clustersim.validation.specs import INFERENCE, MOE_GROUP
from clustersim.workload.transformer import Transformer
from tests.calibration_fits import FittedGroup, check_brought_back, check_recorded_residual, fitted_groups, refit_one

CATALOG = load_catalog(use_env=False)
PACKAGED = Path(__file__).resolve().parents[2] / "src" / "clustersim" / "serving" / "calibration.toml"
GROUND_TRUTH = bundled_dir() / "inference.jsonl"
LLAMA2_70B = Transformer(
    name="llama2-70b", layers=80, hidden=8192, ffn_hidden=28672, heads=64, kv_heads=8, vocab=32000, ffn_type="swiglu"
)
MANIFEST = read_manifest(INFERENCE, use_env=False)
FITTED = [c.name for c in INFERENCE.constants(DEFAULT_CALIBRATION, ALL, []) if (c.table, c.key) not in priors(MANIFEST)]


@pytest.fixture(scope="module")
def groups() -> dict[str, FittedGroup]:
    """The packaged file's serving groups (the dense cases', the MoE cases') with the cases each was fitted on."""
    assert serving_calibration(use_env=False) is DEFAULT_CALIBRATION  # no user files: the packaged values
    found = fitted_groups("inference", DEFAULT_CALIBRATION)
    assert set(found) == {ALL, MOE_GROUP}
    return found


@pytest.fixture(scope="module")
def fitted(groups: dict[str, FittedGroup]) -> FittedGroup:
    return groups[ALL]


def test_the_moe_group_fits_its_cost_per_token_alone_and_it_comes_back(groups: dict[str, FittedGroup]):
    moe = groups[MOE_GROUP]
    check_recorded_residual(moe)
    assert set(moe.constants) == {"moe_token_layer_s"} and len(moe.cases) == 50
    check_brought_back(refit_one(moe, "moe_token_layer_s"), "moe_token_layer_s")


def test_the_recorded_residual_is_the_objective_at_the_packaged_constants(fitted: FittedGroup):
    check_recorded_residual(fitted)
    assert set(fitted.constants) == set(FITTED) and fitted.cases


@pytest.mark.parametrize("name", FITTED)
def test_the_fit_brings_a_perturbed_constant_back_to_the_packaged_value(fitted: FittedGroup, name: str):
    check_brought_back(refit_one(fitted, name), name)


def test_every_value_reads_as_a_float():
    """Integers in the file (workspace_bytes) come back as floats, as the model's arithmetic expects (a
    per-family table as (family, float) pairs)."""
    values = dataclasses.asdict(serving_calibration(use_env=False))
    for table in ("family_flop_efficiency", "decode_attention_hbm_efficiency", "family_attention_flop_efficiency"):
        families = values.pop(table)
        assert families and all(type(f) is str and type(v) is float for f, v in families), table
    assert all(type(value) is float for value in values.values())


def test_every_entry_says_where_it_comes_from():
    entries = calibration_entries(use_env=False)
    assert set(entries) == {f.name for f in dataclasses.fields(InferenceCalibration)}
    assert all(entry.source.strip() for entry in entries.values())
    assert entries["hbm_efficiency"].source.startswith("assumed")
    assert entries["attention_flop_efficiency"].source.startswith("stated prior")
    assert entries["power_clock_exponent"].source.startswith("stated prior")
    assert entries["flop_efficiency"].fitted is not None and entries["attention_flop_efficiency"].fitted is None
    assert f"{len(MANIFEST['gemm_half_tokens'].fitted_on)} cases" in str(entries["gemm_half_tokens"].fitted)


def test_a_user_file_changes_only_what_it_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    mine = tmp_path / "mine.toml"
    mine.write_text('[hbm_efficiency]\nvalue = 0.7\nsource = "our H100s, STREAM copy"\n')
    cal = serving_calibration([mine], use_env=False)
    assert cal == dataclasses.replace(DEFAULT_CALIBRATION, hbm_efficiency=0.7)
    assert calibration_entries([mine], use_env=False)["hbm_efficiency"].source == "our H100s, STREAM copy"

    # Lower achieved HBM bandwidth: slower memory-bound decode, so fewer tokens/s at batch 1.
    system = serving_system_for_instance(CATALOG, "p5.48xlarge", tp=8)
    request = Request(128, 128, Dtype.BF16)
    packaged = estimate_offline(LLAMA2_70B, system, request, batch=1)
    slower = estimate_offline(LLAMA2_70B, system, request, batch=1, cal=cal)
    assert slower.gemm_memory_s == pytest.approx(packaged.gemm_memory_s * 0.9 / 0.7)
    assert slower.output_tokens_per_s < packaged.output_tokens_per_s

    # The environment variable does the same for every call that gives no calibration.
    monkeypatch.setenv(ENV_VAR, str(mine))
    assert default_calibration() is cal
    assert estimate_offline(LLAMA2_70B, system, request, batch=1) == slower
    monkeypatch.delenv(ENV_VAR)
    assert default_calibration() is DEFAULT_CALIBRATION


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[flop_efficiency]\nvalue = 0.59\n[flop_efficiency]\n", "not valid TOML"),
        (
            "[power_clock_exponent]\nvalue = 1.2\n",
            "entry 'power_clock_exponent', field 'value': value 1.2: .*less than or",
        ),
        (
            "[step_overhead_s]\nvalue = -1e-3\n",
            "entry 'step_overhead_s', field 'value': value -0.001: .*greater than or",
        ),
        (
            "[gemm_half_tokens]\nvalue = -1\n",
            "entry 'gemm_half_tokens', field 'value': value -1: .*greater than or equal to 0",
        ),
        ("[kv_block_tokens]\nvalue = 16\n", "unknown entry .*valid: flop_efficiency"),
        ("[hbm_efficiency]\nvalue = 0.8\nnote = 'x'\n", "field 'note': value 'x': unknown field"),
        ("[hbm_eficiency]\nvalue = 0.8\n", "unknown entry \\(did you mean hbm_efficiency"),
        ('[hbm_efficiency]\nsource = ""\n', "field 'source': value '': every value needs a non-empty source"),
    ],
)
def test_bad_files_name_the_file_entry_field_value_and_rule(tmp_path: Path, text: str, message: str):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(CatalogFileError, match=message) as info:
        serving_calibration([path], use_env=False)
    assert str(info.value).startswith(str(path)) and "\n" not in str(info.value)


def test_a_directory_of_files_is_read_in_name_order(tmp_path: Path):
    (tmp_path / "a.toml").write_text("[flop_efficiency]\nvalue = 0.5\n")
    (tmp_path / "b.toml").write_text("[flop_efficiency]\nvalue = 0.6\n")
    assert serving_calibration([tmp_path], use_env=False).flop_efficiency == 0.6


def test_the_write_path_round_trips(tmp_path: Path):
    copy = tmp_path / "calibration.toml"
    shutil.copy(PACKAGED, copy)
    update_toml_file(copy, {"flop_efficiency": {"value": 0.61}, "step_overhead_s": {"value": 1.5e-3}}, fitted="today")
    assert copy.read_text().startswith("# The serving model's calibration")
    cal, entries = load_calibration(InferenceCalibration, "clustersim.serving", "calibration.toml", (str(copy),))
    assert cal == dataclasses.replace(DEFAULT_CALIBRATION, flop_efficiency=0.61, step_overhead_s=1.5e-3)
    assert entries["flop_efficiency"].fitted == "today"
    assert entries["flop_efficiency"].source == calibration_entries(use_env=False)["flop_efficiency"].source
    with pytest.raises(CatalogFileError, match="no such table"):
        update_toml_file(copy, {"nothing": {"value": 1.0}})


def test_the_calibration_script_writes_what_it_fitted(tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    copy = tmp_path / "calibration.toml"
    shutil.copy(PACKAGED, copy)
    script = _script("calibrate_inference")
    cal = script.main([str(GROUND_TRUTH), "--steps", "1", "--write", "--toml", str(copy)])
    load_calibration.cache_clear()  # files are read once per process; this one changed since
    written, entries = load_calibration(InferenceCalibration, "clustersim.serving", "calibration.toml", (str(copy),))
    assert written == cal
    assert "by benchmarks/calibrate_inference.py (Nelder-Mead, 1 steps)" in str(entries["flop_efficiency"].fitted)
    assert entries["flop_efficiency"].source == calibration_entries(use_env=False)["flop_efficiency"].source
    assert entries["hbm_efficiency"].fitted is None and written.hbm_efficiency == DEFAULT_CALIBRATION.hbm_efficiency
    assert f"wrote {copy}" in capsys.readouterr().out


def _script(name: str):
    spec = importlib.util.spec_from_file_location(
        name, Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
