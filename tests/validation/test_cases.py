"""Typed ground-truth cases: reading, unknown fields, clear errors, primary fields, plain mappings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.validation.cases import (
    PRIMARY_FIELDS,
    Case,
    CaseModel,
    CaseSystem,
    as_case,
    bundled_case_files,
    primary_field,
    read_cases,
)
from tests.validation.helpers import MODEL, collective, training, write_jsonl


def test_read_cases_skips_blank_lines_and_ignores_unknown_fields(tmp_path: Path) -> None:
    row = collective("a", 100.0) | {"extra_context": {"nccl": "2.21"}, "notes": None}
    path = write_jsonl(tmp_path / "c.jsonl", [row, "", "   ", collective("b", 90.0)])
    cases = read_cases(path)
    assert [c.id for c in cases] == ["a", "b"]
    assert cases[0].size_bytes == 1 << 26 and cases[0].op == "all_reduce" and cases[0].model is None
    assert not hasattr(cases[0], "extra_context")


def test_sub_objects_are_typed_and_ignore_unknown_fields(tmp_path: Path) -> None:
    row = training("t", 2.0)
    row["model"] = MODEL | {
        "rope_scaling": {"factor": 8.0},
        "attention_variant": "flash",
        "moe": {"experts": 8, "top_k": 2, "router": "topk"},
    }
    row["system"] = {"accelerator": "h100-sxm", "devices": 16, "inter_node_Gbps_per_node": 3200, "rack": "A7"}
    row["parallel"] = {"tp": 8, "dp": 2, "pp": 1, "global_batch": 64, "micro_batch": None, "scheduler": "1f1b"}
    row["workload"] = {"input_tokens": None, "output_tokens": 128, "scenario": "offline", "batch": 8, "qps": 3}
    (case,) = read_cases(write_jsonl(tmp_path / "t.jsonl", [row]))
    assert isinstance(case.model, CaseModel) and isinstance(case.system, CaseSystem)
    assert case.model.layers == 2 and case.model.moe is not None and case.model.moe.top_k == 2
    assert case.model.shape() == MODEL | {"moe": {"experts": 8, "top_k": 2}}  # unknown and null fields left out
    assert case.system.devices_per_node is None and case.system.inter_node_Gbps_per_node == 3200.0
    assert case.parallel is not None and (case.parallel.tp, case.parallel.micro_batch) == (8, None)
    assert case.workload is not None and case.workload.output_tokens == 128.0 and case.workload.input_tokens is None
    with pytest.raises(ValueError, match="frozen"):
        case.model.layers = 3  # type: ignore[misc]


def test_null_measured_values_are_dropped(tmp_path: Path) -> None:
    row = training("t", 2.0)
    row["measured"] = {"step_time_s": None, "mfu": 0.4}
    (case,) = read_cases(write_jsonl(tmp_path / "t.jsonl", [row]))
    assert case.measured == {"mfu": 0.4}
    assert primary_field(case) == "mfu"


def _with(part: str, field: str, value: object) -> str:
    row = training("x", 1.0) | {"parallel": {"tp": 1}, "workload": {"output_tokens": 8}}
    row[part] = dict(row[part]) | {field: value}
    return json.dumps(row)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("{not json", "invalid JSON"),
        ("[1, 2]", "JSON object"),
        (json.dumps({"kind": "training", "measured": {}}), "id"),
        (json.dumps({"id": "x", "measured": {}}), "kind"),
        (json.dumps({"id": "x", "kind": "training"}), "measured"),
        (json.dumps({"id": "x", "kind": "serving", "measured": {}}), "unknown kind 'serving'"),
        (json.dumps({"id": "x", "kind": "training", "measured": {"mfu": "high"}}), "measured.mfu"),
        (json.dumps(collective("a", 1.0)), "duplicate id 'a' (first on line 1)"),
        (_with("model", "layers", "many"), "'model.layers': value 'many'"),
        (_with("system", "devices", 2.5), "'system.devices': value 2.5"),
        (_with("parallel", "tp", [8]), "'parallel.tp'"),
        (_with("workload", "output_tokens", "long"), "'workload.output_tokens'"),
        (_with("model", "moe", {"experts": "eight"}), "'model.moe.experts'"),
        (json.dumps(collective("y", 1.0) | {"size_bytes": "1GiB"}), "'size_bytes'"),
    ],
)
def test_bad_line_names_file_line_and_field(tmp_path: Path, line: str, expected: str) -> None:
    path = write_jsonl(tmp_path / "bad.jsonl", [collective("a", 1.0), "", line])
    with pytest.raises(ClusterSimError) as info:
        read_cases(path)
    message = str(info.value)
    assert f"{path}, line 3" in message
    assert expected in message


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match=r"nowhere\.jsonl"):
        read_cases(tmp_path / "nowhere.jsonl")


def test_bundled_ground_truth_reads_with_a_primary_field_for_every_case() -> None:
    files = bundled_case_files()
    assert [path.name for path in files] == ["collectives.jsonl", "inference.jsonl", "memory.jsonl", "training.jsonl"]
    for path in files:
        cases = read_cases(path)
        assert cases, path
        for case in cases:
            assert primary_field(case) in PRIMARY_FIELDS[case.kind]


@pytest.mark.parametrize(
    ("kind", "measured", "expected"),
    [
        ("training", {"mfu": 0.5, "tokens_per_s_per_device": 3000.0, "step_time_s": 1.0}, "step_time_s"),
        ("training", {"mfu": 0.5, "hw_tflops_per_device": 400.0}, "hw_tflops_per_device"),
        ("training", {"mfu": 0.5, "model_tflops_per_device": 300.0}, "model_tflops_per_device"),
        ("collective", {"time_us": 10.0, "algbw_GBps": 50.0, "busbw_GBps": 90.0}, "busbw_GBps"),
        ("collective", {"time_us": 10.0, "algbw_GBps": 50.0}, "algbw_GBps"),
        ("memory", {"activations_GiB_per_device": 10.0, "total_GiB_per_device": 60.0}, "total_GiB_per_device"),
        ("memory", {"activations_GiB_per_device": 10.0, "weights_and_optimizer_GiB_per_device": 40.0},
         "weights_and_optimizer_GiB_per_device"),
        ("inference", {"ttft_s": 0.2, "output_tokens_per_s": 5000.0}, "output_tokens_per_s"),
    ],
)  # fmt: skip
def test_primary_field_order(kind: str, measured: dict[str, float], expected: str) -> None:
    assert primary_field(Case.model_validate({"id": "x", "kind": kind, "measured": measured})) == expected


def test_no_primary_field_is_an_error() -> None:
    case = Case.model_validate({"id": "x", "kind": "inference", "measured": {"ttft_s": 0.2}})
    with pytest.raises(ClusterSimError, match="output_tokens_per_s"):
        primary_field(case)


def test_as_case_reads_a_plain_mapping_and_names_a_bad_field() -> None:
    case = as_case(collective("a", 1.0))
    assert isinstance(case, Case) and case.system is not None and case.system.nodes == 2
    assert as_case(case) is case
    with pytest.raises(ClusterSimError, match=r"case 'b'.*'system\.devices'"):
        as_case(collective("b", 1.0) | {"system": {"devices": "sixteen"}})
