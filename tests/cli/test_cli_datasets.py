"""``clustersim datasets``: the request sets listed with their lengths, one set's figures with their sources,
--json equal to the registry, an unknown name refused in one line, and the user's files listed too."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.present.datasets import format_tokens
from clustersim.serving.datasets import ENV_VAR, SIDES, Percentiles, request_dataset, request_datasets

runner = CliRunner()
ENV = {ENV_VAR: "", "COLUMNS": "200"}


def run(*args: str, **env: str):
    return runner.invoke(app, ["datasets", *args], env={**ENV, **env})


def row_of(output: str, name: str) -> list[str]:
    """The cells of the table row that starts with ``name``."""
    for line in output.splitlines():
        cells = [cell.strip() for cell in line.strip("│ ").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in:\n{output}")


def test_the_listing_shows_every_set_with_its_lengths():
    result = run()
    assert result.exit_code == 0, result.output
    registry = request_datasets(use_env=False)
    assert {"sharegpt", "openorca", "fixed", "random"} <= set(registry)
    for name in registry:
        assert row_of(result.stdout, name)[1] == registry[name].kind.value
    orca, cells = registry["openorca"], row_of(result.stdout, "openorca")
    assert orca.samples is not None and format_tokens(orca.samples.value) in cells
    for which in SIDES:
        mean = orca.mean(which)
        assert mean is not None and format_tokens(mean) in cells, (which, cells)
    assert orca.input.percentiles is not None
    assert format_tokens(orca.input.percentiles.values[50]) == cells[4]  # input p50
    assert row_of(result.stdout, "fixed")[2:11] == ["-"] * 9  # a generator states no lengths of its own


def test_one_set_shows_every_figure_with_its_source():
    result = run("openorca")
    assert result.exit_code == 0, result.output
    orca = request_dataset("openorca")
    assert orca.description in result.stdout and orca.used_by in result.stdout
    figures = list(orca.figures())
    assert {"samples", "input.mean", "input.percentiles", "output.mean"} <= {name for name, _ in figures}
    for name, figure in figures:
        line = next(line for line in result.stdout.splitlines() if line.startswith(f"│ {name} "))
        assert figure.source in line and figure.provenance.value in line and figure.confidence.value in line, name
        if figure.note:
            assert figure.note in result.stdout


def test_a_set_whose_figures_are_not_its_own_says_so():
    cnn = request_dataset("cnn_dailymail")
    result = run("cnn_dailymail")
    assert result.exit_code == 0, result.output
    assert cnn.input.mean is not None and cnn.input.mean.note is not None
    assert "secondary" in result.stdout and cnn.input.mean.note in result.stdout


def test_json_list_holds_every_set_as_the_registry_has_it():
    result = run("--json")
    assert result.exit_code == 0, result.output
    rows = {row["name"]: row for row in json.loads(result.stdout)}
    registry = request_datasets(use_env=False)
    assert set(rows) == set(registry)
    for name, dataset in registry.items():
        row = rows[name]
        assert row["kind"] == dataset.kind.value and row["used_by"] == dataset.used_by
        for dotted, figure in dataset.figures():
            side, _, stat = dotted.rpartition(".")
            got = (row[side] if side else row)[stat]
            assert got["source"] == figure.source and got["provenance"] == figure.provenance.value, dotted
            assert got["confidence"] == figure.confidence.value and got["note"] == figure.note
            if isinstance(figure, Percentiles):
                assert {int(p): v for p, v in got["value"].items()} == figure.values
            else:
                assert got["value"] == figure.value and isinstance(got["value"], int | float)
    assert rows["openorca"]["input"]["mean"]["value"] == registry["openorca"].mean("input")
    assert rows["openorca"]["output"]["mean"]["value"] == registry["openorca"].mean("output")
    assert rows["cnn_dailymail"]["output"]["mean"] is None  # not given: null, never a guess


def test_json_of_one_set_is_one_object():
    listed = {row["name"]: row for row in json.loads(run("--json").stdout)}
    result = run("sharegpt", "--json")
    assert result.exit_code == 0, result.output
    one = json.loads(result.stdout)
    assert isinstance(one, dict) and one == listed["sharegpt"]
    assert {"name", "kind", "description", "used_by", "input", "output"} <= set(one)
    assert one["input"]["mean"]["value"] == request_dataset("sharegpt").mean("input")


@pytest.mark.parametrize("as_json", [False, True])
def test_an_unknown_name_is_one_line_naming_it_and_the_known_sets(as_json):
    result = run("orca", *(["--json"] if as_json else []))
    assert result.exit_code == 2 and result.stdout == "" and "Traceback" not in result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    line = json.loads(lines[0])["error"] if as_json else lines[0]
    assert "'orca'" in line and "did you mean openorca" in line
    assert all(name in line for name in request_datasets(use_env=False))


def test_a_users_file_adds_a_set_to_the_listing(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text(
        '[team_chat]\nkind = "dataset"\ndescription = "our chat logs"\nused_by = "our team"\n'
        'input = { mean = { value = 612.5, source = "our logs, 2026-11" } }\n'
        'output = { mean = { value = 150, source = "our logs, 2026-11" } }\n',
        encoding="utf-8",
    )
    listing = run(**{ENV_VAR: str(path)})
    assert listing.exit_code == 0, listing.output
    cells = row_of(listing.stdout, "team_chat")
    assert cells[1] == "dataset" and "612.5" in cells and "150" in cells and cells[-1] == "our team"
    assert row_of(listing.stdout, "openorca")  # the packaged sets stay
    rows = {row["name"]: row for row in json.loads(run("--json", **{ENV_VAR: str(path)}).stdout)}
    mean = request_datasets([path], use_env=False)["team_chat"].input.mean
    assert mean is not None and rows["team_chat"]["input"]["mean"] == {
        "value": 612.5,
        "provenance": mean.provenance.value,
        "confidence": mean.confidence.value,
        "source": "our logs, 2026-11",
        "note": None,
    }
    described = run("team_chat", **{ENV_VAR: str(path)})
    assert described.exit_code == 0 and "our logs, 2026-11" in described.stdout
    assert "team_chat" not in run().stdout  # without the file it is gone


def test_a_bad_users_file_is_one_line_naming_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[x]\nkind = "set"\ndescription = "desc"\nused_by = "user"\n', encoding="utf-8")
    result = run(**{ENV_VAR: str(path)})
    assert result.exit_code == 2 and len(result.stderr.splitlines()) == 1
    assert "bad.toml" in result.stderr and "kind" in result.stderr
