"""The packaged residuals: made from the calibration and cases in force, read strictly, written back whole."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.intervals import Residual, load_residuals
from clustersim.intervals.residuals import read_residuals, residuals_toml, round_significant
from clustersim.validation.intervals import input_files, inputs_fingerprint, log_residual


def test_the_residuals_were_made_from_the_calibration_and_cases_in_force() -> None:
    header = load_residuals().header
    assert header["inputs"] == [name for name, _ in input_files()]
    assert header["fingerprint"] == inputs_fingerprint(), (
        "the calibration or case files changed since the interval residuals were made: rerun "
        "`python benchmarks/calibrate_intervals.py --write` (a few minutes; it cross-validates every source)"
    )


def test_every_packaged_residual_has_a_case_and_a_known_kind() -> None:
    table = load_residuals()
    assert len(table.residuals) > 300
    assert len({(r.id, r.field) for r in table.residuals}) == len(table.residuals)
    assert {r.field for r in table.residuals if r.id.startswith("mlperf41_")} == {
        "output_tokens_per_s",
        "ttft_s",
        "tpot_s",
    }
    assert all(r.devices >= 1 and abs(r.r) < 5 for r in table.residuals)


def test_a_file_written_reads_back_the_same(tmp_path: Path) -> None:
    rows = [
        Residual('a "quoted" id', "src", "training", "hopper", "h100-sxm", "megatron", 8, "step_time_s", -0.01234),
        Residual("b", "src", "training", "hopper", "h100-sxm", "fsdp", 8, "step_time_s", 0.2, ("pipeline", "fp8")),
        Residual("c", "src", "collective", "trn1", "trainium1", "nccom-test", 64, "busbw_GBps", 2.3, size_bytes=2**20),
    ]
    path = tmp_path / "r.toml"
    path.write_text(residuals_toml(rows, {"fingerprint": "sha256:x", "inputs": ["a", "b"], "min_cases": 20}))
    table = read_residuals(path)
    assert table.residuals == tuple(rows)
    assert table.header == {"fingerprint": "sha256:x", "inputs": ["a", "b"], "min_cases": 20}


@pytest.mark.parametrize(
    ("row", "problem"),
    [
        ('{ id = "a" }', "missing"),
        (
            '{ id = "a", source = "s", kind = "storage", chip = "c", accelerator = "x", framework = "f", field = "g", '
            "devices = 1, r = 0.1 }",
            r"kind 'storage' \(valid: training, inference, collective, memory\)",
        ),
        (
            '{ id = "a", source = "s", kind = "training", chip = "c", accelerator = "x", framework = "f", field = "g", '
            "devices = 0, r = 0.1 }",
            "devices must be a positive integer",
        ),
        (
            '{ id = "a", source = "s", kind = "training", chip = "c", accelerator = "x", framework = "f", field = "g", '
            "devices = 1, r = nan }",
            "r must be a finite number",
        ),
        (
            '{ id = "a", source = "s", kind = "training", chip = "c", accelerator = "x", framework = "f", field = "g", '
            'devices = 1, r = 0.1, layout = ["pipeline", "zero-bubble"] }',
            r"layout \['pipeline', 'zero-bubble'\] \(valid: a list of pipeline, context, experts, sharded, fp8, "
            r"long_sequence, attention_dp\)",
        ),
        (
            '{ id = "a", source = "s", kind = "collective", chip = "c", accelerator = "x", framework = "f", '
            'field = "g", devices = 2, r = 0.1, size_bytes = 1.5 }',
            "size_bytes must be a whole number of bytes, got 1.5",
        ),
    ],
)
def test_a_bad_row_is_refused_naming_the_file_and_row(tmp_path: Path, row: str, problem: str) -> None:
    path = tmp_path / "r.toml"
    path.write_text(f"residuals = [\n  {row},\n]\n")
    with pytest.raises(ClusterSimError, match=rf"r\.toml: residual 1: .*{problem}"):
        read_residuals(path)


def test_every_collective_residual_has_its_message_size_and_no_other_kind_has_one() -> None:
    table = load_residuals()
    collectives = [r for r in table.residuals if r.kind == "collective"]
    assert collectives and all(r.size_bytes > 0 for r in collectives)
    assert all(r.size_bytes == 0 for r in table.residuals if r.kind != "collective")
    one = next(r for r in collectives if r.id == "nccomtest_trn1_all_reduce_2nodes_1048576B")
    assert one.size_bytes == 1048576


def test_residuals_are_of_durations_and_rounded() -> None:
    assert log_residual("step_time_s", 11.0, 10.0) == pytest.approx(0.09531, rel=1e-4)
    assert log_residual("tokens_per_s_per_device", 11.0, 10.0) == pytest.approx(-0.09531, rel=1e-4)  # a rate: flipped
    for memory in ("total_GiB_per_device", "reserved_GiB_per_device"):  # bytes go as durations: more is positive
        assert log_residual(memory, 11.0, 10.0) == pytest.approx(0.09531, rel=1e-4)
    assert round_significant(0.0123456) == 0.01235 and round_significant(-123456.0) == -123500.0


def test_the_project_cases_of_sources_no_fit_used_are_held_out_residuals() -> None:
    from clustersim.catalog.registry import load_catalog
    from clustersim.validation.cases import project_case_files
    from clustersim.validation.unfitted import unfitted_residuals

    rows, left = unfitted_residuals(project_case_files(), load_catalog(use_env=False))
    sources = {r.source for r in rows}
    assert "aws-samples/awsome-distributed-training" not in sources  # its bundled cases were fitted on
    assert any("its source, aws-samples/awsome-distributed-training, was fitted on" in why for _, why in left)
    assert {r.kind for r in rows} <= {"training", "collective", "inference", "memory"} and rows
    packaged = {r.id for r in load_residuals().residuals}
    assert {r.id for r in rows} <= packaged  # the packaged residuals include them


def test_memory_residuals_are_every_published_peak_held_out() -> None:
    """No memory constant is fitted: every memory case's residual is the packaged model's, bundled and project's,
    of its primary figure (Korthikanti's total, torchtitan's and torchao's reserved peak), from three sources."""
    from clustersim.validation.cases import bundled_dir, primary_field, project_case_files, read_cases

    memory = [c for p in (*project_case_files(), bundled_dir() / "memory.jsonl") if p.name == "memory.jsonl"
              for c in read_cases(p)]  # fmt: skip
    rows = {r.id: r for r in load_residuals().residuals if r.kind == "memory"}
    assert set(rows) == {c.id for c in memory}
    assert all(rows[c.id].field == primary_field(c) for c in memory)
    assert {r.source for r in rows.values()} == {"Korthikanti", "pytorch/torchtitan", "pytorch/ao"}
    assert all(-0.2 < r.r < 0.6 for r in rows.values())  # the model errs low on torchtitan's pipelined 405B (+0.44)
