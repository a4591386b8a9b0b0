"""Zoo aliases: other checkpoints of one shape answer to its entry, and no name names two shapes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.workload.zoo import list_models, load_entry

TINY = """
[tiny-a]
aliases = {aliases}
layers = 2
hidden = 64
ffn_hidden = 256
heads = 4
vocab = 1000
seq_len = 128
"""


def test_deepseek_r1_and_v3_1_are_priced_as_deepseek_v3() -> None:
    v3 = load_entry("deepseek-v3", use_env=False)
    for alias in ("deepseek-r1", "DeepSeek-V3.1", " deepseek-r1 "):
        entry = load_entry(alias, use_env=False)
        assert entry is v3 and entry.model.name == "deepseek-v3"
    assert "deepseek-r1" not in list_models(use_env=False)  # one id per shape in the listing


def test_the_model_json_names_its_aliases() -> None:
    out = CliRunner().invoke(app, ["models", "deepseek-r1", "--json"])
    assert out.exit_code == 0, out.output
    row = json.loads(out.output)
    assert row["name"] == "deepseek-v3" and row["aliases"] == ["deepseek-r1", "deepseek-v3.1"]


def test_a_user_alias_resolves_and_an_id_wins_over_an_alias(tmp_path: Path) -> None:
    (tmp_path / "a.toml").write_text(TINY.format(aliases='["tiny-b"]'))
    assert load_entry("tiny-b", extra_dirs=[tmp_path], use_env=False).model.name == "tiny-a"
    with pytest.raises(UnknownNameError):
        load_entry("tiny-c", extra_dirs=[tmp_path], use_env=False)


@pytest.mark.parametrize(
    ("aliases", "message"),
    [
        ('"tiny-b"', "aliases must be a list of model ids"),
        ('["tiny-b", 3]', "aliases must be a list of model ids"),
        ('[""]', "aliases must be a list of model ids"),
    ],
)
def test_bad_aliases_are_refused_naming_the_field(tmp_path: Path, aliases: str, message: str) -> None:
    (tmp_path / "a.toml").write_text(TINY.format(aliases=aliases))
    with pytest.raises(ClusterSimError, match=message) as error:
        load_entry("tiny-a", extra_dirs=[tmp_path], use_env=False)
    assert "aliases" in str(error.value)


def test_an_alias_that_names_another_model_is_refused(tmp_path: Path) -> None:
    clash = TINY.format(aliases='["tiny-z"]') + TINY.replace("[tiny-a]", "[tiny-z]").format(aliases="[]")
    (tmp_path / "a.toml").write_text(clash)
    with pytest.raises(ClusterSimError, match="alias 'tiny-z' already names model 'tiny-z'"):
        load_entry("tiny-a", extra_dirs=[tmp_path], use_env=False)
    twice = TINY.format(aliases='["tiny-y"]') + TINY.replace("[tiny-a]", "[tiny-x]").format(aliases='["tiny-y"]')
    (tmp_path / "a.toml").write_text(twice)
    with pytest.raises(ClusterSimError, match="alias 'tiny-y' already names model 'tiny-a'"):
        load_entry("tiny-a", extra_dirs=[tmp_path], use_env=False)
