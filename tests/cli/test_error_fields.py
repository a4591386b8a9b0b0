"""A refusal with --json names what was wrong: its "field" is the option or field at fault, never null."""

import json
import shlex

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

# (bad command line, the field its JSON error names)
BAD = [
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --tokens 15X", "--tokens"),
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --tp 8 --pp 2 --global-batch 7", "global_batch"),
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --tp 8 --pp 2 --vp 3", "pp"),
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --precision fp4", "--precision"),
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --bogus", "--bogus"),
    ("train llama3-70b --instance p5.48xlarge --nodes 16 --checkpoint-every 5x", "--checkpoint-every"),
    ("serve llama2-70b --instance p5.48xlarge --tp 3", "tp"),
    ("serve llama3-8b --instance p5.48xlarge --tp 4 --pp 3 --output 128", "pp"),
    ("serve llama3-70b --output 1024 --ttft-target 0.3 --tpot-target 0.1 --compare trn1.32xlarge", "ttft_target_s"),
    ("collective all_reduce --instance p5.48xlarge --nodes 16 --min 8 --max 8X", "--max"),
    ("fabric compare --instance p5.48xlarge --nodes 16 --size 1X", "--size"),
    ("fabric compare --instance p5.48xlarge --nodes 16 --routing ecmp", "--routing"),
    ("reliability --nodes 2048 --work 54x", "--work"),
    ("transport datapath --instance p5.48xlarge --message 4Q", "--message"),
    ("collective all_gather --nodes 4 --algo tree", "algorithm"),
    ("serve --instance p5.48xlarge --tp 1", "model"),
    ("train --instance p5.48xlarge --nodes 2", "model"),
    ("train llama3-8b --instance p5.48xlarge --nodes 1 --price bogus", "--price"),
    ("train llama3-8b --instance p5.48xlarge --nodes 1 --precision fp9", "--precision"),
    ("hw compare h100-sxm", "names"),
    ("train llama3-8b --instance p5.48xlarge --nodes 1 --tp 16", "layout"),
    ("collective all_reduce --nodes 4 extra", "arguments"),
    ("serve llama3.1-405b --instance p5.48xlarge --pp 2", "model"),
    ("train llama3.1-405b --instance p5.48xlarge --nodes 2", "nodes"),
    ("train llama3-8b --instance p5.48xlarge --nodes 1 --precision fp8 --compare p4d.24xlarge", "--compare"),
    ("train llama3-8b --instance p6-b200.48xlarge --nodes 1 --precision mxfp8 --compare p5.48xlarge", "--compare"),
    ("storage checkpoint llama3-8b --nodes 2 --storage fsx:PERSISTENT_2-1000:1GiB", None),
]


@pytest.mark.parametrize("command,field", BAD, ids=[c for c, _ in BAD])
def test_a_json_error_names_its_field(command: str, field: str | None) -> None:
    result = CliRunner().invoke(app, [*shlex.split(command), "--json"])
    assert result.exit_code == 2, result.output
    error = json.loads(result.stderr.strip().splitlines()[-1])
    assert error["field"] is not None, f"`clustersim {command} --json` names no field: {error}"
    if field is not None:
        assert error["field"] == field, error


def test_a_bad_scenario_or_catalog_file_names_the_field_or_the_file(tmp_path) -> None:
    scenario = tmp_path / "serve.toml"
    scenario.write_text('kind = "serving"\n[system]\nnodes = 0\n', encoding="utf-8")
    result = CliRunner().invoke(app, ["serve", "--scenario", str(scenario), "--json"])
    error = json.loads(result.stderr.strip().splitlines()[-1])
    assert result.exit_code == 2 and error["field"].startswith("scenario"), error
    catalog = tmp_path / "catalog"
    catalog.mkdir()
    (catalog / "mine.toml").write_bytes(b"\xff\xfe not utf-8")
    result = CliRunner().invoke(app, ["hw", "list", "--catalog", str(catalog), "--json"])
    error = json.loads(result.stderr.strip().splitlines()[-1])
    assert result.exit_code == 2 and error["field"] == "file" and error["value"].endswith("mine.toml"), error


def test_a_bad_ground_truth_file_or_device_split_names_a_field(tmp_path) -> None:
    cases = tmp_path / "cases.jsonl"
    cases.write_text("[1, 2]\n", encoding="utf-8")
    for args, field in (
        (["validate", str(cases)], "file"),
        (["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--devices-per-node", "32"], None),
    ):
        result = CliRunner().invoke(app, [*args, "--json"])
        error = json.loads(result.stderr.strip().splitlines()[-1])
        assert result.exit_code == 2 and error["field"] is not None, error
        assert field is None or error["field"] == field, error


def test_a_scenario_layout_that_does_not_divide_the_devices_names_tp() -> None:
    # Found by the fuzz: a scenario file with tp 3 on 8 devices and no dp gave "field": null.
    from clustersim.catalog.registry import load_catalog
    from clustersim.errors import ClusterSimError
    from clustersim.scenario.schema import LayoutSpec
    from clustersim.scenario.training import layout_for
    from clustersim.system import system_for_instance

    system = system_for_instance(load_catalog(use_env=False), "p5.48xlarge", 1)
    with pytest.raises(ClusterSimError, match="does not divide the 8 devices") as info:
        layout_for(LayoutSpec(tp=3, pp=1), system)
    assert (info.value.field, info.value.value) == ("tp", 3)
