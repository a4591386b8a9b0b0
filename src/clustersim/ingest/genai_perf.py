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
"""

from __future__ import annotations

import re
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.serving_cases import ServingRun

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
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise ClusterSimError(f"{path}: cannot read: {exc.strerror or exc}", field="FILES", value=str(path)) from None
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
            stated = int(float(found.group(2)))
            if given is not None and given != stated:
                raise ClusterSimError(
                    f"{path}: the artifact path says concurrency {stated}, --concurrency says {given}",
                    field="--concurrency",
                    value=given,
                )
            return [f"concurrency {stated} from the artifact path"], stated
    if given is not None:
        return [f"concurrency {given} from --concurrency"], given
    return [f"concurrency not printed: {tool}'s default 1 assumed (give --concurrency)"], 1
