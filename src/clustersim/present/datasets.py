"""The request-length datasets as JSON rows and rich tables: the listing (lengths at a glance) and one set's
figures, each with its value, provenance, confidence and source (``clustersim.serving.datasets``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from clustersim.serving.datasets import SIDES, RequestDataset

USED_BY_CHARS = 60  # the listing's used_by column is shortened to this; the description and --json give it whole
NONE = "-"  # a figure the set does not give
PERCENTILES = "percentiles"


def _number(value: float) -> int | float:
    """A whole number as an int (24576, not 24576.0), any other as given."""
    return int(value) if float(value).is_integer() else value


def figure_json(figure: BaseModel) -> dict[str, Any]:
    """One figure: its value (percentiles: a {percent: tokens} mapping), provenance, confidence, source, note."""
    dumped = figure.model_dump(mode="json")
    values = getattr(figure, "values", None)
    if isinstance(values, Mapping):
        value: Any = {str(percent): _number(tokens) for percent, tokens in values.items()}
    elif isinstance(dumped.get("value"), int | float):
        value = _number(dumped["value"])
    else:
        value = dumped.get("value", dumped.get("values"))
    known = {"value", "values", "provenance", "confidence", "source", "note"}
    extra = {key: item for key, item in dumped.items() if key not in known and item is not None}
    return {
        "value": value,
        "provenance": dumped.get("provenance"),
        "confidence": dumped.get("confidence"),
        "source": dumped.get("source"),
        "note": dumped.get("note"),
        **extra,
    }


def dataset_json(dataset: RequestDataset) -> dict[str, Any]:
    """The set's fields as in ``datasets.toml`` (name, kind, description, used_by, ``samples``, ``input.mean``
    as ``["input"]["mean"]``, ...), each figure it gives as ``figure_json``, one it does not give null."""
    dumped = dataset.model_dump(mode="json")
    row: dict[str, Any] = {"name": dataset.name, **{key: item for key, item in dumped.items() if key != "name"}}
    for dotted, figure in dataset.figures():
        *parents, last = dotted.split(".")
        place = row
        for parent in parents:
            if not isinstance(place.get(parent), dict):
                place[parent] = {}
            place = place[parent]
        place[last] = figure_json(figure)
    return row


def _side(row: Mapping[str, Any], side: str, name: str) -> Any:
    figure = row.get(side, {}).get(name)
    return None if figure is None else figure.get("value")


def _percentile(row: Mapping[str, Any], side: str, percent: int) -> Any:
    values = _side(row, side, PERCENTILES)
    return values.get(str(percent)) if isinstance(values, Mapping) else None


def format_tokens(value: Any) -> str:
    """``222.33``, ``24,576``, ``9,428.6``; ``-`` where not given."""
    if value is None:
        return NONE
    if not isinstance(value, int | float):
        return str(value)
    return f"{value:,.2f}".rstrip("0").rstrip(".")


def shorten(text: str, limit: int = USED_BY_CHARS) -> str:
    """``text`` cut at a word before ``limit`` characters, with an ellipsis."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0].rstrip(" ,;:/(")
    return cut + "…"


def datasets_table(rows: Sequence[Mapping[str, Any]]) -> Table:
    """One line per set (rows from ``dataset_json``): kind, samples, and the prompt and output lengths'
    mean, median, p99 and maximum in tokens (``-`` where the set gives none), then who uses it."""
    table = Table(
        title=f"request datasets ({len(rows)} sets; lengths in tokens)",
        caption="-: not given (a run states that length); clustersim datasets NAME: every figure with its source",
    )
    table.add_column("name", overflow="fold")
    table.add_column("kind", overflow="fold")
    # the numbers stay whole on a narrow terminal (their headers on two lines); used_by gives way first
    for column in ["samples", *(f"{side}\n{stat}" for side in SIDES for stat in ("mean", "p50", "p99", "max"))]:
        table.add_column(column, no_wrap=True, justify="right")
    table.add_column("used_by")
    for row in rows:
        cells = [row["name"], str(row["kind"]), format_tokens((row.get("samples") or {}).get("value"))]
        for side in SIDES:
            cells += [format_tokens(_side(row, side, "mean"))]
            cells += [format_tokens(_percentile(row, side, p)) for p in (50, 99)]
            cells += [format_tokens(_side(row, side, "max"))]
        used_by = Text(shorten(str(row.get("used_by", ""))), no_wrap=True, overflow="ellipsis")
        table.add_row(*(Text(cell) for cell in cells), used_by)
    return table


def _figures(row: Mapping[str, Any], prefix: str = "") -> list[tuple[str, dict[str, Any]]]:
    """The figures of a ``dataset_json`` row with their dotted names, in order."""
    found = []
    for key, item in row.items():
        if isinstance(item, dict) and "source" in item and "value" in item:
            found.append((prefix + key, item))
        elif isinstance(item, dict):
            found += _figures(item, f"{prefix}{key}.")
    return found


def figure_text(value: Any) -> str:
    """A figure's value: a number, or percentiles as ``p50 152, p99 791``."""
    if isinstance(value, Mapping):
        return ", ".join(f"p{percent} {format_tokens(tokens)}" for percent, tokens in value.items())
    return format_tokens(value)


def dataset_view(row: Mapping[str, Any]) -> list[RenderableType]:
    """One set (a row from ``dataset_json``): what it is and who uses it, then every figure with its value,
    provenance, confidence and source (and note)."""
    lines: list[RenderableType] = [Text(f"{row['name']} ({row['kind']}): {row.get('description', '')}")]
    lines.append(Text(f"used by: {row.get('used_by', '')}"))
    others = {k: v for k, v in row.items() if k not in ("name", "kind", "description", "used_by", *SIDES)}
    lines += [Text(f"{key}: {value}") for key, value in others.items() if isinstance(value, str | int | float)]
    figures = _figures(row)
    if not figures:
        lines.append(Text("no figures given: a run states its lengths (--input, --output)"))
        return lines
    table = Table(title=f"{row['name']}: {len(figures)} figures (lengths in tokens)")
    for column in ("figure", "value", "provenance", "confidence", "source"):
        table.add_column(column, overflow="fold", justify="right" if column == "value" else "left")
    for name, figure in figures:
        source = str(figure.get("source") or "")
        if figure.get("note"):
            source += f"\nnote: {figure['note']}"
        cells = (name, figure_text(figure.get("value")), figure.get("provenance"), figure.get("confidence"), source)
        table.add_row(*(Text(str(cell or "")) for cell in cells))
    lines.append(table)
    return lines
