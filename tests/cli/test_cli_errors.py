"""Errors are one line on stderr with exit code 2 (JSON with --json), usage mistakes included; values out of
range are refused at the boundary; machine output is never wrapped and never holds NaN (issue 11)."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli import common
from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}


def run(*args: str, **env: str | None):
    return runner.invoke(app, list(args), env={**ENV, **env})


def refused(result, *parts: str) -> str:
    """The one error line of a refused command, after checking exit code 2, no traceback and no stdout."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["train", "--tpx", "3"], ["No such option: --tpx", "--tp"]),
        (["serve", "llama2-70b", "--tp", "abc"], ["--tp", "abc"]),
        (["hw", "lst"], ["No such command"]),
        (["collective"], ["Missing argument"]),
    ],
)
def test_usage_errors_are_one_line_not_a_box(args, parts):
    line = refused(run(*args), *parts)
    assert line.startswith("error: clustersim") and "Usage:" not in line


def test_with_json_an_error_is_a_json_object_on_stderr():
    result = run("hw", "show", "h100-sxn", "--json")
    payload = json.loads(refused(result))
    assert payload["field"] == "catalog_entry" and payload["value"] == "h100-sxn"
    assert payload["error"].startswith("unknown catalog entry 'h100-sxn'")
    assert "did you mean h100-sxm" in payload["error"]
    usage = json.loads(refused(run("serve", "llama2-70b", "--pp", "0", "--json")))
    assert usage["field"] == "--pp" and usage["value"] == "0"
    option = json.loads(refused(run("train", "llama3-8b", "--tokens", "0.5", "--json")))
    assert option["field"] == "--tokens" and option["value"] == 0.5


def test_a_long_value_is_not_echoed_back_whole():
    line = refused(run("hw", "show", "x" * 100_000))
    assert len(line) < 2_000 and "100,002 characters" in line


def test_piped_output_is_not_wrapped():
    result = run("hw", "list", COLUMNS=None)
    assert result.exit_code == 0
    rows = [line for line in result.stdout.splitlines() if "fsx-persistent-2-1000" in line]
    assert len(rows) == 1 and "disk write/TiB" in rows[0]  # the whole row, its last column included


def test_json_never_holds_nan_it_is_reported_as_a_bug(capsys):
    with pytest.raises(SystemExit) as exit_info:
        common.emit_json({"step_s": float("nan")})
    assert exit_info.value.code == common.BUG_EXIT
    captured = capsys.readouterr()
    assert captured.out == "" and "internal error" in captured.err and "NaN" not in captured.out


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (["collective", "all_reduce", "--factor", "nan"], ["--factor", "nan", "finite"]),
        (["collective", "all_reduce", "--factor", "inf"], ["--factor", "inf"]),
        (["collective", "all_reduce", "--factor", "1"], ["--factor", "> 1"]),
        (["collective", "all_reduce", "--max", "1e30"], ["--max", "1 TiB"]),
        (["collective", "all_reduce", "--min", "0.5"], ["--min", "0.5"]),
        (["collective", "all_reduce", "--nodes", "0"], ["--nodes", "0"]),
        (["collective", "all_reduce", "--min", "1", "--max", "1T", "--factor", "1.01"], ["sizes", "--factor"]),
        (["serve", "llama2-70b", "--tpot-target", "nan"], ["--tpot-target", "nan"]),
        (["serve", "llama2-70b", "--rate", "inf"], ["--rate", "inf"]),
        (["serve", "llama2-70b", "--ttft-target", "-1"], ["--ttft-target"]),
        (["serve", "llama2-70b", "--pp", "0"], ["--pp", "0"]),
        (["serve", "llama2-70b", "--pp", "-1"], ["--pp", "-1"]),
        (["serve", "llama2-70b", "--tp", "0"], ["--tp", "0"]),
        (["serve", "llama2-70b", "--input", "0"], ["--input", "0"]),
        (["serve", "llama2-70b", "--batch", "-5"], ["--batch", "-5"]),
        (["train", "llama3-8b", "--tokens", "0.5"], ["--tokens", "0.5"]),
        (["train", "llama3-8b", "--tokens", "nan"], ["nan"]),
        (["train", "llama3-8b", "--tokens", "1M"], ["less than one step", "4,194,304"]),
        (["train", "llama3-8b", "--global-batch", "1000000000000"], ["--global-batch", "1000000000000"]),
        (["train", "llama3-8b", "--global-batch", "16000000", "--tokens", "100B"], ["less than one step"]),
        (["train", "llama3-8b", "--nodes", "0"], ["--nodes", "0"]),
        (["train", "llama3-8b", "--micro-batch", "1000000000000"], ["--micro-batch", "1000000000000"]),
    ],
)
def test_numbers_out_of_range_are_refused_at_the_boundary(args, parts):
    refused(run(*args), *parts)


def test_serving_messages_name_the_real_problem():
    refused(run("serve", "llama2-70b", "--pp", "16"), "--pp 16", "8 devices")
    line = refused(run("serve", "llama3.1-405b", "--instance", "p5.48xlarge"), "does not fit one instance", "fp8")
    assert "larger tp" not in line
    assert "larger tp" in refused(run("serve", "llama3.1-405b", "--instance", "p5.48xlarge", "--tp", "4"))


def test_validation_files_that_say_nothing_or_too_much_are_refused(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    refused(run("validate", str(empty)), "no cases")
    zero_nodes = tmp_path / "nodes.jsonl"
    zero_nodes.write_text('{"id": "a", "kind": "training", "measured": {"mfu": 0.4}, "system": {"nodes": 0}}\n')
    refused(run("validate", str(zero_nodes)), "system.nodes", "greater than or equal to 1")
    long_id = tmp_path / "long.jsonl"
    long_id.write_text(json.dumps({"id": "y" * 100_000, "kind": "training", "measured": {"mfu": 0.4}}) + "\n")
    line = refused(run("validate", str(long_id)), "at most 256 characters")
    assert len(line) < 1_000


def test_files_that_are_not_utf8_are_refused(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_bytes(b'[hopper]\ngemm_max = 0.9\nsource = "\xff\xfe"\n')
    zoo = tmp_path / "zoo"
    zoo.mkdir()
    (zoo / "m.toml").write_bytes(bad.read_bytes())
    layout = ["--nodes", "1", "--tp", "8", "--pp", "1"]
    refused(run("train", "llama3-8b", *layout, "--efficiency", str(bad)), "bad.toml", "UTF-8")
    refused(run("train", str(bad), *layout), "bad.toml", "UTF-8")
    refused(run("models", "--models", str(zoo)), "m.toml", "UTF-8")
    refused(run("hw", "list", "--catalog", str(bad)), "bad.toml", "UTF-8")
