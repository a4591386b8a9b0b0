"""The fabric view of a training report (``report --scenario FILE --network sim ...``): the job's step on the
fabric where train placed it is what ``fabric step`` simulates for the same job and fabric, the figures are its
numbers, and the page's ``train`` is ``train --scenario FILE --network sim ... --json``."""

import json

from tests.report.conftest import embedded, invoke

FABRIC_STEP = [
    *("fabric", "step", "llama3-70b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "2"),
    *("--placement", "spread", "--routing", "ecmp", "--oversubscription", "2", "--seed", "0", "--json"),
]


def test_the_fabric_view_is_fabric_steps_run(reports):
    data = embedded(reports["fabric"][0])
    fabric = data["cli"]["fabric"]
    step = json.loads(invoke(*FABRIC_STEP))
    for key in ("collectives", "together", "fabric", "routing", "layout", "links"):
        assert fabric[key] == step[key], key
    network = data["cli"]["train"]["network"]
    assert (network["placement"], network["routing"], network["oversubscription"]) == ("spread", "ecmp", 2.0)
    assert fabric["factors"] == network["factors"]
    # spread over a 2:1 fabric and hashed, the data-parallel collectives contend: the step is longer
    assert max(network["factors"].values()) > 1.2 and network["added_fraction"] > 0
    assert any(row[0] == "network" for row in data["summary"])


def test_the_fabric_figures_are_its_numbers(reports):
    data = embedded(reports["fabric"][0])
    fabric, sections = data["cli"]["fabric"], {s["id"]: s for s in data["sections"]}
    runs = {c["kind"]: c for c in fabric["collectives"]} | {"every kind at once": fabric["together"]}
    tiers = sections["fabric-tiers"]
    for trace in tiers["figure"]["data"]:
        shown = runs[trace["name"]]["tier_utilization"]
        assert dict(zip(trace["x"], trace["y"], strict=True)) == {t: shown.get(t, 0.0) for t in trace["x"]}
    assert list(runs) == [t["name"] for t in tiers["figure"]["data"]]
    assert "leaf->spine" in tiers["figure"]["data"][-1]["x"]
    columns, rows = tiers["table"]["columns"], tiers["table"]["rows"]
    named = columns[1:-3]
    assert named == tiers["figure"]["data"][0]["x"] and [row[0] for row in rows] == list(runs)
    for row in rows:
        run = runs[row[0]]
        assert row[1:-3] == [run["tier_utilization"].get(t) for t in named]
        assert row[-3:-1] == [run["max_link_utilization"], run["binding_tier"]]
        assert row[-1] == fabric["factors"].get(row[0])
    (links,) = sections["fabric-links"]["figure"]["data"]
    hottest = fabric["together"]["hottest_links"]
    assert links["y"] == [h["link"] for h in hottest] and links["x"] == [h["utilization"] for h in hottest]
    assert len(sections["fabric-links"]["table"]["rows"]) == sum(len(r["hottest_links"]) for r in runs.values())
    order = [s["id"] for s in data["sections"]]
    assert order.index("fabric-tiers") > max(i for i, s in enumerate(order) if s.startswith("collective-"))


def test_the_analytic_report_has_no_fabric_view(reports):
    data = embedded(reports["training"][0])
    assert "fabric" not in data["cli"] and not any(s["id"].startswith("fabric") for s in data["sections"])


def test_a_step_inside_one_node_has_a_table_and_no_empty_figure():
    from clustersim.present.report_fabric import fabric_sections

    nvlink = {"kind": "tp", "tier_utilization": {}, "hottest_links": [], "max_link_utilization": 0.0,
              "binding_tier": "nvlink"}  # fmt: skip
    fabric = {
        "title": "llama3-8b on 1 x p5.48xlarge", "routing": "spray", "placement": "packed", "seed": 0,
        "collectives": [nvlink], "together": nvlink | {"kind": None}, "factors": {"tp": 1.0},
        "fabric": {"name": "p5", "hosts": 2500, "tiers": 3, "oversubscription": 1.0},
    }  # fmt: skip
    (only,) = fabric_sections(fabric)
    assert only.figure is None and [row[0] for row in only.rows] == ["tp", "every kind at once"]
    assert "leaves its node" in only.notes[-1]
    assert fabric_sections({}) == []


def test_fabric_options_need_a_scenario(tmp_path):
    from typer.testing import CliRunner

    from clustersim.cli.app import app

    result = CliRunner().invoke(app, ["report", "--validate", "--network", "sim", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "they need --scenario, not --validate" in result.output
    result = CliRunner().invoke(app, ["report", "--validate", "--routing", "ecmp", "-o", str(tmp_path / "r.html")])
    assert result.exit_code == 2 and "--network" in result.output
    assert not (tmp_path / "r.html").exists()
