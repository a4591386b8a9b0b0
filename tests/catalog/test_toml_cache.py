"""Parsed TOML documents kept between processes (``catalog.toml_cache``) read back as the parser gives them: every
packaged file equal to ``tomllib``'s document on the first read (parsed) and the second (from the cache), an edited
file parsed again, a damaged entry parsed again and replaced, dates and times read back as the same objects, an
invalid file refused as before, and the cache off with an empty ``CLUSTERSIM_CACHE_DIR``."""

from __future__ import annotations

import math
import tomllib
from importlib import resources

import pytest

from clustersim.catalog.toml_cache import CACHE_ENV, cache_dir, parse_toml
from clustersim.catalog.tomlfiles import read_toml
from clustersim.errors import CatalogFileError

PACKAGED = [
    ("clustersim.catalog.data", "accelerators.toml"),
    ("clustersim.catalog.data", "instances.toml"),
    ("clustersim.intervals", "residuals.toml"),
    ("clustersim.network", "calibration.toml"),
]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv(CACHE_ENV, str(folder))
    return folder


@pytest.mark.parametrize(("package", "name"), PACKAGED)
def test_a_packaged_file_reads_back_as_the_parser_gives_it(cache, package, name):
    text = resources.files(package).joinpath(name).read_text("utf-8")
    expected = tomllib.loads(text)
    assert parse_toml(text) == expected  # parsed, then kept
    assert len(list(cache.glob("*.json"))) == 1
    again = parse_toml(text)  # read back from the cache
    assert again == expected and again is not expected


def test_special_floats_and_nesting_survive_the_cache(cache):
    text = 'a = inf\nb = -inf\nc = nan\nd = -0.0\ne = 1e-300\n[t]\nx = [1, 2.5, "s", {y = true}]\n'
    parse_toml(text)
    found = parse_toml(text)
    assert found["a"] == math.inf and found["b"] == -math.inf and math.isnan(found["c"])
    assert math.copysign(1.0, found["d"]) == -1.0 and found["e"] == 1e-300
    assert found["t"] == {"x": [1, 2.5, "s", {"y": True}]} and isinstance(found["t"]["x"][0], int)


def test_an_edited_file_is_parsed_again(cache, tmp_path):
    path = tmp_path / "f.toml"
    path.write_text("a = 1\n")
    assert read_toml(path) == {"a": 1}
    path.write_text("a = 2\n")
    assert read_toml(path) == {"a": 2}


def test_a_damaged_entry_is_parsed_again_and_replaced(cache):
    parse_toml("a = 1\n")
    (entry,) = cache.glob("*.json")
    entry.write_text('{"a": ')  # cut short
    assert parse_toml("a = 1\n") == {"a": 1}
    assert entry.read_text() == '{"a": 1}'


def test_dates_and_times_read_back_as_the_same_objects(cache):
    text = (
        "day = 2026-12-02\nlocal = 2026-12-02T07:15:00.250\nzoned = 2026-12-02T07:15:00+01:30\n"
        "utc = 1979-05-27T07:32:00Z\n"
        "clock = 07:15:30\n[t]\nseen = [2025-01-01]\n"
    )
    expected = tomllib.loads(text)
    parse_toml(text)
    found = parse_toml(text)
    assert found == expected
    assert {k: type(v) for k, v in found.items()} == {k: type(v) for k, v in expected.items()}
    assert found["zoned"].utcoffset() == expected["zoned"].utcoffset() and found["utc"].tzinfo is not None


def test_an_invalid_file_is_refused_as_before(cache, tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("a = \n")
    with pytest.raises(CatalogFileError, match="not valid TOML"):
        read_toml(path)
    path.write_bytes(b"a = '\xff'\n")
    with pytest.raises(CatalogFileError, match="not UTF-8"):
        read_toml(path)


def test_an_empty_setting_turns_the_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv(CACHE_ENV, "")
    assert cache_dir() is None and parse_toml("a = 1\n") == {"a": 1}
    monkeypatch.delenv(CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert cache_dir() == tmp_path / "clustersim" / "toml"
