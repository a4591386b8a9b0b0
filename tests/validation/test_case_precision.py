"""The case format's number formats: the reader takes the six names and refuses anything else by field."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.validation.cases import PRECISIONS, default_paths, read_all, read_cases


def _write(tmp_path: Path, **fields: object) -> Path:
    case = {"id": "c1", "kind": "training", "measured": {"step_time_s": 1.0}} | fields
    path = tmp_path / "cases.jsonl"
    path.write_text(json.dumps(case) + "\n")
    return path


@pytest.mark.parametrize("precision", PRECISIONS)
def test_each_format_is_read(tmp_path: Path, precision: str):
    (case,) = read_cases(_write(tmp_path, precision=precision))
    assert case.precision == precision


@pytest.mark.parametrize(("field", "value"), [("precision", "fp4"), ("precision", "FP8"), ("kv_precision", "int4")])
def test_an_unknown_format_is_refused_naming_file_line_case_field_and_what_is_valid(
    tmp_path: Path, field: str, value: str
):
    path = _write(tmp_path, **{field: value})
    with pytest.raises(ClusterSimError) as info:
        read_cases(path)
    message = str(info.value)
    assert f"{path}, line 1, case 'c1': field '{field}': value '{value}'" in message
    assert "valid: bf16, fp16, fp8, mxfp8, nvfp4, mxfp4" in message


def test_every_shipped_case_names_a_known_format():
    cases = read_all(default_paths("training.jsonl") + default_paths("inference.jsonl"))
    assert {c.precision for c in cases} <= {*PRECISIONS, None}
    assert {"nvfp4", "mxfp8"} <= {c.precision for c in cases if c.kind == "training"}
