"""The left-out residuals intervals are built from: ``residuals.toml`` beside this module.

``benchmarks/calibrate_intervals.py --write`` writes it from leave-one-source-out cross-validation
of the bundled ground truth (``clustersim.validation.crossval``): per scored case, the log residual
``r = ln(measured / predicted)`` of its duration or bytes (a rate's residual has its sign flipped) with the
prediction made by constants fitted without the case's source, and what the case ran on (kind, chip,
accelerator, framework, devices, for training its layout's features, for a collective its message size). The
file's header records when it was made and a ``fingerprint`` (sha256) of the calibration and case files it was
made from, so that a test notices when they change and the residuals were not made again.
"""

from __future__ import annotations

import functools
import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from clustersim.catalog.tomlfiles import read_toml
from clustersim.errors import ClusterSimError
from clustersim.intervals.layout import ATTENTION_DP, LAYOUT_FEATURES

PACKAGE, FILE_NAME = "clustersim.intervals", "residuals.toml"
KINDS = ("training", "inference", "collective", "memory")
LATENCY_FIELDS = {"ttft_s": "TTFT", "tpot_s": "TPOT"}
"""Serving latency means (and their names in words), what the closed forms and the simulator both give: their
residuals size only their own field's intervals (a case's other residual is of its primary figure, throughput)."""
PERCENTILE_FIELDS = {
    "ttft_p50_s": "median TTFT",
    "ttft_p99_s": "p99 TTFT",
    "tpot_p50_s": "median TPOT",
    "tpot_p99_s": "p99 TPOT",
}
"""Serving latency percentiles over a run's requests (a request's TPOT: its mean time between output tokens, as
vLLM's and SGLang's load generators report it), which only a simulated run predicts; each sizes its own intervals."""
PERCENTILE_OF = {name: name.split("_p")[0] + "_s" for name in PERCENTILE_FIELDS}
"""Each percentile's mean (``LATENCY_FIELDS``): its interval is never narrower than the mean's while its own residuals
come from too few sources (``clustersim.intervals.lookup``)."""
MEASURED_LATENCY_FIELDS = LATENCY_FIELDS | PERCENTILE_FIELDS
"""Every serving latency field a case may measure beside its throughput, and its name in words."""


def measure_of(field: str) -> str:
    """The figure whose intervals a residual of ``field`` sizes: a latency field its own, any other the primary."""
    return field if field in MEASURED_LATENCY_FIELDS else "primary"


_TEXT = ("id", "source", "kind", "chip", "accelerator", "framework", "field")


@dataclass(frozen=True)
class Residual:
    """One left-out case: ``r = ln(measured / predicted)`` of its duration, and what it ran on."""

    id: str
    source: str  # the first word of the case's source (``clustersim.validation.cases.source_key``)
    kind: str  # training, inference, collective or memory
    chip: str  # clustersim.intervals.lookup.chip_of(accelerator, family)
    accelerator: str
    framework: str
    devices: int
    field: str  # the case's primary measured field
    r: float
    layout: tuple[str, ...] = ()  # training: the features of the case's layout (clustersim.intervals.layout)
    size_bytes: int = 0  # a collective's message size (0: not a collective)

    def to_toml(self) -> str:
        """One inline table (a line of ``residuals.toml``)."""
        text = ", ".join(f"{name} = {_quoted(getattr(self, name))}" for name in _TEXT)
        layout = f", layout = [{', '.join(_quoted(f) for f in self.layout)}]" if self.layout else ""
        size = f", size_bytes = {self.size_bytes}" if self.size_bytes else ""
        return f"{{ {text}, devices = {self.devices}, r = {self.r!r}{layout}{size} }}"


@dataclass(frozen=True)
class ResidualTable:
    """The residuals and the header that says how they were made."""

    residuals: tuple[Residual, ...]
    header: Mapping[str, Any] = field(default_factory=dict)
    path: str = ""

    def of_kind(self, kind: str, field: str = "") -> list[Residual]:
        """The residuals of ``kind`` that size ``field``'s intervals (default: the primary figure's)."""
        return [r for r in self.residuals if r.kind == kind and measure_of(r.field) == measure_of(field)]


def _quoted(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    import json

    return json.dumps(text, ensure_ascii=False)


def default_path() -> Path:
    """``residuals.toml`` inside the package."""
    return Path(str(resources.files(PACKAGE).joinpath(FILE_NAME)))


@functools.cache
def _packaged() -> ResidualTable:
    return read_residuals(default_path())


def load_residuals(path: str | Path | None = None) -> ResidualTable:
    """The residuals in ``path`` (None: the packaged file, read once)."""
    return _packaged() if path is None else read_residuals(path)


def read_residuals(path: str | Path) -> ResidualTable:
    """Parse a residuals file; ``ClusterSimError`` naming the file, the row and the problem."""
    data = read_toml(path, "residuals file")
    rows = data.get("residuals", [])
    if not isinstance(rows, list):
        raise ClusterSimError(f"{path}: 'residuals' must be an array of tables")
    parsed = tuple(_row(path, number, row) for number, row in enumerate(rows, start=1))
    header = {k: v for k, v in data.items() if k != "residuals"}
    return ResidualTable(parsed, header, str(path))


def _row(path: str | Path, number: int, row: Any) -> Residual:
    where = f"{path}: residual {number}"
    if not isinstance(row, dict):
        raise ClusterSimError(f"{where}: must be a table")
    missing = [name for name in (*_TEXT, "devices", "r") if name not in row]
    if missing:
        raise ClusterSimError(f"{where}: missing {', '.join(missing)}")
    if row["kind"] not in KINDS:
        raise ClusterSimError(f"{where}: kind {row['kind']!r} (valid: {', '.join(KINDS)})")
    r, devices = row["r"], row["devices"]
    if isinstance(r, bool) or not isinstance(r, int | float) or not math.isfinite(r):
        raise ClusterSimError(f"{where}: r must be a finite number, got {r!r}")
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ClusterSimError(f"{where}: devices must be a positive integer, got {devices!r}")
    layout = row.get("layout", [])
    features = (*LAYOUT_FEATURES, ATTENTION_DP)
    if not isinstance(layout, list) or any(feature not in features for feature in layout):
        raise ClusterSimError(f"{where}: layout {layout!r} (valid: a list of {', '.join(features)})")
    size = row.get("size_bytes", 0)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ClusterSimError(f"{where}: size_bytes must be a whole number of bytes, got {size!r}")
    text = {name: str(row[name]) for name in _TEXT}
    return Residual(**text, devices=devices, r=float(r), layout=tuple(layout), size_bytes=size)


def fingerprint(files: Iterable[tuple[str, Path]]) -> str:
    """``sha256:`` of the files' names and bytes, in the order given (the inputs the residuals came from)."""
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + Path(path).read_bytes() + b"\0")
    return "sha256:" + digest.hexdigest()


def round_significant(value: float, digits: int = 4) -> float:
    """``value`` to ``digits`` significant digits."""
    return float(f"{value:.{digits}g}")


HeaderValue = str | int | float | list[str] | list[int]


def _value(value: HeaderValue) -> str:
    if isinstance(value, list):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    return _quoted(value) if isinstance(value, str) else repr(value)


def residuals_toml(residuals: Sequence[Residual], header: Mapping[str, HeaderValue]) -> str:
    """The text of a residuals file: comment lines, the header's keys, then one residual per line."""
    lines = [
        "# Left-out residuals of the bundled ground truth, for clustersim's prediction intervals",
        "# (clustersim.intervals). Written by `python benchmarks/calibrate_intervals.py --write`; do not",
        "# edit by hand: rerun that script when the calibration or the cases change (a test compares the",
        "# fingerprint below with the files named in `inputs`).",
        "",
    ]
    lines += [f"{key} = {_value(value)}" for key, value in header.items()]
    lines += ["", "residuals = ["]
    lines += [f"  {r.to_toml()}," for r in residuals]
    lines += ["]", ""]
    return "\n".join(lines)
