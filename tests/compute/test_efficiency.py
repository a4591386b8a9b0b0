"""Per-family efficiencies: the packaged table, user overrides and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.efficiency import ENV_VAR, efficiency_for, efficiency_table
from clustersim.errors import CatalogFileError

CATALOG = load_catalog(use_env=False)


def test_packaged_table_covers_the_catalogued_families_with_sources():
    table = efficiency_table(use_env=False)
    assert {"ampere", "hopper", "trainium", "blackwell"} <= set(table)
    assert all(entry.source for entry in table.values())
    blackwell, hopper = table["blackwell"], table["hopper"]
    assert blackwell.model_dump(exclude={"source"}) == hopper.model_dump(exclude={"source"})
    assert efficiency_for(CATALOG.accelerator("h200-sxm"), table) is hopper


def test_gemm_fraction_rises_to_the_ceiling():
    hopper = efficiency_table(use_env=False)["hopper"]
    small, large = hopper.gemm_fraction([1e8, 1e13])
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
