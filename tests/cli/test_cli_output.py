"""What the commands print holds what their help promises (issue 11): hw compare --json gives every field's
value, not only the numbers; the models table shows FLOPs per token."""

import json

from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "250"}


def test_compare_json_gives_the_fields_that_are_not_figures():
    result = runner.invoke(app, ["hw", "compare", "h100-sxm", "trainium2", "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    fields = {row["field"]: row for row in json.loads(result.stdout)["fields"]}
    assert fields["vendor"]["values"] == {"h100-sxm": "nvidia", "trainium2": "aws"}
    assert fields["family"]["values"] == {"h100-sxm": "hopper", "trainium2": "trainium"}
    assert fields["form_factor"]["values"]["trainium2"] == "asic_module"
    assert fields["memory_type"]["values"]["h100-sxm"] == "HBM3"
    assert fields["scaleup_link"]["values"] == {"h100-sxm": "nvlink-4", "trainium2": "neuronlink-v3"}
    assert fields["memory_bytes"]["values"]["h100-sxm"] == 80 * 2**30
    assert fields["vendor"]["ratios_to_first"] == {"h100-sxm": None, "trainium2": None}


def test_the_models_table_shows_flops_per_token():
    table = runner.invoke(app, ["models"], env=ENV)
    assert table.exit_code == 0 and "FLOPs/token" in table.stdout
    flops = json.loads(runner.invoke(app, ["models", "llama3-8b", "--json"], env=ENV).stdout)["model_flops_per_token"]
    row = next(line for line in table.stdout.splitlines() if "llama3-8b " in line)
    assert f"{flops / 1e9:.4g}B" in row
