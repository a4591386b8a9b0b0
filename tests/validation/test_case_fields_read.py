"""Every field a bundled case states is one the reader takes: a field it drops is a silent wrong answer.

The format lets readers ignore unknown fields, and clustersim's case models do (``extra="ignore"``); so the
Llama 4 rows' ``sliding_window`` was dropped for two days (2026-12-02 to 12-04) while their notes said it was
priced. Every case of the shared and the project files goes through the case models here, and a key no model
field holds fails the test unless it is listed with why dropping it changes nothing; ``validate`` names such
fields per file, for a user's own files too.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.validation.cases import default_case_files
from clustersim.validation.unread import unread_fields, unread_in_file, unread_lines

DROPPED_ON_PURPOSE = {
    "model.moe_layer_step": (
        "Llama 4 Maverick's rows state its every-other-layer MoE beside dense_layers 24: the reader prices 24 dense "
        "and 24 MoE blocks from dense_layers alone, the same FLOPs, parameters and per-layer average; read as well, "
        "the step would leave 12 MoE blocks"
    ),
}


def test_every_field_a_bundled_case_states_is_read_or_dropped_on_purpose():
    found: Counter[str] = Counter()
    files = default_case_files()
    assert len(files) == 8
    for _, path in files:
        found.update(unread_in_file(path))
    assert set(found) <= set(DROPPED_ON_PURPOSE), {k: n for k, n in found.items() if k not in DROPPED_ON_PURPOSE}
    assert found["model.moe_layer_step"] == 25  # the Maverick rows, each also stating dense_layers 24


def test_misspelled_fields_are_found_at_any_depth():
    case = {"id": "x", "model": {"layers": 2, "windw": 4, "moe": {"experts": 8, "topk": 2}}, "parallel": {"tp": 1}}
    assert unread_fields(case | {"notez": "", "parallel": {"tp": 1, "ep_overlapp": True}}) == [
        "model.windw",
        "model.moe.topk",
        "parallel.ep_overlapp",
        "notez",
    ]
    assert unread_lines({"f.jsonl": {"model.windw": 2}, "g.jsonl": {}}) == [
        "note: f.jsonl: fields no reader takes, ignored as the format allows: model.windw (2)"
    ]


def test_validate_names_a_user_files_unread_fields(tmp_path: Path):
    case = {
        "id": "mine",
        "kind": "collective",
        "source": "test",
        "system": {"accelerator": "h100-sxm", "devices": 8, "devices_per_node": 8},
        "op": "all_reduce",
        "size_bytes": 1 << 30,
        "measured": {"busbw_GBps": 400.0},
        "sofware": {"framework": "nccl-tests"},
    }
    path = tmp_path / "mine.jsonl"
    path.write_text(json.dumps(case) + "\n")
    runner = CliRunner()
    console = runner.invoke(app, ["validate", str(path)], env={"COLUMNS": "200"})
    assert console.exit_code == 0, console.output
    assert f"note: {path}: fields no reader takes, ignored as the format allows: sofware (1)" in console.stdout
    payload = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).stdout)
    assert payload["unread_fields"] == {str(path): {"sofware": 1}}
