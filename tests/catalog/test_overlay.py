"""The one loader of packaged files with the user's files over them (clustersim.catalog.overlay)."""

from pathlib import Path

import pytest

from clustersim.catalog.overlay import CalibrationFile, RecordFile
from clustersim.compute import efficiency, software
from clustersim.errors import CatalogFileError
from clustersim.network import analytic
from clustersim.serving import datasets, engine, engines


@pytest.mark.parametrize("module", [analytic, engine])
def test_each_calibration_is_read_by_the_one_loader(module, monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    source = module.CALIBRATION
    assert isinstance(source, CalibrationFile) and source.env_var == module.ENV_VAR
    monkeypatch.delenv(module.ENV_VAR, raising=False)
    assert module.default_calibration() is module.DEFAULT_CALIBRATION is source.packaged
    name = next(iter(module.calibration_entries(use_env=False)))
    entry = module.calibration_entries(use_env=False)[name]
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[{name}]\nsource = "my bench"\n')
    assert module.calibration_entries([mine], use_env=False)[name].source == "my bench"
    monkeypatch.setenv(module.ENV_VAR, str(mine))
    assert module.calibration_entries()[name].path == str(mine)
    assert module.default_calibration() == module.DEFAULT_CALIBRATION  # same values, its own source
    assert module.calibration_entries(use_env=False)[name] == entry


def test_the_efficiency_table_is_read_by_the_one_loader(tmp_path: Path):
    assert isinstance(efficiency.EFFICIENCY_FILE, RecordFile)
    assert efficiency.efficiency_table(use_env=False) is efficiency.efficiency_table(use_env=False)  # cached
    mine = tmp_path / "mine.toml"
    mine.write_text('[hopper]\ngemm_max = 0.5\n[newchip]\nbased_on = "hopper"\nsource = "mine"\n')
    table = efficiency.efficiency_table([mine], use_env=False)
    assert table["hopper"].gemm_max == 0.5 and table["newchip"].attention == table["hopper"].attention
    bad = tmp_path / "bad.toml"
    bad.write_text("[hopper]\ngemm_max = 2.0\n")
    with pytest.raises(CatalogFileError, match=r"bad\.toml.*hopper.*gemm_max"):
        efficiency.efficiency_table([bad], use_env=False)


@pytest.mark.parametrize(
    ("source", "read"),
    [
        (datasets.DATASET_FILE, datasets.request_datasets),
        (engines.ENGINE_FILE, engines.engine_profiles),
        (software.SOFTWARE_FILE, software.software_profiles),
    ],
)
def test_the_profiles_are_read_by_the_one_loader_and_know_their_names(source, read, tmp_path: Path):
    assert isinstance(source, RecordFile) and source.named
    packaged = read(use_env=False)
    assert packaged is read(use_env=False) and all(record.name == name for name, record in packaged.items())
    first = next(iter(packaged))
    mine = tmp_path / "mine.toml"
    mine.write_text(f'[mine]\nbased_on = "{first}"\n')
    table = read([mine], use_env=False)
    assert table["mine"].name == "mine" and set(table) == {*packaged, "mine"}
