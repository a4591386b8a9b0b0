"""Intervals for ground-truth cases: the residuals cross-validation leaves, and honest coverage.

* ``residuals_of`` turns ``CrossValidation.cases`` (each case's prediction by constants fitted
  without its source) into the rows of ``clustersim/intervals/residuals.toml``: ``r = ln(measured /
  predicted)`` of the case's duration (a rate's sign flipped), with its chip, framework and devices.
* ``INPUTS`` are the files the residuals depend on; ``inputs_fingerprint`` hashes them (the file's
  header keeps it, and a test compares).
* ``case_interval`` gives a scored case its interval from the residuals of every *other* source
  (leave-one-source-out conformal: a case's own residual never sizes its interval, else coverage
  would be in-sample and flattering), in the unit of its prediction.
* ``coverage`` is the share of cases whose measured value falls inside, ``median_width`` the median
  relative width ``(high - low) / predicted``.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Protocol

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.intervals import Interval, Residual, ResidualTable, load_residuals, spread_for
from clustersim.intervals.layout import job_features, serving_features
from clustersim.intervals.lookup import DEFAULT_FRAMEWORK, chip_of
from clustersim.intervals.residuals import MEASURED_LATENCY_FIELDS, round_significant
from clustersim.validation.cases import PRIMARY_FIELDS, Case, bundled_dir, project_case_files

DURATION_FIELDS = frozenset({"step_time_s", "time_us", *MEASURED_LATENCY_FIELDS})
"""Fields that are durations (serving latencies: means and percentiles); every other (tokens/s, TFLOP/s, MFU,
busbw, algbw) is a rate, but memory."""
AMOUNT_FIELDS = DURATION_FIELDS | frozenset(PRIMARY_FIELDS["memory"])
"""Fields whose residual and interval go as the figure itself (durations, and memory's bytes); a rate's are inverted."""

INPUTS: tuple[tuple[str, str, str], ...] = (
    ("compute/efficiency.toml", "clustersim.compute", "efficiency.toml"),
    ("compute/software.toml", "clustersim.compute", "software.toml"),
    ("network/calibration.toml", "clustersim.network", "calibration.toml"),
    ("serving/calibration.toml", "clustersim.serving", "calibration.toml"),
    ("serving/engines.toml", "clustersim.serving", "engines.toml"),
)
CASE_FILES = ("training.jsonl", "inference.jsonl", "collectives.jsonl")
"""The bundled files cross-validated for the residuals (memory's are held out already: ``MEMORY_FILE``)."""
MEMORY_FILE = "memory.jsonl"
"""The bundled memory cases: no memory constant is fitted, so their residuals are those of the packaged model."""


def input_files() -> list[tuple[str, Path]]:
    """The calibration files and the case files (bundled, then the project's own) the residuals are
    made from, named as in the header."""
    found = [(name, Path(str(resources.files(package).joinpath(file)))) for name, package, file in INPUTS]
    found += [(f"validation/data/{name}", bundled_dir() / name) for name in (*CASE_FILES, MEMORY_FILE)]
    return found + [(f"validation/project/{path.name}", path) for path in project_case_files()]


def inputs_fingerprint() -> str:
    """The sha256 of ``input_files`` (their names and bytes)."""
    from clustersim.intervals.residuals import fingerprint

    return fingerprint(input_files())


@dataclass(frozen=True)
class Context:
    """What a case ran on, as the interval lookup groups it."""

    accelerator: str
    family: str
    framework: str
    devices: int
    layout: tuple[str, ...] = ()  # a training layout's or a serving deployment's features (clustersim.intervals.layout)
    size_bytes: int = 0  # a collective's message size (0: another kind)


def context_of(case: Case, catalog: Catalog) -> Context:
    """The case's accelerator (its catalog id), family, framework (the kind's default where it names
    none), devices and, for training, its layout's features (unstated fields resolved as the estimate
    resolves them); ``ClusterSimError`` where the case names no known accelerator."""
    system = case.system
    if system is None or not system.accelerator:
        raise ClusterSimError(f"case {case.id}: no system.accelerator")
    accelerator = catalog.accelerator(system.accelerator)
    framework = (case.software.framework if case.software else None) or DEFAULT_FRAMEWORK.get(case.kind, "")
    groups = case.parallel.attention_dp if case.parallel is not None and case.parallel.attention_dp else 1
    moe = case.model is not None and case.model.moe is not None and bool(case.model.moe.experts)
    training = case.kind in ("training", "memory")
    layout = training_layout(case, catalog) if training else serving_features(groups, experts=moe)
    size = int(case.size_bytes or 0) if case.kind == "collective" else 0
    return Context(accelerator.id, accelerator.family, framework, system.devices or 1, layout, size)


def training_layout(case: Case, catalog: Catalog) -> tuple[str, ...]:
    """A training case's layout features (``clustersim.intervals.layout``), its unstated fields resolved as
    the estimate resolves them."""
    from clustersim.validation.training import case_setup

    setup = case_setup(case, catalog)
    return job_features(setup.layout, setup.job)


def predicted_over_measured(row: Residual) -> float:
    """The residual's held-out prediction over the measured value, in its field's own terms."""
    return math.exp(-row.r) if row.field in AMOUNT_FIELDS else math.exp(row.r)


def log_residual(field: str, measured: float, predicted: float) -> float:
    """``ln(measured / predicted)`` of the duration or bytes ``field`` measures (of its inverse for a rate)."""
    r = math.log(measured / predicted)
    return r if field in AMOUNT_FIELDS else -r


class HeldOut(Protocol):
    """A case's held-out prediction (``clustersim.validation.crossval.HeldOutCase``)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def field(self) -> str: ...
    @property
    def measured(self) -> float: ...
    @property
    def held_out(self) -> float | None: ...


def residuals_of(
    held_out: Iterable[HeldOut], cases: Mapping[str, Case], catalog: Catalog
) -> tuple[list[Residual], list[tuple[str, str]]]:
    """The residual of each held-out case (``crossval.HeldOutCase``) with a held-out prediction, rounded
    to 4 significant digits; and ``(id, reason)`` of those left out (no held-out figure, no context)."""
    rows: list[Residual] = []
    left: list[tuple[str, str]] = []
    for held in held_out:
        case_id, field, measured, predicted = held.id, held.field, held.measured, held.held_out
        if predicted is None or not (predicted > 0 and measured > 0):
            left.append((case_id, "no held-out prediction"))
            continue
        try:
            ctx = context_of(cases[case_id], catalog)
        except (ClusterSimError, KeyError) as exc:
            left.append((case_id, str(exc)))
            continue
        rows.append(
            Residual(
                id=case_id,
                source=held.source,
                kind=held.kind,
                chip=chip_of(ctx.accelerator, ctx.family),
                accelerator=ctx.accelerator,
                framework=ctx.framework,
                devices=ctx.devices,
                field=field,
                r=round_significant(log_residual(field, measured, predicted)),
                layout=ctx.layout,
                size_bytes=ctx.size_bytes,
            )
        )
    return rows, left


@dataclass(frozen=True)
class Prediction:
    """A case's primary field predicted by constants that were not fitted on it (``HeldOut``)."""

    id: str
    kind: str
    source: str
    field: str
    measured: float
    held_out: float | None


def case_interval(
    case: Case,
    field: str,
    predicted: float,
    source: str,
    catalog: Catalog,
    *,
    level: float,
    table: ResidualTable | None = None,
) -> Interval | None:
    """The interval of a case's prediction of ``field`` from the residuals of every source but its own
    (``source``: its ``cases.source_key``; a latency field from that field's residuals); None where there are
    none (memory cases) or the case names no known accelerator."""
    try:
        ctx = context_of(case, catalog)
    except ClusterSimError:
        return None
    found = spread_for(
        case.kind,
        accelerator=ctx.accelerator,
        family=ctx.family,
        framework=ctx.framework,
        devices=ctx.devices,
        level=level,
        table=table or load_residuals(),
        exclude_source=source,
        layout=ctx.layout,
        field=field,
        size_bytes=ctx.size_bytes,
    )
    if found is None:
        return None
    return found.duration(predicted) if field in AMOUNT_FIELDS else found.rate(predicted)


@dataclass(frozen=True)
class LeftOut:
    """One residual judged by the interval of the other sources' residuals: whether the measured value
    fell inside, the interval's half-width and the prediction's |error|, relative to the prediction."""

    row: Residual
    inside: bool
    half_width: float
    abs_error: float
    basis: str


def left_out(rows: Sequence[Residual], level: float) -> list[LeftOut]:
    """Every row's held-out prediction judged by a leave-its-source-out interval at ``level``: how
    intervals fare on published cases the model never saw (neither its constants nor its residuals)."""
    table = ResidualTable(tuple(rows))
    judged: list[LeftOut] = []
    for row in rows:
        found = spread_for(
            row.kind,
            accelerator=row.accelerator,
            family=row.chip,  # chip_of(accelerator, chip) is the row's chip
            framework=row.framework,
            devices=row.devices,
            level=level,
            table=table,
            exclude_source=row.source,
            layout=row.layout,
            field=row.field,
            size_bytes=row.size_bytes,
        )
        if found is None:
            continue
        duration = found.duration(1.0)
        # in the duration's terms the prediction is 1 and the measured value e^r; a rate's relative
        # width is that of its own interval
        rate = found.rate(1.0)
        half = (duration.high - duration.low) / 2 if row.field in AMOUNT_FIELDS else (rate.high - rate.low) / 2
        error = abs(predicted_over_measured(row) - 1)
        judged.append(LeftOut(row, duration.contains(math.exp(row.r)), half, error, found.basis))
    return judged


def coverage(pairs: Sequence[tuple[float, float, Interval | None]]) -> tuple[float, float] | None:
    """``(share of measured values inside their interval, median relative width (high - low) /
    predicted)`` over ``(measured, predicted, interval)``; None where no case has an interval."""
    with_interval = [(m, p, i) for m, p, i in pairs if i is not None]
    if not with_interval:
        return None
    inside = sum(i.contains(m) for m, _, i in with_interval) / len(with_interval)
    width = statistics.median((i.high - i.low) / p for _, p, i in with_interval)
    return inside, width
