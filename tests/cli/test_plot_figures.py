"""--plot on train, collective, storage and validate: the report's figures, drawn from the numbers the same run
prints with --json. Each is read back from its SVG (bars and points carry ids): the count of bars and points, and
their pixel sizes or positions against the JSON (proportional on a linear axis from zero, linear on any linear
axis), so a figure drawn from other numbers, or missing a point, fails."""

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.validation.cases import default_case_files

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
SVG = "{http://www.w3.org/2000/svg}"
TRAIN = ["train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "2", "--pp", "1", "--tokens", "1T"]
COLLECTIVE = ["collective", "all_reduce", "--nodes", "2"]
MEMORY_CASES = str(dict(default_case_files())["memory.jsonl"])
COMMANDS = {
    "train": TRAIN,
    "collective": COLLECTIVE,
    "storage checkpoint": ["storage", "checkpoint", "llama3.1-405b"],
    "storage striping": ["storage", "striping"],
    "validate": ["validate", MEMORY_CASES],
}


def plotted(args: list[str], path: Path) -> tuple[dict, ET.Element]:
    """The --json of ``args`` run with ``--plot path`` (an SVG), and the SVG's root."""
    result = runner.invoke(app, [*args, "--plot", str(path), "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    assert result.stderr == f"figure written to {path}\n"
    return json.loads(result.stdout), ET.parse(path).getroot()


def by_id(root: ET.Element, pattern: str) -> dict[str, ET.Element]:
    """The SVG groups whose id matches ``pattern`` (a regex, whole id)."""
    return {g.get("id", ""): g for g in root.iter(f"{SVG}g") if re.fullmatch(pattern, g.get("id", ""))}


def extent(group: ET.Element, axis: int) -> float:
    """A bar's size in pixels along ``axis`` (0: x, 1: y), from its path."""
    path = group.find(f"{SVG}path")
    assert path is not None
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?(?:e-?\d+)?", path.get("d", ""))]
    coords = numbers[axis::2]
    return max(coords) - min(coords)


def markers(group: ET.Element) -> list[tuple[float, float]]:
    """The (x, y) pixel position of every marker of a line or scatter."""
    return [(float(u.get("x", "nan")), float(u.get("y", "nan"))) for u in group.iter(f"{SVG}use")]


def assert_proportional(pixels: list[float], values: list[float]) -> None:
    """Bars from zero on a linear axis: every pixel size is the same multiple of its value."""
    assert len(pixels) == len(values) and any(v > 0 for v in values)
    scale = max(pixels) / max(values)
    assert pixels == pytest.approx([v * scale for v in values], abs=0.02)


def assert_linear(pixels: list[float], values: list[float]) -> tuple[float, float]:
    """Positions on a linear axis: pixel = a + b * value for every point; (a, b)."""
    lo, hi = values.index(min(values)), values.index(max(values))
    b = (pixels[hi] - pixels[lo]) / (values[hi] - values[lo])
    a = pixels[lo] - b * values[lo]
    assert pixels == pytest.approx([a + b * v for v in values], abs=0.02)
    return a, b


def test_train_draws_its_steps_terms_and_memory(tmp_path):
    train, root = plotted(TRAIN, tmp_path / "train.svg")
    terms = [t for t in train["terms"] if t["link_s"] > 0 or t["exposed_s"] > 0]
    assert len(terms) >= 4
    exposed, overlapped = by_id(root, r"exposed_s-\d+"), by_id(root, r"overlapped_s-\d+")
    assert len(exposed) == len(overlapped) == len(terms)
    heights = [extent(exposed[f"exposed_s-{i}"], 1) for i in range(len(terms))]
    heights += [extent(overlapped[f"overlapped_s-{i}"], 1) for i in range(len(terms))]
    values = [t["exposed_s"] for t in terms] + [max(t["link_s"] - t["exposed_s"], 0.0) for t in terms]
    assert_proportional(heights, values)
    memory = by_id(root, r"memory-\w+")
    kinds = [k for k in ("weights", "gradients", "optimizer", "activations", "overhead") if k in train["memory_bytes"]]
    assert sorted(memory) == sorted(f"memory-{k}" for k in kinds)
    assert_proportional([extent(memory[f"memory-{k}"], 1) for k in kinds], [train["memory_bytes"][k] for k in kinds])
    assert by_id(root, "capacity")


def test_train_plot_with_compare_is_refused(tmp_path):
    path = tmp_path / "train.png"
    result = runner.invoke(app, [*TRAIN, "--compare", "p5en.48xlarge", "--plot", str(path), "--json"], env=ENV)
    assert result.exit_code == 2 and json.loads(result.output)["field"] == "--plot", result.output
    assert not path.exists()


def test_collective_draws_its_rows_band_and_measured_cases(tmp_path):
    from clustersim.cli.collective import measured_points
    from clustersim.network.topology import fabric_for_instance

    table, root = plotted(COLLECTIVE, tmp_path / "collective.svg")
    rows = table["rows"]
    (predicted,) = by_id(root, "predicted").values()
    points = markers(predicted)
    assert len(points) == len(rows)
    a, b = assert_linear([y for _, y in points], [r["busbw_GBps"] for r in rows])
    assert_linear([x for x, _ in points], [math.log2(r["size_bytes"]) for r in rows])  # log x
    from clustersim.catalog.registry import load_catalog

    fabric = fabric_for_instance(load_catalog(()), "p5.48xlarge", 2)
    measured, _ = measured_points("p5.48xlarge", "all_reduce", fabric)
    assert len(measured) >= 10
    (drawn,) = by_id(root, "measured").values()
    ys = [y for _, y in markers(drawn)]
    assert ys == pytest.approx([a + b * m["busbw_GBps"] for m in measured], abs=0.02)
    assert by_id(root, "interval")


def test_checkpoint_draws_each_modes_stall_and_drain(tmp_path):
    data, root = plotted(COMMANDS["storage checkpoint"], tmp_path / "checkpoint.svg")
    modes = list(data["modes"])
    assert modes == ["sync", "async", "nvme"]
    widths = [extent(by_id(root, f"{key}-{m}")[f"{key}-{m}"], 0) for key in ("stall_s", "drain_s") for m in modes]
    assert_proportional(widths, [data["modes"][m][key] for key in ("stall_s", "drain_s") for m in modes])
    bounds = data["save"]["bounds_bytes_per_s"]
    assert sorted(by_id(root, r"(save|load)-.+")) == sorted(f"{k}-{b}" for k in ("save", "load") for b in bounds)


def test_striping_draws_every_stripe_count_by_its_bound(tmp_path):
    data, root = plotted(COMMANDS["storage striping"], tmp_path / "striping.svg")
    rows = data["rows"]
    groups = by_id(root, r"bound-.+")
    assert sorted(groups) == sorted({f"bound-{r['bound']}" for r in rows})
    points = [p for g in groups.values() for p in markers(g)]
    assert len(points) == len(rows)
    xs = sorted(x for x, _ in points)
    assert_linear(xs, [r["stripes"] for r in rows])


def test_validate_draws_every_case_of_each_kind(tmp_path):
    data, root = plotted(COMMANDS["validate"], tmp_path / "validate.svg")
    kinds = {c["kind"] for c in data["cases"]}
    for kind in kinds:
        drawn = [p for g in by_id(root, rf"cases-{kind}-\d+").values() for p in markers(g)]
        assert len(drawn) == sum(c["kind"] == kind for c in data["cases"]) > 0
        assert by_id(root, f"{kind}-y=x")


def test_validate_refuses_to_draw_no_case(tmp_path):
    path = tmp_path / "validate.png"
    collectives = str(dict(default_case_files())["collectives.jsonl"])
    result = runner.invoke(app, ["validate", collectives, "--min-size", "1TiB", "--plot", str(path), "--json"], env=ENV)
    assert result.exit_code == 2 and json.loads(result.output)["field"] == "--plot", result.output
    assert "none was scored" in result.output and not path.exists()


@pytest.mark.parametrize("name", list(COMMANDS))
def test_every_plot_writes_a_png(tmp_path, name):
    path = tmp_path / "figure.png"
    result = runner.invoke(app, [*COMMANDS[name], "--plot", str(path)], env=ENV)
    assert result.exit_code == 0, result.output
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000
