"""Fit a user's overlay of the collective calibration to their own cases (``clustersim calibrate``).

The fit is the shipped one (``specs.COLLECTIVE``: the same constants, bounds, objective, search and
the cases of at least 1 MiB), started from the packaged values, with the same identifiability rules:

* a constant the packaged file holds as a ``prior`` stays there;
* a constant no user case informs (``informing``: its prediction does not move with it, e.g. the
  gather family's ramp and a file of all-reduces) stays at the packaged value;
* a fitted constant whose profile is flat over the user's cases (``profile``: the objective moves by
  under 0.5% over a 4x range) goes back to the packaged value: the data cannot tell the values apart.

What moved is written as an overlay (``write_overlay``) that ``CLUSTERSIM_COLLECTIVE_CALIBRATION`` or
``--calibration`` lays over the packaged file. The error reported is the MAPE of busbw (of each
case's primary field) before (packaged) and after (fitted), and, with at least ``MIN_LEFT_OUT_CASES``
cases in two or more folds, left out: each fold (a node count, else a file, else every k-th case by
size) predicted by a fit to the other folds.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w

from clustersim.catalog.registry import Catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.errors import ClusterSimError
from clustersim.files import write_whole
from clustersim.network.analytic import CALIBRATION_FILE, CommCalibration, collective_calibration
from clustersim.validation.cases import Case
from clustersim.validation.fit import Constant, Prepared, fit, prepare_cases
from clustersim.validation.informing import informing
from clustersim.validation.manifest import priors, read_manifest
from clustersim.validation.profile import profile
from clustersim.validation.scoring import Skipped
from clustersim.validation.specs import COLLECTIVE

MIN_LEFT_OUT_CASES = 8
DEFAULT_FOLDS = 4
DIGITS = 3


@dataclass(frozen=True)
class Held:
    """A constant kept at the packaged value, and why."""

    name: str
    value: float
    why: str


@dataclass(frozen=True)
class FitResult:
    """One fit to some cases: the calibration, the constants it moved and those it held."""

    calibration: CommCalibration
    moved: dict[Constant, float]
    held: list[Held]
    residual: float


@dataclass(frozen=True)
class LeftOut:
    """The left-out error: how the cases were split, and the MAPE of the held-out predictions."""

    split: str
    folds: int
    cases: int
    before_mape: float
    after_mape: float


@dataclass(frozen=True)
class UserCalibration:
    """The fit to all the user's cases, its in-sample error and the left-out error where there is one."""

    fit: FitResult
    case_ids: list[str]
    skipped: list[Skipped]
    before_mape: float
    after_mape: float
    left_out: LeftOut | None


def shipped_calibration() -> CommCalibration:
    """The packaged collective calibration, without the user's files."""
    return collective_calibration(use_env=False)


def mape(cases: Sequence[Prepared[CommCalibration]], calibration: CommCalibration) -> float:
    """The mean |predicted / measured - 1| of the cases' primary fields under ``calibration``."""
    if not cases:
        return math.nan
    return sum(abs(case.predict(calibration) / case.measured - 1) for case in cases) / len(cases)


def fit_cases(
    cases: Sequence[Prepared[CommCalibration]], start: CommCalibration, *, max_iterations: int | None = None
) -> FitResult:
    """The shipped fit of ``cases`` from ``start`` under the rules of the module's docstring."""
    stated = priors(read_manifest(COLLECTIVE, packaged_path(COLLECTIVE.package, COLLECTIVE.file_name)))
    informed = informing(COLLECTIVE, cases, start, priors=frozenset(stated))
    blind = {(i.constant.table, i.constant.key) for i in informed if not i.case_ids}
    result = fit(COLLECTIVE, cases, start, priors=stated | blind, max_iterations=max_iterations, digits=DIGITS)
    held = [
        Held(c.name, COLLECTIVE.get(start, c), "a stated prior of the packaged file")
        for g in result.groups
        for c in g.priors
        if (c.table, c.key) in stated
    ]
    held += [
        Held(i.constant.name, COLLECTIVE.get(start, i.constant), "no case of yours depends on it")
        for i in informed
        if not i.case_ids
    ]
    flat = [p for p in profile(result, cases) if p.flat and not p.prior]
    held += [Held(p.constant.name, COLLECTIVE.get(start, p.constant), "flat over your cases") for p in flat]
    calibration = COLLECTIVE.replace(result.calibration, {p.constant: COLLECTIVE.get(start, p.constant) for p in flat})
    flat_constants = {p.constant for p in flat}
    moved = {
        c: COLLECTIVE.get(calibration, c)
        for g in result.groups
        for c in g.constants
        if c not in flat_constants and COLLECTIVE.get(calibration, c) != COLLECTIVE.get(start, c)
    }
    residual = result.groups[0].residual if result.groups else 0.0
    return FitResult(calibration, moved, held, residual)


def _folds(cases: Sequence[Prepared[CommCalibration]], k: int) -> tuple[str, list[list[int]]]:
    """Indices of ``cases`` per fold: by node count where there are several, else by file, else every
    k-th case in size order."""
    nodes = [c.case.system.nodes if c.case.system else None for c in cases]
    for split, keys in (("node count", nodes), ("file", [c.source for c in cases])):
        groups: dict[Any, list[int]] = {}
        for index, key in enumerate(keys):
            groups.setdefault(key, []).append(index)
        if len(groups) >= 2:
            return f"leave one {split} out", list(groups.values())
    order = sorted(range(len(cases)), key=lambda i: (cases[i].case.op or "", cases[i].case.size_bytes or 0))
    k = max(2, min(k, len(cases)))
    return f"{k}-fold (every {k}th case by size)", [order[start::k] for start in range(k)]


def calibrate_user(
    cases: Sequence[Case],
    catalog: Catalog,
    *,
    max_iterations: int | None = None,
    folds: int = DEFAULT_FOLDS,
    on_progress: Callable[[str], None] | None = None,
) -> UserCalibration:
    """Fit the user's ``cases`` (collective cases of at least 1 MiB; the rest are skipped, and said so)."""
    start = shipped_calibration()
    prepared, skipped = prepare_cases(COLLECTIVE, cases, catalog, start)
    others = [c for c in cases if c.kind != "collective"]
    skipped += [Skipped(c.id, f"a {c.kind} case: calibrate fits collective cases") for c in others]
    small = [c for c in cases if c.kind == "collective" and not COLLECTIVE.selects(c)]
    skipped += [Skipped(c.id, "under 1 MiB: latency, which the calibration does not fit") for c in small]
    if not prepared:
        raise ClusterSimError(
            f"no collective case of at least 1 MiB to fit among {len(cases)} cases (ingest nccl-tests output with "
            f"clustersim ingest; sizes below 1 MiB are latency-bound)",
            field="CASES",
        )
    if on_progress:
        on_progress(f"fitting {len(prepared)} cases")
    result = fit_cases(prepared, start, max_iterations=max_iterations)
    left_out = None
    if len(prepared) >= MIN_LEFT_OUT_CASES:
        split, groups = _folds(prepared, folds)
        before: list[float] = []
        after: list[float] = []
        for number, test in enumerate(groups, start=1):
            if on_progress:
                on_progress(f"left-out fold {number} of {len(groups)}")
            train = [c for i, c in enumerate(prepared) if i not in set(test)]
            fold = fit_cases(train, start, max_iterations=max_iterations).calibration
            held_out = [prepared[i] for i in test]
            before += [abs(c.predict(start) / c.measured - 1) for c in held_out]
            after += [abs(c.predict(fold) / c.measured - 1) for c in held_out]
        left_out = LeftOut(split, len(groups), len(before), sum(before) / len(before), sum(after) / len(after))
    return UserCalibration(
        result,
        [c.case.id for c in prepared],
        skipped,
        mape(prepared, start),
        mape(prepared, result.calibration),
        left_out,
    )


def overlay_tables(result: UserCalibration, files: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The overlay's tables: each moved constant with its source, the fit's note, case ids and residual."""
    today = datetime.date.today().isoformat()
    named = ", ".join(files)
    note = (
        f"{today} by clustersim calibrate: {COLLECTIVE.objective} {result.fit.residual:.4f} over "
        f"{len(result.case_ids)} cases of {named}; busbw MAPE {100 * result.before_mape:.1f}% -> "
        f"{100 * result.after_mape:.1f}%"
    )
    tables: dict[str, dict[str, Any]] = {}
    for constant, value in sorted(result.fit.moved.items(), key=lambda item: item[0].name):
        table = tables.setdefault(
            constant.table,
            {"source": f"fitted by clustersim calibrate to {named}", "fitted": note, "fitted_on": result.case_ids},
        )
        table[constant.key] = value
        table["residual"] = float(f"{result.fit.residual:.4g}")
    return tables


def write_overlay(result: UserCalibration, files: Sequence[str], path: str | Path) -> None:
    """Write the overlay TOML to ``path`` whole or not at all (a temporary file renamed over it); it is
    read back through the calibration loader before the rename, so a file that is written is one it reads."""
    target = Path(path)
    held = "\n".join(f"#   {h.name} = {h.value:g}: {h.why}" for h in result.fit.held)
    header = (
        "# A clustersim collective calibration overlay, written by `clustersim calibrate` "
        f"(read it with --calibration {target.name} or CLUSTERSIM_COLLECTIVE_CALIBRATION).\n"
        f"# Over the packaged {CALIBRATION_FILE}: only the entries below change; kept at the packaged value:\n"
        f"{held or '#   (none)'}\n\n"
    )
    body = tomli_w.dumps(overlay_tables(result, [Path(f).name for f in files]))
    write_whole(target, header + body, option="-o", verify=_reads_back)


def _reads_back(path: Path) -> None:
    """Refuse an overlay the calibration loader would not read (before it replaces anything)."""
    collective_calibration([path], use_env=False)
