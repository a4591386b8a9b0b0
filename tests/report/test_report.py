"""clustersim report: one self-contained page per kind, whose embedded numbers are the CLI's ``--json``."""

import json

import pytest

from clustersim.present.report_html import cell_text, page_json
from tests.report.conftest import embedded, invoke

KINDS = ("training", "plan", "sweep", "validation")


@pytest.mark.parametrize("kind", KINDS)
def test_the_page_embeds_the_commands_json(reports, kind):
    path, cli = reports[kind]
    data = embedded(path)
    assert data["kind"] == kind
    for command, payload in cli.items():
        assert data["cli"][command] == payload, f"{kind}: the page's {command} differs from its --json"


@pytest.mark.parametrize("kind", KINDS)
def test_the_page_needs_no_network(reports, kind):
    text = reports[kind][0].read_text()
    assert "<script src" not in text and "<link" not in text
    assert "Plotly.newPlot" in text and len(text) > 3_000_000  # the bundle inlined


@pytest.mark.parametrize("kind", KINDS)
def test_every_figure_has_its_table(reports, kind):
    for section in embedded(reports[kind][0])["sections"]:
        assert section["table"]["rows"], section["id"]
        assert all(len(row) == len(section["table"]["columns"]) for row in section["table"]["rows"])


def test_the_training_figures_are_the_estimates_numbers(reports):
    path, cli = reports["training"]
    data, train = embedded(path), cli["train"]
    sections = {s["id"]: s for s in data["sections"]}
    step = sections["step"]["figure"]["data"]
    shown = {t["name"]: t for t in train["terms"] if t["link_s"] > 0 or t["exposed_s"] > 0}
    assert step[0]["x"] == list(shown) and step[0]["y"] == [t["exposed_s"] for t in shown.values()]
    assert step[1]["y"] == [max(t["link_s"] - t["exposed_s"], 0.0) for t in shown.values()]
    memory = {row[0]: row[1] for row in sections["memory"]["table"]["rows"]}
    assert memory["required"] == train["memory_bytes"]["required"] and memory["capacity"] == train["capacity_bytes"]
    checkpoints = {row[0]: row[1] for row in sections["checkpoints"]["table"]["rows"]}
    assert checkpoints["goodput"] == train["job"]["goodput"]
    cost = {row[0]: row[1:] for row in sections["cost"]["table"]["rows"]}
    interval = train["job"]["intervals"]["cost_usd"]
    assert cost["cost_usd"] == [train["job"]["cost_usd"], interval["low"], interval["high"]]


def test_the_busbw_curve_is_the_collective_commands(reports):
    """The TP group of the job (8 ranks, one p5) is what `collective --nodes 1` sweeps: same rows, same band; the
    measured points are the bundled nccl-tests cases on one p5."""
    data = embedded(reports["training"][0])
    tp = next(c for c in data["cli"]["collectives"] if c["kind"] == "tp")
    assert (tp["op"], tp["ranks"], tp["nodes"]) == ("all_reduce", 8, 1)
    sweep = json.loads(invoke("collective", "all_reduce", "--instance", "p5.48xlarge", "--nodes", "1", "--min", "1K",
                              "--max", "16G", "--factor", "4", "--json"))  # fmt: skip
    assert tp["sweep"]["rows"] == sweep["rows"]
    assert len(tp["measured"]) >= 10 and all(m["busbw_GBps"] > 0 for m in tp["measured"])
    figure = next(s for s in data["sections"] if s["id"] == "collective-0")["figure"]["data"]
    assert [t["name"] for t in figure][-1] == "measured"


def test_the_plan_figure_is_its_front(reports):
    path, cli = reports["plan"]
    data, plan = embedded(path), cli["plan"]
    front = data["sections"][0]["figure"]["data"][0]
    assert front["x"] == [r["time_s"] / 86400 for r in plan["pareto"]]
    assert front["y"] == [r["cost_usd"] / 1e6 for r in plan["pareto"]]


def test_the_sweep_of_train_rows_draws_time_against_cost(reports):
    path, cli = reports["sweep"]
    sections = {s["id"]: s for s in embedded(path)["sections"]}
    rows = [r for r in cli["sweep"]["rows"] if r["result"] is not None]
    assert len(rows) == 1 and sections["rows"]["table"]["rows"][0][-1].startswith("llama3-8b with layout")  # p5 refused
    assert [r[1:] for r in sections["time-cost"]["table"]["rows"]] == [
        [r["result"]["job"]["time_s"], r["result"]["job"]["cost_usd"]] for r in rows
    ]


def test_the_validation_page_scores_each_source(reports):
    path, cli = reports["validation"]
    data, validate = embedded(path), cli["validate"]
    assert [row[5] for row in data["sections"][0]["table"]["rows"]] == [s["median_width"] for s in validate["sources"]]
    cases = {row[0]: row for s in data["sections"][1:] for row in s["table"]["rows"]}
    assert len(cases) == len(validate["cases"])
    for case in validate["cases"]:
        assert cases[case["id"]][2:5] == [case["measured"], case["predicted"], case["error"]]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "give exactly one of --scenario, --plan, --from, --validate (got none)"),
        (["--validate", "--plan", "x.json"], "(got --plan, --validate)"),
        (["--plan", "missing.json"], "--plan: cannot read missing.json"),
        (["--from", "missing.db"], "--from: no sweep store at missing.db"),
    ],
)
def test_bad_input_is_one_line(tmp_path, args, words):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    result = CliRunner().invoke(app, ["report", *args, "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert words in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_a_plan_file_that_is_not_a_plan_is_named(tmp_path):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    (tmp_path / "p.json").write_text('{"rows": []}')
    result = CliRunner().invoke(app, ["report", "--plan", str(tmp_path / "p.json"), "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "lacks pareto, top, objective, model" in result.output


def test_a_missing_extra_is_named(tmp_path, monkeypatch):
    import importlib.util

    from typer.testing import CliRunner

    from clustersim.cli.app import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "plotly" else real(name, *a))
    result = CliRunner().invoke(app, ["report", "--validate", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2
    assert "needs plotly, which is not installed: pip install 'clustersim[report]'" in result.output


def test_cells_and_embedded_json_are_safe():
    assert cell_text(1234567) == "1,234,567" and cell_text(0.123456) == "0.1235" and cell_text(None) == ""
    assert "</script>" not in page_json("plan", "t", [["a", "</script><!--"]], [], {})
