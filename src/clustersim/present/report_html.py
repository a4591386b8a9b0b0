"""A report as one self-contained HTML page: Plotly's bundle inlined, the figures drawn in the browser from
the JSON embedded in the page (``<script type="application/json" id="data">``), each figure's numbers in a
table beside it, the page laid out by a Jinja2 template.

A page is built from plain data: ``Section`` (a title, an optional Plotly figure as ``{"data", "layout"}``,
a table of columns and rows, notes). The embedded JSON holds every section and, under ``cli``, the JSON the
matching commands print with ``--json``, so a reader (or a test) can check the figures against them.
Plotly and Jinja2 are the optional extra ``report``; without them ``require_report_libraries`` names it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.files import write_whole

EXTRA_HINT = "pip install 'clustersim[report]'"
Cell = str | int | float | bool | None


@dataclass(frozen=True)
class Section:
    """One block of the page: a figure (Plotly ``data`` and ``layout``; None: a table only) and its table."""

    id: str
    title: str
    columns: list[str]
    rows: list[list[Cell]]
    figure: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The section as embedded in the page."""
        return {
            "id": self.id,
            "title": self.title,
            "figure": self.figure,
            "table": {"columns": self.columns, "rows": self.rows},
            "notes": self.notes,
        }


def require_report_libraries() -> None:
    """Refuse, in one line naming the extra, when Plotly or Jinja2 is missing."""
    import importlib.util

    missing = [name for name in ("plotly", "jinja2") if importlib.util.find_spec(name) is None]
    if missing:
        raise ClusterSimError(
            f"clustersim report needs {' and '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
            f"installed: {EXTRA_HINT}",
            field="report",
            value=",".join(missing),
        )


def cell_text(value: Cell) -> str:
    """A table cell: whole numbers with thousands separators, others to 4 significant figures."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if not math.isfinite(value):
            return repr(value)
        return f"{value:,.0f}" if abs(value) >= 1e4 else f"{value:.4g}"
    return value


def page_json(kind: str, title: str, summary: list[list[Cell]], sections: list[Section], cli: dict[str, Any]) -> str:
    """The JSON embedded in the page, safe inside a ``<script>`` element."""
    payload = {
        "kind": kind,
        "title": title,
        "summary": summary,
        "sections": [s.to_json() for s in sections],
        "cli": cli,
    }
    text = json.dumps(payload, allow_nan=False, separators=(",", ":"))
    return text.replace("</", "<\\/").replace("<!--", "<\\!--")


TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{ title }}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1200px; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.8em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; font-size: 0.82em; }
td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
.block { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.figure { flex: 1 1 640px; min-width: 480px; height: 380px; }
.numbers { flex: 1 1 360px; max-height: 600px; overflow: auto; }
.note { font-size: 0.85em; color: #555; }
</style>
<script>{{ plotly_js }}</script>
</head>
<body>
<h1>{{ title }}</h1>
<table class="summary">
{% for key, value in summary %}<tr><th>{{ key }}</th><td class="text">{{ value | cell }}</td></tr>
{% endfor %}</table>
{% for section in sections %}
<h2 id="{{ section.id }}">{{ section.title }}</h2>
<div class="block">
{% if section.figure %}<div class="figure" id="figure-{{ section.id }}"
 style="height: {{ section.figure.layout.get("height", 380) }}px"></div>{% endif %}
<div class="numbers"><table>
<tr>{% for column in section.columns %}<th>{{ column }}</th>{% endfor %}</tr>
{% for row in section.rows %}<tr>{% for value in row %}
<td{% if value is string %} class="text"{% endif %}>{{ value | cell }}</td>{% endfor %}</tr>
{% endfor %}</table></div>
</div>
{% for note in section.notes %}<p class="note">{{ note }}</p>{% endfor %}
{% endfor %}
<p class="note">Made by clustersim {{ version }}. The numbers behind every figure are in the table beside it
and in the JSON element <code>#data</code> of this page (with the commands' own <code>--json</code> under
<code>cli</code>).</p>
<script type="application/json" id="data">{{ data_json | safe }}</script>
<script>
(function () {
  var data = JSON.parse(document.getElementById("data").textContent);
  data.sections.forEach(function (section) {
    if (!section.figure) { return; }
    var layout = Object.assign({margin: {t: 40, r: 20, b: 60, l: 70}}, section.figure.layout);
    Plotly.newPlot("figure-" + section.id, section.figure.data, layout, {responsive: true, displaylogo: false});
  });
})();
</script>
</body>
</html>
"""


def render_page(kind: str, title: str, summary: list[list[Cell]], sections: list[Section], cli: dict[str, Any]) -> str:
    """The page's HTML: Plotly's JavaScript inlined, so it opens with no network."""
    require_report_libraries()
    import importlib

    import jinja2
    import markupsafe

    from clustersim import __version__

    env = jinja2.Environment(autoescape=True, undefined=jinja2.StrictUndefined)
    env.filters["cell"] = cell_text
    template = env.from_string(TEMPLATE)
    return template.render(
        title=title,
        summary=summary,
        sections=[s.to_json() | {"columns": s.columns, "rows": s.rows} for s in sections],
        plotly_js=markupsafe.Markup(importlib.import_module("plotly.offline").get_plotlyjs()),
        data_json=page_json(kind, title, summary, sections, cli),
        version=__version__,
    )


def write_page(path: Path, text: str) -> Path:
    """Write ``text`` to ``path`` whole or not at all (``clustersim.files.write_whole``)."""
    return write_whole(path, text, option="--output")
