"""Read vLLM's serving benchmark (``benchmark_serving.py``, ``vllm bench serve``): its printed result
block and its ``--save-result`` JSON.

Understood: the ``============ Serving Benchmark Result ============`` block (several per file, with
any log lines between them) and its lines ``Successful requests``, ``Maximum request concurrency``
(optional), ``Benchmark duration (s)``, ``Total input tokens``, ``Total generated tokens``, ``Output
token throughput (tok/s)``, ``Mean TTFT (ms)`` and ``Mean TPOT (ms)`` (the others are read and not
needed); a ``Traffic request rate:`` line above a block; the JSON result file's ``completed``,
``total_input_tokens``, ``total_output_tokens``, ``output_throughput``, ``mean_ttft_ms``,
``mean_tpot_ms``, ``max_concurrency``, ``request_rate`` and ``model_id``.

Refused, naming the file and line: a block cut before its closing ``=====`` line, a needed line
missing or not a number, no successful request, a finite request rate (an open-loop rate is not a
scenario the case format scores), a JSON file that is not one result object.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.serving_cases import ServingRun
from clustersim.ingest.text import read_output

BLOCK_START = "Serving Benchmark Result"
_LINE = re.compile(r"^\s*#?\s*([A-Za-z][^:]*?)\s*:\s*(\S+)\s*$")  # a script may keep it as '# ' comments
_RATE = re.compile(r"Traffic request rate:\s*(\S+)")
_CONCURRENCY = re.compile(r"Maximum request concurrency:\s*(\S+)")
NEEDED = {
    "Successful requests": "completed",
    "Total input tokens": "total_input_tokens",
    "Total generated tokens": "total_output_tokens",
    "Output token throughput (tok/s)": "output_throughput",
    "Mean TTFT (ms)": "mean_ttft_ms",
    "Mean TPOT (ms)": "mean_tpot_ms",
}
OPTIONAL = {"Maximum request concurrency": "max_concurrency", "Benchmark duration (s)": "duration"}


def looks_like_vllm(text: str) -> bool:
    """Whether ``text`` is vLLM benchmark output (its result block or its JSON result)."""
    return BLOCK_START in text or ('"output_throughput"' in text and '"mean_ttft_ms"' in text)


def read_vllm_bench(path: str | Path) -> list[ServingRun]:
    """Every run in the vLLM benchmark output ``path`` (see the module's docstring)."""
    path = Path(path)
    text = read_output(path)
    if text.lstrip().startswith("{"):
        return [_json_run(path, text)]
    runs: list[ServingRun] = []
    lines = text.splitlines()
    rate, concurrency = math.inf, None  # printed above the block by newer versions
    index = 0
    while index < len(lines):
        line = lines[index]
        where = f"{path}, line {index + 1}"
        found = _RATE.search(line)
        if found:
            rate = _number(found.group(1), "Traffic request rate", where)
        limit = _CONCURRENCY.search(line)
        if limit and BLOCK_START not in line:
            concurrency = None if limit.group(1) == "None" else _number(limit.group(1), "concurrency", where)
        if BLOCK_START in line:
            index = _block(path, lines, index, rate, concurrency, runs)
            rate, concurrency = math.inf, None
        index += 1
    if not runs:
        raise ClusterSimError(f"{path}: no '{BLOCK_START}' block of vLLM's benchmark", field="FILES", value=str(path))
    return runs


def _block(
    path: Path, lines: list[str], start: int, rate: float, concurrency: float | None, runs: list[ServingRun]
) -> int:
    values: dict[str, float] = {} if concurrency is None else {"max_concurrency": concurrency}
    for index in range(start + 1, len(lines)):
        line = lines[index].strip().lstrip("#").strip()
        if line and set(line) == {"="}:
            missing = [name for name in NEEDED if NEEDED[name] not in values]
            if missing:
                raise ClusterSimError(
                    f"{path}, line {start + 1}: the result block lacks {', '.join(repr(m) for m in missing)}"
                )
            runs.append(ServingRun(str(path), start + 1, _checked(values, path, start), rate, None))
            return index
        match = _LINE.match(line)
        if match is None:
            continue
        key = NEEDED.get(match.group(1)) or OPTIONAL.get(match.group(1))
        if key is not None:
            values[key] = _number(match.group(2), match.group(1), f"{path}, line {index + 1}")
    raise ClusterSimError(
        f"{path}, line {len(lines)}: the result block starting on line {start + 1} ends without its closing "
        f"'=====' line (a truncated run?)",
        field="FILES",
        value=str(path),
    )


def _json_run(path: Path, text: str) -> ServingRun:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterSimError(f"{path}, line {exc.lineno}: invalid JSON: {exc.msg}", field="FILES") from None
    if not isinstance(data, dict):
        raise ClusterSimError(f"{path}, line 1: a vLLM result file is one JSON object", field="FILES")
    values: dict[str, float] = {}
    for key in (*NEEDED.values(), *OPTIONAL.values()):
        value = data.get(key)
        if value is None:
            if key in NEEDED.values():
                raise ClusterSimError(f"{path}: the result lacks {key!r}", field=key)
            continue
        values[key] = _number(str(value), key, str(path))
    rate = data.get("request_rate", "inf")
    model = data.get("model_id")
    return ServingRun(
        str(path),
        1,
        _checked(values, path, 0),
        _number(str(rate), "request_rate", str(path)),
        str(model) if model else None,
    )


def _checked(values: dict[str, float], path: Path, start: int) -> dict[str, float]:
    if values.get("completed", 0) < 1:
        raise ClusterSimError(f"{path}, line {start + 1}: no successful request: nothing measured")
    return values


def _number(text: str, name: str, where: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ClusterSimError(f"{where}: {name} is {text!r}, not a number", field=name, value=text) from None
    if math.isnan(value) or value < 0:
        raise ClusterSimError(f"{where}: {name} is {text!r}; valid: a number >= 0", field=name, value=text)
    return value
