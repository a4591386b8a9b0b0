"""A model argument that no file can have (a NUL byte) is refused in one line naming the model, not a crash."""

import json

from typer.testing import CliRunner

from clustersim.cli.app import app

ENV = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "200"}


def test_a_model_name_with_a_nul_byte_is_refused_naming_the_model():
    result = CliRunner().invoke(app, ["train", "/z\x00x", "--nodes", "4", "--json"], env=ENV)
    assert result.exit_code == 2, result.output
    payload = json.loads(result.output)
    assert payload["field"] == "model" and "NUL" in payload["error"]
