"""The sections of a plan's, a sweep store's and a validation run's report, from plain JSON.

A plan (``plan --json``): time against cost of the Pareto front and the top rows, the chosen (first) row
marked; a sweep store's rows as a table, and for ``train`` rows time against cost; a validation run
(``validate --json``): predicted against measured per source, with each source's interval coverage.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from typing import Any

from clustersim.present.report_html import Cell, Section

DAY_S = 86400.0
PLAN_COLUMNS = ("instance", "nodes", "framework", "precision", "global_batch", "layout", "step_s", "time_s",
                "goodput_time_s", "cost_usd", "energy_j", "why")  # fmt: skip


def _plan_rows(rows: Sequence[dict[str, Any]]) -> list[list[Cell]]:
    return [[i + 1, *(row.get(key) for key in PLAN_COLUMNS)] for i, row in enumerate(rows)]


def _plan_label(row: dict[str, Any]) -> str:
    return f"{row['nodes']} x {row['instance']}: {row['layout']}"


def plan_sections(plan: dict[str, Any]) -> list[Section]:
    """The Pareto front (time against cost, the chosen row starred) and the top rows."""
    front, top = plan["pareto"], plan["top"]

    def trace(rows: Sequence[dict[str, Any]], name: str, **style: Any) -> dict[str, Any]:
        return {
            "type": "scatter", "name": name, "x": [r["time_s"] / DAY_S for r in rows],
            "y": [r["cost_usd"] / 1e6 if r["cost_usd"] is not None else None for r in rows],
            "text": [_plan_label(r) for r in rows], **style,
        }  # fmt: skip

    figure = {
        "data": [
            trace(front, "Pareto front", mode="lines+markers", marker={"color": "#C44E52"}),
            trace(
                top,
                f"top {len(top)} by {plan['objective']}",
                mode="markers",
                marker={"symbol": "circle-open", "size": 12, "color": "#4C72B0"},
            ),
            trace(top[:1], "chosen", mode="markers", marker={"symbol": "star", "size": 16, "color": "#DD8452"}),
        ],
        "layout": {
            "title": {"text": f"{plan['model']}: time against cost"},
            "xaxis": {"title": {"text": "time to train (days)"}},
            "yaxis": {"title": {"text": "cost (million USD)"}},
        },
    }
    columns = ["#", *PLAN_COLUMNS]
    notes = [f"note: {n}" for n in plan.get("notes", [])]
    return [
        Section("pareto", "Pareto front: time against cost", columns, _plan_rows(front), figure, notes),
        Section("top", f"Top {len(top)} by {plan['objective']} (the first is chosen)", columns, _plan_rows(top)),
    ]


def plan_summary(plan: dict[str, Any]) -> list[list[Cell]]:
    """What was searched and what was chosen."""
    first = plan["top"][0] if plan["top"] else None
    return [
        ["model", f"{plan['model']} ({plan['params']:,} parameters)"],
        ["objective", plan["objective"]],
        ["points, priced, feasible", f"{plan['points']}, {plan['priced']}, {plan['feasible']}"],
        ["layouts evaluated", plan["evaluated"]],
        ["chosen", _plan_label(first) if first else "none"],
    ]


def sweep_sections(command: str, records: list[dict[str, Cell]], columns: list[str]) -> list[Section]:
    """A sweep store's rows (flat records, ``sweep show``'s columns) and, for ``train`` rows, time against cost."""
    rows: list[list[Cell]] = [[record.get(c) for c in columns] for record in records]
    sections = [Section("rows", f"Sweep of clustersim {command}: {len(records)} rows", columns, rows)]
    time_key, cost_key = "result.job.time_s", "result.job.cost_usd"
    priced = [r for r in records if isinstance(r.get(time_key), float) and isinstance(r.get(cost_key), float)]
    if command in ("train", "plan") and priced:
        inputs = [c for c in columns if c.startswith("inputs.")]
        labels = [", ".join(f"{c.removeprefix('inputs.')}={r.get(c)}" for c in inputs) for r in priced]
        times = [float(r[time_key] or 0.0) for r in priced]
        costs = [float(r[cost_key] or 0.0) for r in priced]
        figure = {
            "data": [{"type": "scatter", "mode": "markers", "name": "points", "x": [t / DAY_S for t in times],
                      "y": [c / 1e6 for c in costs], "text": labels, "marker": {"size": 9}}],
            "layout": {"title": {"text": "time against cost"}, "xaxis": {"title": {"text": "time to train (days)"}},
                       "yaxis": {"title": {"text": "cost (million USD)"}}},
        }  # fmt: skip
        table: list[list[Cell]] = [[r["id"], t, c] for r, t, c in zip(priced, times, costs, strict=True)]
        sections.append(Section("time-cost", "Time against cost", ["id", "time_s", "cost_usd"], table, figure))
    return sections


def cases_by_kind(report: dict[str, Any], source_of: Mapping[str, str]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The predicted-against-measured figures' numbers, from ``validate --json``: per case kind, per source
    (``source_of``: case id to source), the cases in the order scored."""
    by_kind: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    for case in report["cases"]:
        by_kind[case["kind"]][source_of.get(case["id"], "")].append(case)
    return {kind: dict(sources) for kind, sources in by_kind.items()}


def validation_sections(report: dict[str, Any], source_of: Mapping[str, str]) -> list[Section]:
    """Per source, coverage and MAPE; per case kind, predicted against measured coloured by source."""
    columns = ["file", "source", "cases", "mape", "coverage", "median_width", "fit"]
    coverage_rows: list[list[Cell]] = [[s.get(c) for c in columns] for s in report["sources"]]
    repeated = {s["source"] for s in report["sources"]}
    repeated = {name for name in repeated if sum(s["source"] == name for s in report["sources"]) > 1}
    labels = [s["source"] + (f" ({s['file']})" if s["source"] in repeated else "") for s in report["sources"]]
    coverage = {
        "data": [{"type": "bar", "orientation": "h", "name": "coverage", "y": labels,
                  "x": [s.get("coverage") for s in report["sources"]]}],
        "layout": {
            "title": {"text": f"share of measured values inside the {report['level']:.0%} interval, per source"},
            "xaxis": {"title": {"text": "coverage"}, "range": [0, 1]},
            "yaxis": {"automargin": True, "autorange": "reversed"},
            "height": 160 + 18 * len(labels),
            "shapes": [{"type": "line", "yref": "paper", "y0": 0, "y1": 1, "x0": report["level"],
                        "x1": report["level"], "line": {"dash": "dash"}}],
        },
    }  # fmt: skip
    sections = [Section("coverage", "Interval coverage per source", columns, coverage_rows, coverage)]
    for kind, sources in cases_by_kind(report, source_of).items():
        data: list[dict[str, Any]] = []
        values = [c[k] for cases in sources.values() for c in cases for k in ("predicted", "measured")]
        low, high = min(values), max(values)
        data.append({"type": "scatter", "mode": "lines", "name": "predicted = measured", "x": [low, high],
                     "y": [low, high], "line": {"dash": "dot", "color": "#888"}})  # fmt: skip
        for source, cases in sources.items():
            data.append(
                {"type": "scatter", "mode": "markers", "name": source, "x": [c["measured"] for c in cases],
                 "y": [c["predicted"] for c in cases], "text": [c["id"] for c in cases],
                 "error_y": {"type": "data", "symmetric": False,
                             "array": [interval_above(c) for c in cases],
                             "arrayminus": [interval_below(c) for c in cases]}}
            )  # fmt: skip
        figure = {
            "data": data,
            "layout": {"title": {"text": f"{kind}: predicted against measured"}, "xaxis": {"type": "log",
                       "title": {"text": "measured"}}, "yaxis": {"type": "log", "title": {"text": "predicted"}}},
        }  # fmt: skip
        rows: list[list[Cell]] = [
            [c["id"], source, c["measured"], c["predicted"], c["error"], *(_bounds(c))]
            for source, cases in sources.items()
            for c in cases
        ]
        columns_kind = ["id", "source", "measured", "predicted", "error", "low", "high"]
        sections.append(Section(f"cases-{kind}", f"{kind} cases", columns_kind, rows, figure))
    return sections


def _bounds(case: dict[str, Any]) -> tuple[Cell, Cell]:
    interval = case.get("interval")
    return (interval["low"], interval["high"]) if interval else (None, None)


def interval_above(case: dict[str, Any]) -> float:
    """How far a scored case's interval reaches above its prediction (0 without an interval)."""
    interval = case.get("interval")
    return float(interval["high"] - case["predicted"]) if interval else 0.0


def interval_below(case: dict[str, Any]) -> float:
    """How far a scored case's interval reaches below its prediction (0 without an interval)."""
    interval = case.get("interval")
    return float(case["predicted"] - interval["low"]) if interval else 0.0


def validation_summary(report: dict[str, Any]) -> list[list[Cell]]:
    """Per file: cases, MAPE and coverage."""
    rows: list[list[Cell]] = [["interval level", report["level"]]]
    for f in report["files"]:
        mape = "no MAPE" if f.get("mape") is None else f"MAPE {f['mape']:.1%}"
        coverage = "no intervals" if f.get("coverage") is None else f"coverage {f['coverage']:.1%}"
        rows.append([f["path"], f"{f['cases']} cases, {mape}, {coverage}"])
    return rows
