"""``validate`` gives each case an interval from the residuals of every other source, and reports coverage."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.cli.app import app
from clustersim.intervals import Interval, Residual, ResidualTable
from clustersim.validation.intervals import coverage
from clustersim.validation.run import validate_cases
from tests.validation.helpers import SYSTEM, times, write_jsonl


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load_catalog(use_env=False)


def case(case_id: str, source: str, busbw: float = 100.0) -> dict[str, Any]:
    return {"id": case_id, "kind": "collective", "source": f"{source} table 3", "system": SYSTEM, "op": "all_reduce",
            "size_bytes": 1 << 26, "measured": {"busbw_GBps": busbw}}  # fmt: skip


def residuals(source: str, values: list[float]) -> list[Residual]:
    return [
        Residual(f"{source}-{k}", source, "collective", "hopper", "h100-sxm", "nccl-tests", 16, "busbw_GBps", r)
        for k, r in enumerate(values)
    ]


# 30 residuals of "own" are all far off (|r| = 1), 30 of "other" small (|r| up to 0.3)
TABLE = ResidualTable(tuple(residuals("own", [1.0, -1.0] * 15) + residuals("other", [0.01 * k for k in range(1, 31)])))


def test_a_case_never_sizes_its_own_interval(tmp_path: Path, catalog: Catalog) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [case("mine", "own"), case("new", "third")])
    report = validate_cases([path], catalog, {"collective": times(1.1)}, level=0.8, residuals=TABLE)
    mine, new = report.cases
    assert mine.interval is not None and new.interval is not None
    # "own" is scored with "other"'s residuals alone: the 80% bound is the 25th of 30 |r| = 0.25
    assert mine.interval.high == pytest.approx(110.0 * math.exp(0.25))
    assert mine.interval.low == pytest.approx(110.0 * math.exp(-0.25))
    assert mine.interval.contains(100.0)  # predicted 10% high, inside +-25%
    assert "30 cases" in mine.interval.basis
    # a source the residuals never saw gets all 60: half of them are 1.0, so the 80% bound is 1.0
    assert new.interval.high == pytest.approx(110.0 * math.e) and "60 cases" in new.interval.basis
    (file,) = report.files
    assert file.coverage == 1.0
    assert file.median_width == pytest.approx(statistics.median([2 * math.sinh(0.25), 2 * math.sinh(1.0)]))


def test_coverage_and_width_arithmetic() -> None:
    pairs = [
        (10.0, 10.0, Interval(9.0, 11.0, 0.8)),  # inside, width 0.2
        (12.0, 10.0, Interval(9.0, 11.0, 0.8)),  # outside, width 0.2
        (5.0, 5.0, Interval(4.0, 7.0, 0.8)),  # inside, width 0.6
        (1.0, 1.0, None),  # no interval: not counted
    ]
    share, width = coverage(pairs) or (None, None)
    assert share == pytest.approx(2 / 3) and width == pytest.approx(0.2)
    assert coverage([(1.0, 1.0, None)]) is None


def test_the_json_has_an_interval_per_case_and_coverage_per_file_and_source(tmp_path: Path, catalog: Catalog) -> None:
    path = write_jsonl(tmp_path / "c.jsonl", [case("a", "own", 100.0), case("b", "own", 1000.0), case("c", "x")])
    report = validate_cases([path], catalog, {"collective": times(1.1)}, level=0.9, residuals=TABLE)
    payload = report.to_json()
    assert payload["level"] == 0.9
    for row in payload["cases"]:
        assert set(row["interval"]) == {"low", "high", "level"} and row["interval"]["level"] == 0.9
        assert row["interval"]["low"] <= row["predicted"] <= row["interval"]["high"]
    (file,) = payload["files"]
    assert file["coverage"] == pytest.approx(1.0) and file["median_width"] > 0
    sources = {s["source"]: s for s in payload["sources"]}
    assert set(sources) == {"own", "x"}
    assert sources["own"]["coverage"] == 1.0 and sources["own"]["median_width"] > 0


def test_memory_cases_have_no_interval(tmp_path: Path, catalog: Catalog) -> None:
    row = {"id": "m", "kind": "memory", "source": "s", "system": SYSTEM, "measured": {"total_GiB_per_device": 10.0}}
    path = write_jsonl(tmp_path / "m.jsonl", [row])
    report = validate_cases([path], catalog, {"memory": times(1.0)}, residuals=TABLE)
    assert report.cases[0].interval is None
    assert report.files[0].coverage is None and report.to_json()["cases"][0]["interval"] is None


def test_validate_prints_coverage_and_takes_a_level(tmp_path: Path) -> None:
    runner = CliRunner()
    row = case("a", "crazyguitar/aws-gpu-communication-benchmark", 150.0) | {
        "system": SYSTEM | {"instance": "p5.48xlarge"}
    }
    path = write_jsonl(tmp_path / "c.jsonl", [row])
    result = runner.invoke(app, ["validate", str(path), "--level", "0.9"], env={"COLUMNS": "250"})
    assert result.exit_code == 0, result.output
    assert "90% interval" in result.stdout and "coverage of 90%" in result.stdout
    payload = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).stdout)
    assert payload["level"] == 0.8 and set(payload["cases"][0]["interval"]) == {"low", "high", "level"}
    assert "coverage" in payload["files"][0] and "median_width" in payload["sources"][0]
