"""The fabric view of a training report, from the JSON of the job's step on its fabric
(``StepOnFabric.to_dict()``, what ``fabric step --json`` prints): each network tier's utilization per kind of
collective alone (what the contention factor of ``train --network sim`` comes from) and with every kind at once,
and the hottest links, with other tenants' traffic where the report was asked for one (``--background``).
Utilization is time-averaged over each run: a tier's is the mean over its links that carried traffic."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clustersim.present.report_html import Cell, Section

TOGETHER = "every kind at once"


def fabric_runs(fabric: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The view's runs in order: each kind alone (named by its kind), then every kind at once."""
    runs = [(str(c["kind"]), c) for c in fabric["collectives"]]
    return [*runs, (TOGETHER, fabric["together"])]


def tier_section(fabric: dict[str, Any]) -> Section:
    """Grouped bars: per network tier, its utilization in each run; the table has a row per run (its utilization
    per tier, blank where it sends nothing, its busiest link's peak, binding tier and, alone, its contention
    factor)."""
    runs = fabric_runs(fabric)
    tiers = list(dict.fromkeys(t for _, run in runs for t in run["tier_utilization"]))
    data = [
        {"type": "bar", "name": name, "x": tiers, "y": [run["tier_utilization"].get(t, 0.0) for t in tiers]}
        for name, run in runs
    ]
    figure = {
        "data": data,
        "layout": {
            "barmode": "group",
            "title": {"text": f"link utilization by tier ({fabric['routing']}, {fabric['placement']} placement)"},
            "yaxis": {"title": {"text": "utilization (time-averaged, mean over used links)"}},
        },
    }
    factors = fabric.get("factors", {})
    rows: list[list[Cell]] = [
        [name, *(run["tier_utilization"].get(t) for t in tiers), run["max_link_utilization"], run["binding_tier"],
         factors.get(name)]
        for name, run in runs
    ]  # fmt: skip
    shape, seeds = fabric["fabric"], fabric.get("seeds", [fabric["seed"]])
    notes = [
        f"{fabric['title']}, placed {fabric['placement']} (seed {fabric['seed']}) on {shape['name']}: "
        f"{shape['hosts']:,} hosts, {shape['tiers']} tiers, {shape['oversubscription']:g}:1 oversubscribed, "
        f"{fabric['routing']} routing. A kind whose groups stay inside a node (NVLink) loads no network tier.",
        "factor: the kind's simulated time here over packed, sprayed and non-blocking (train --network sim)"
        + (
            f", the median over seeds {seeds[0]}-{seeds[-1]}; the links shown are seed {fabric['seed']}'s."
            if len(seeds) > 1
            else "."
        ),
    ]
    notes += background_notes(fabric.get("background"))
    columns = ["run", *tiers, "max_link_utilization", "binding_tier", "factor"]
    return Section("fabric-tiers", "Fabric: utilization by tier", columns, rows, figure, notes)


def background_notes(background: dict[str, Any] | None) -> list[str]:
    """The other tenants' traffic the runs shared the fabric with (``Loaded.to_dict()``; none: no note)."""
    if background is None:
        return []
    pattern = str(background["pattern"]).replace("_", "-")
    without = ", ".join(f"{kind} x{factor:.2f}" for kind, factor in background["factors_without"].items())
    return [
        f"background: {background['share']:g} of the other hosts' NICs busy ({pattern}), {background['hosts']:,} "
        f"hosts, in every run above (their flows share the links max-min fairly with the job's); the factors "
        f"without it: {without}."
    ]


def links_section(fabric: dict[str, Any]) -> Section:
    """Horizontal bars: the hottest links with every kind at once; the table has each run's hottest links."""
    hottest = fabric["together"]["hottest_links"]
    figure = {
        "data": [
            {"type": "bar", "orientation": "h", "name": TOGETHER, "y": [h["link"] for h in hottest],
             "x": [h["utilization"] for h in hottest], "marker": {"color": "#C44E52"}}
        ],
        "layout": {
            "title": {"text": f"hottest links, {TOGETHER} (binding tier {fabric['together']['binding_tier']})"},
            "xaxis": {"title": {"text": "utilization (time-averaged)"}},
            "yaxis": {"automargin": True, "autorange": "reversed"},
            "height": 160 + 22 * max(len(hottest), 1),
        },
    }  # fmt: skip
    rows: list[list[Cell]] = [
        [name, h["link"], h["utilization"]] for name, run in fabric_runs(fabric) for h in run["hottest_links"]
    ]
    return Section("fabric-links", "Fabric: hottest links", ["run", "link", "utilization"], rows, figure)


def fabric_sections(fabric: dict[str, Any]) -> list[Section]:
    """The fabric view (nothing when the step has no collective to simulate; the tier table alone when none
    of them reaches the network)."""
    if not fabric:
        return []
    tiers = tier_section(fabric)
    if not any(run["hottest_links"] for _, run in fabric_runs(fabric)):  # nothing left the nodes: a table only
        note = "No collective of the step leaves its node: the network carries none of it (NVLink does)."
        return [replace(tiers, figure=None, notes=[*tiers.notes, note])]
    return [tiers, links_section(fabric)]
