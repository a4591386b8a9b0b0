"""Read what TensorRT-LLM's ``trtllm-bench throughput`` prints into a ``ServingRun``.

Understood, in the 0.17 layout (``= ENGINE DETAILS`` or ``= PyTorch backend``, ``= WORLD + RUNTIME
INFORMATION``, ``= PERFORMANCE OVERVIEW`` holding the request details) and the later one (``= REQUEST
DETAILS`` first): ``TensorRT-LLM Version``, ``Dtype``, ``KV Cache Dtype``, ``Quantization``, ``TP/PP/EP
Size``, ``Average Input/Output Length (tokens)``, ``Number of requests``, the output throughput (``Total
Output Throughput (tokens/sec)``, or 0.17's ``Token Throughput (tokens/sec)``, which counts generated tokens:
3000 x 128 / 13.5257 s = 28,390 in the TensorRT-LLM docs' example), ``Average time-to-first-token [TTFT]
(ms)`` and ``Average time-per-output-token [TPOT] (ms)`` where printed (streaming runs), and a
``--concurrency N`` on a ``trtllm-bench`` command line in the file. Without one the run is offline: every
request queued at once, the engine batching what fits (the case's ``scenario: offline``).

Refused, naming the file and line: no ``PERFORMANCE OVERVIEW`` or no throughput in it (a cut output), a
length missing, a value that is not a number, two runs in one file.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from clustersim.errors import ClusterSimError
from clustersim.ingest.serving_cases import ServingRun
from clustersim.ingest.text import read_output

OVERVIEW = "= PERFORMANCE OVERVIEW"
_SETTING = re.compile(r"^([A-Za-z][A-Za-z /+\-\[\]().]*?):\s+(\S+)\s*$")
_CONCURRENCY = re.compile(r"trtllm-bench\b.*--concurrency[ =](\d+)")
NUMBERS = {
    "Average Input Length (tokens)": "mean_input_tokens",
    "Average Output Length (tokens)": "mean_output_tokens",
    "Number of requests": "completed",
    "Total Output Throughput (tokens/sec)": "output_throughput",
    "Token Throughput (tokens/sec)": "output_throughput",
    "Average time-to-first-token [TTFT] (ms)": "mean_ttft_ms",
    "Average time-per-output-token [TPOT] (ms)": "mean_tpot_ms",
}
DEGREES = {"TP Size": "tp", "PP Size": "pp", "EP Size": "ep"}
FORMATS = {"fp8": "fp8", "nvfp4": "nvfp4", "bfloat16": "bf16", "float16": "fp16", "fp16": "fp16", "bf16": "bf16"}


def looks_like_trtllm_bench(text: str) -> bool:
    """Whether ``text`` is trtllm-bench output (its performance overview)."""
    return OVERVIEW in text and "TP Size:" in text


def read_trtllm_bench(path: str | Path, given_concurrency: int | None = None) -> ServingRun:
    """The run in the trtllm-bench output ``path`` (see the module's docstring); ``given_concurrency``: the
    ``--concurrency`` the run used where its command line is not in the file (must agree where it is)."""
    path = Path(path)
    lines = read_output(path).splitlines()
    overviews = [i + 1 for i, line in enumerate(lines) if line.strip() == OVERVIEW]
    if not overviews:
        raise ClusterSimError(f"{path}, line {len(lines)}: no '{OVERVIEW}' section (a cut output?)", field="FILES")
    if len(overviews) > 1:
        raise ClusterSimError(f"{path}, lines {overviews[0]} and {overviews[1]}: two runs in one file; split them")
    settings: dict[str, tuple[str, int]] = {}
    concurrency = None
    for number, line in enumerate(lines, start=1):
        found = _SETTING.match(line.strip())
        if found:
            settings.setdefault(found.group(1).strip(), (found.group(2), number))
        limit = _CONCURRENCY.search(line)
        if limit:
            concurrency = int(limit.group(1))
    values = _values(path, settings, overviews[0], len(lines))
    if given_concurrency is not None:
        if concurrency is not None and concurrency != given_concurrency:
            raise ClusterSimError(
                f"{path}: the command line says --concurrency {concurrency}, --concurrency says {given_concurrency}",
                field="--concurrency",
                value=given_concurrency,
            )
        concurrency = given_concurrency
    notes = []
    if concurrency is not None:
        values["max_concurrency"] = concurrency
    else:
        notes.append("no --concurrency: offline, every request queued at once")
    parallel = {
        key: int(settings[name][0]) for name, key in DEGREES.items() if settings.get(name, ("None",))[0].isdigit()
    }
    version = settings.get("TensorRT-LLM Version", ("",))[0]
    model = settings.get("Model", (None,))[0]
    if model:
        notes.append(f"model {model} per the output")
    return ServingRun(
        str(path),
        overviews[0],
        values,
        model_id=model,
        tool="trtllm-bench throughput",
        framework="tensorrt-llm",
        version=f"TensorRT-LLM {version}".strip(),
        offline=concurrency is None,
        notes=tuple(notes),
        parallel=parallel,
        precision=_precision(path, settings),
        kv_precision=FORMATS.get(settings.get("KV Cache Dtype", ("none",))[0].lower()),
    )


def _values(path: Path, settings: dict[str, tuple[str, int]], overview: int, last: int) -> dict[str, float]:
    values: dict[str, float] = {}
    for name, key in NUMBERS.items():
        if name not in settings or key in values:
            continue
        text, number = settings[name]
        try:
            value = float(text)
        except ValueError:
            raise ClusterSimError(f"{path}, line {number}: {name} is {text!r}, not a number", field=name) from None
        if not math.isfinite(value) or value < 0:
            raise ClusterSimError(f"{path}, line {number}: {name} is {text!r}; valid: a number >= 0", field=name)
        values[key] = value
    if "output_throughput" not in values or values["output_throughput"] <= 0:
        raise ClusterSimError(
            f"{path}, line {last}: the '{OVERVIEW}' section on line {overview} has no output throughput "
            f"(a cut output?)",
            field="FILES",
        )
    missing = [n for n, k in NUMBERS.items() if k in ("mean_input_tokens", "mean_output_tokens") and k not in values]
    if missing:
        raise ClusterSimError(f"{path}, line {overview}: no {' or '.join(repr(m) for m in missing)}", field="FILES")
    return values


def _precision(path: Path, settings: dict[str, tuple[str, int]]) -> str | None:
    quantization = settings.get("Quantization", ("None",))[0]
    if quantization.lower() not in ("none", "no_quant"):
        if quantization.lower() not in FORMATS:
            raise ClusterSimError(
                f"{path}, line {settings['Quantization'][1]}: quantization {quantization!r} is not a case precision "
                f"(valid: FP8, NVFP4, None)",
                field="Quantization",
                value=quantization,
            )
        return FORMATS[quantization.lower()]
    return FORMATS.get(settings.get("Dtype", ("",))[0].lower())
