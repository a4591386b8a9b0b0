"""Read the console table NVIDIA's load generators print, genai-perf (``NVIDIA GenAI-Perf | LLM Metrics``)
and its successor AIPerf (``NVIDIA AIPerf | LLM Metrics``), into ``ServingRun``s.

Understood: every such table in a file (rich's box drawing; a metric name wrapped over two rows, as newer
versions print it, is joined), its ``avg`` column of ``Time to first token (ms)``, ``Inter token latency
(ms)`` (genai-perf's per-request (latency - TTFT) / (output tokens - 1): the case's TPOT), ``Output token
throughput (per sec | tokens/sec)``, ``Output`` and ``Input sequence length``, and ``Request count`` where
printed; the concurrency from an artifact path printed near the table (``...-concurrency8/``), else
``--concurrency``, else the tools' default of 1 (said in the case's notes). The serving stack is not
printed: ``--framework`` names it, else the case's framework is left null.

Refused, naming the file and line: a table cut before its closing ``└`` row, a needed row missing, a value
that is not a number, an artifact path of a request-rate run (an open loop the case format does not score).

The files genai-perf writes beside the table are read the same way (``read_genai_perf_export``):
``profile_export_genai_perf.csv`` (its ``Metric,avg,...`` and ``Metric,Value`` blocks, thousands separators
in quotes) and ``profile_export_genai_perf.json`` (and AIPerf's ``profile_export_aiperf.json``: one
``{"unit", "avg", ...}`` object per metric, named as the table's rows with the unit in brackets), their
concurrency from ``input_config`` where the JSON holds it, else from the artifact directory in the file's
path (``...-concurrency8/``), else as for the table. Refused as well: broken JSON or CSV, a JSON with a
request rate in ``input_config``.
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.ingest.serving_cases import ServingRun
from clustersim.ingest.text import read_output

TITLE = re.compile(r"NVIDIA (GenAI-Perf|AIPerf) \| LLM Metrics\s*$")
_ARTIFACT = re.compile(r"-(concurrency|request_rate)(\d+(?:\.\d+)?)\b")
ROWS = {
    "time to first token (ms)": "mean_ttft_ms",
    "inter token latency (ms)": "mean_tpot_ms",
    "output token throughput (per sec)": "output_throughput",
    "output token throughput (tokens/sec)": "output_throughput",
    "output sequence length": "mean_output_tokens",
    "output sequence length (tokens)": "mean_output_tokens",
    "input sequence length": "mean_input_tokens",
    "input sequence length (tokens)": "mean_input_tokens",
    "request count (count)": "completed",
    "request count (requests)": "completed",
}
NEEDED = ("output_throughput", "mean_output_tokens", "mean_input_tokens")


def looks_like_genai_perf(text: str) -> bool:
    """Whether ``text`` holds a genai-perf or AIPerf LLM metrics table."""
    return any(TITLE.search(line) for line in text.splitlines())


def read_genai_perf(path: str | Path, concurrency: int | None = None, framework: str | None = None) -> list[ServingRun]:
    """Every LLM-metrics table in ``path`` (see the module's docstring)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    starts = [index for index, line in enumerate(lines) if TITLE.search(line)]
    if not starts:
        raise ClusterSimError(f"{path}: no 'NVIDIA GenAI-Perf | LLM Metrics' table", field="FILES", value=str(path))
    runs = []
    for number, start in enumerate(starts):
        tool = TITLE.search(lines[start]).group(1)  # type: ignore[union-attr]
        values = _table(path, lines, start)
        stop = starts[number + 1] if number + 1 < len(starts) else len(lines)
        notes, batch = _concurrency(path, lines[max(0, start - 3) : stop], start, concurrency, tool)
        values["max_concurrency"] = batch
        notes.append(
            "the serving stack is not printed: software.framework left null (give --framework)"
            if framework is None
            else f"serving stack {framework} from --framework"
        )
        runs.append(
            ServingRun(
                str(path),
                start + 1,
                values,
                tool=f"{tool} LLM metrics",
                framework=framework,
                version=f"{tool} console table",
                notes=tuple(notes),
            )
        )
    return runs


def _table(path: Path, lines: list[str], start: int) -> dict[str, float]:
    rows: list[list[str]] = []
    for index in range(start + 1, len(lines)):
        line = lines[index].strip()
        if line.startswith("└"):
            return _values(path, rows, start)
        if not line.startswith("│"):
            continue
        cells = [cell.strip() for cell in line.strip("│").split("│")]
        if rows and not any(cells[1:]):  # the name wrapped onto a second row
            rows[-1][0] = f"{rows[-1][0]} {cells[0]}"
        else:
            rows.append([*cells, str(index + 1)])
    raise ClusterSimError(
        f"{path}, line {len(lines)}: the table starting on line {start + 1} ends without its closing '└' row "
        f"(a truncated output?)",
        field="FILES",
        value=str(path),
    )


def _values(path: Path, rows: list[list[str]], start: int) -> dict[str, float]:
    values: dict[str, float] = {}
    for row in rows:
        key = ROWS.get(" ".join(row[0].lower().split()))
        if key is None:
            continue
        text = row[1].replace(",", "")
        try:
            values[key] = float(text)
        except ValueError:
            raise ClusterSimError(
                f"{path}, line {row[-1]}: {row[0]} avg is {row[1]!r}, not a number", field=row[0], value=row[1]
            ) from None
    missing = [key for key in NEEDED if key not in values]
    if missing:
        raise ClusterSimError(f"{path}, line {start + 1}: the table lacks {', '.join(missing)}", field="FILES")
    if values["output_throughput"] <= 0:
        raise ClusterSimError(f"{path}, line {start + 1}: output token throughput is 0: nothing measured")
    return values


def _concurrency(path: Path, near: list[str], start: int, given: int | None, tool: str) -> tuple[list[str], float]:
    for line in near:
        found = _ARTIFACT.search(line)
        if found and found.group(1) == "request_rate":
            raise ClusterSimError(
                f"{path}, line {start + 1}: a request-rate run ({found.group(0)[1:]}) is an open loop, which the "
                f"case format does not score; run with --concurrency",
                field="request_rate",
            )
        if found:
            return _agreed(path, int(float(found.group(2))), given, "the artifact path")
    if given is not None:
        return [f"concurrency {given} from --concurrency"], given
    return [f"concurrency not printed: {tool}'s default 1 assumed (give --concurrency)"], 1


CSV_HEAD = "Metric,avg,"


def looks_like_genai_perf_export(text: str) -> bool:
    """Whether ``text`` is a genai-perf/AIPerf export: the CSV or the JSON profile summary."""
    if text.lstrip().startswith(CSV_HEAD):
        return True
    head = text.lstrip()[:1] == "{"
    return head and '"output_token_throughput"' in text and '"unit"' in text and '"fio version"' not in text


def read_genai_perf_export(
    path: str | Path, concurrency: int | None = None, framework: str | None = None
) -> ServingRun:
    """The run in a genai-perf/AIPerf export file (see the module's docstring)."""
    path = Path(path)
    text = read_output(path)
    if text.lstrip().startswith(CSV_HEAD):
        rows, given, tool = _csv_rows(path, text), None, "GenAI-Perf"
    else:
        rows, given, tool = _json_rows(path, text)
    values = _values(path, rows, 0)
    if given is not None:
        notes, batch = _agreed(path, given, concurrency, "input_config")
    else:
        notes, batch = _concurrency(path, [str(path.resolve().parent)], 0, concurrency, tool)
    values["max_concurrency"] = batch
    notes.append(
        "the serving stack is not printed: software.framework left null (give --framework)"
        if framework is None
        else f"serving stack {framework} from --framework"
    )
    return ServingRun(
        str(path), 1, values, tool=f"{tool} export", framework=framework, version=f"{tool} export", notes=tuple(notes)
    )


def _csv_rows(path: Path, text: str) -> list[list[str]]:
    rows: list[list[str]] = []
    try:
        for number, cells in enumerate(csv.reader(text.splitlines()), start=1):
            if len(cells) >= 2 and cells[0] != "Metric":
                rows.append([cells[0], cells[1], str(number)])
    except csv.Error as exc:
        raise ClusterSimError(f"{path}: not a CSV file: {exc}", field="FILES") from None
    return rows


def _json_rows(path: Path, text: str) -> tuple[list[list[str]], float | None, str]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterSimError(f"{path}, line {exc.lineno}: the export is cut or broken ({exc.msg})") from None
    if not isinstance(document, dict):
        raise ClusterSimError(f"{path}, line 1: the export is not a JSON object", field="FILES")
    lines = text.splitlines()
    rows = []
    for key, stats in document.items():
        if isinstance(stats, dict) and "avg" in stats and "unit" in stats:
            line = next((n for n, t in enumerate(lines, 1) if f'"{key}"' in t), 1)
            rows.append([f"{key.replace('_', ' ')} ({stats['unit']})", str(stats["avg"]), str(line)])
    tool = "AIPerf" if "aiperf_version" in document else "GenAI-Perf"
    return rows, _configured(path, document.get("input_config") or {}), tool


def _configured(path: Path, config: dict[str, Any]) -> float | None:
    loadgen = config.get("loadgen")
    load: dict[str, Any] = loadgen if isinstance(loadgen, dict) else config
    if load.get("request_rate"):
        raise ClusterSimError(
            f"{path}: input_config has request_rate {load['request_rate']}: an open loop, which the case format "
            f"does not score; run with --concurrency",
            field="request_rate",
        )
    value = load.get("concurrency")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _agreed(path: Path, stated: float, given: int | None, where: str) -> tuple[list[str], float]:
    """The concurrency ``where`` (the artifact path, input_config) states, refused if --concurrency differs."""
    if given is not None and given != stated:
        raise ClusterSimError(
            f"{path}: {where} says concurrency {stated:g}, --concurrency says {given}",
            field="--concurrency",
            value=given,
        )
    return [f"concurrency {stated:g} from {where}"], stated
