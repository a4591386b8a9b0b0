"""The shared TOML loader: reading one file, user paths, and packaged tables with user files over them."""

import os
from pathlib import Path

import pytest

from clustersim.catalog.tomlfiles import (
    env_paths,
    expand_toml_paths,
    header_comment,
    merge_tables,
    read_toml,
    update_toml_file,
    user_paths,
)
from clustersim.errors import CatalogFileError


def test_read_toml_names_the_file_and_the_problem(tmp_path: Path):
    good = tmp_path / "good.toml"
    good.write_text("[a]\nx = 1\n")
    assert read_toml(good) == {"a": {"x": 1}}
    bad = tmp_path / "bad.toml"
    bad.write_text("[a\n")
    with pytest.raises(CatalogFileError, match=r"bad\.toml: cannot read the file: not valid TOML: .*line 1"):
        read_toml(bad)
    with pytest.raises(CatalogFileError, match=r"absent\.toml: no such model file"):
        read_toml(tmp_path / "absent.toml", "model file")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe")
    with pytest.raises(CatalogFileError, match="cannot read the file"):
        read_toml(binary)


def test_user_paths_come_from_the_environment_then_the_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("CLUSTERSIM_TEST_PATHS", f"{tmp_path / 'a'}{os.pathsep}{os.pathsep}{tmp_path / 'b'}")
    assert env_paths("CLUSTERSIM_TEST_PATHS") == [str(tmp_path / "a"), str(tmp_path / "b")]
    assert user_paths("CLUSTERSIM_TEST_PATHS", [tmp_path / "c"], use_env=True)[-1] == str(tmp_path / "c")
    assert user_paths("CLUSTERSIM_TEST_PATHS", [], use_env=False) == ()
    (tmp_path / "dir").mkdir()
    (tmp_path / "dir" / "z.toml").write_text("")
    (tmp_path / "dir" / "a.toml").write_text("")
    (tmp_path / "dir" / "notes.txt").write_text("")
    assert [p.name for p in expand_toml_paths([tmp_path / "dir"])] == ["a.toml", "z.toml"]
    with pytest.raises(CatalogFileError, match="no such calibration file"):
        expand_toml_paths([tmp_path / "nowhere"], "calibration file")


def test_tables_merge_field_by_field_with_based_on():
    packaged = {"a": {"x": 1, "y": 2, "source": "paper", "fitted": "once"}}
    user = {"a": {"y": 3}, "b": {"based_on": "a", "x": 4}}
    merged = merge_tables([("packaged.toml", packaged), ("user.toml", user)])
    assert merged["a"].fields == {"x": 1, "y": 3, "source": "paper", "fitted": "once"}
    assert merged["a"].path == "user.toml"
    assert merged["b"].fields == {"x": 4, "y": 3, "source": "paper"}  # a fitted note is not inherited
    own = merge_tables([("packaged.toml", packaged), ("user.toml", user)], own_provenance=True)
    assert own["a"].fields == {"x": 1, "y": 3, "source": "set in user.toml"}
    with pytest.raises(CatalogFileError, match=r"user\.toml, entry 'c', field 'based_on': value 'aa': no such family"):
        merge_tables([("packaged.toml", packaged), ("user.toml", {"c": {"based_on": "aa"}})], entry="family")


def test_update_keeps_the_header_and_the_other_tables(tmp_path: Path):
    path = tmp_path / "cal.toml"
    path.write_text('# about\n# these values\n\n[a]\nvalue = 1.0\nsource = "s"\n\n[b]\nvalue = 2\nsource = "t"\n')
    update_toml_file(path, {"a": {"value": 1.5}}, fitted="2030-01-01")
    assert header_comment(path.read_text()) == "# about\n# these values"
    assert read_toml(path) == {
        "a": {"value": 1.5, "source": "s", "fitted": "2030-01-01"},
        "b": {"value": 2, "source": "t"},
    }


def test_a_table_based_on_another_is_not_overridden_by_the_bases_subtable_of_a_field_it_sets():
    """automodel is based on fsdp and states its own attention rate; fsdp's Hopper table must not replace it."""
    packaged = {
        "fsdp": {"rate": 1.0, "other": 2, "family": {"hopper": {"rate": 0.62, "other": 3}, "ampere": {"rate": 0.9}}}
    }
    user = {"automodel": {"based_on": "fsdp", "rate": 1.0}, "titan": {"based_on": "fsdp"}}
    merged = merge_tables([("packaged.toml", packaged), ("user.toml", user)])
    assert merged["automodel"].fields["family"] == {"hopper": {"other": 3}}  # ampere's table held only rate
    assert merged["titan"].fields["family"] == packaged["fsdp"]["family"]  # a table that sets nothing inherits all
