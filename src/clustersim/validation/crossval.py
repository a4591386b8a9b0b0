"""Leave-one-source-out cross-validation: how well the fitted constants predict a source they never saw.

For each file and each calibrated kind in it (``clustersim.validation.specs``), the spec is fitted on
the cases its shipped fit uses (the in-sample fit), then once per source (``cases.source_key``) with that
source's cases left out (the held-out fit); each source's scored cases are then scored three ways:

* ``shipped_mape``: with the constants as the calibration files give them (``validate``'s figure);
* ``in_sample_mape``: with the in-sample fit;
* ``held_out_mape``: with the fit that never saw the source.

Every fit starts from the shipped constants and uses the same search and iteration budget, and keeps the
constants marked ``prior`` as they are; a held-out fit searches again from the middle of each constant's bounds and
keeps, per group, whichever start ends lower, so a constant the other sources leave flat cannot keep its shipped
value, which the left-out source helped fit. The cases a fit uses are the selected ones its manifest's
``fitted_on`` lists, and any case the package does not ship (a user's): a packaged case the shipped fit
leaves out on purpose (a source no fit uses, a newer accelerator held out) stays out of every fold too,
so that "left out" means the shipped procedure without that source. Only the groups holding the source's
cases are refitted (training: its accelerator families). A group left with no case at all (a family with
one source) takes the constants of the spec's fallback group (training: Hopper's, as the model does for
a family it has no fractions for), and the row says so; without a fallback there is no held-out figure.
A source none of whose cases enter the fit (collectives under 1 MiB) has no refit: held-out and
in-sample agree. ``profile`` reports the flat constants of every in-sample fit. Training's software
constants fitted on one source alone are held out at their priors
(``clustersim.validation.software_holdout``).

No held-out fit may keep what the left-out source taught: a constant whose informing cases
(``clustersim.validation.informing``) all belong to that source is held at its stated prior
(``FitSpec.prior``) and the row lists it in ``held_at_prior``; a constant with no stated prior leaves
the source with no held-out figure. Cases that cannot be predicted are listed per source in
``skipped`` with the reason, never dropped silently. ``held_out_cases`` gives every scored case's
prediction with the shipped and the held-out constants, and so each measured serving TTFT and TPOT beside
it (``LATENCY_FIELDS``): the left-out residuals that intervals (``clustersim.validation.intervals``) are
built from.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import default_case_files, read_cases, source_key
from clustersim.validation.fit import Constant, Fit, FitSpec, Prepared, fit, prepare_cases
from clustersim.validation.informing import Informed, informing, only_source
from clustersim.validation.manifest import fitted_case_ids, priors, read_manifest
from clustersim.validation.profile import Profile, profile
from clustersim.validation.run import LATENCY_FIELDS
from clustersim.validation.software_holdout import held_out_software
from clustersim.validation.specs import SPECS

Progress = Callable[[str, int, int], None]
"""``(what runs now, fits done, fits in all)``."""


@dataclass(frozen=True)
class HeldAtPrior:
    """A constant the left-out source alone informs, and the prior it is held at instead."""

    constant: str
    value: float
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"constant": self.constant, "value": self.value, "reason": self.reason}


@dataclass(frozen=True)
class SourceResult:
    """One source's MAPE (fractions) with the shipped, the in-sample and the held-out constants."""

    file: str
    kind: str
    source: str
    cases: int  # scored cases
    fitted_cases: int  # of them, those the fit selects
    shipped_mape: float | None
    in_sample_mape: float | None
    held_out_mape: float | None
    note: str = ""
    held_at_prior: tuple[HeldAtPrior, ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()  # (case id, reason) of the source's cases not predicted

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "kind": self.kind,
            "source": self.source,
            "cases": self.cases,
            "fitted_cases": self.fitted_cases,
            "shipped_mape": self.shipped_mape,
            "in_sample_mape": self.in_sample_mape,
            "held_out_mape": self.held_out_mape,
            "note": self.note,
            "held_at_prior": [h.to_json() for h in self.held_at_prior],
            "skipped": [{"id": i, "reason": r} for i, r in self.skipped],
        }


@dataclass(frozen=True)
class HeldOutCase:
    """One scored case's primary field: measured, and predicted with the shipped constants and with
    the constants fitted without its source (None: no held-out figure for the source)."""

    file: str
    kind: str
    id: str
    source: str
    group: str
    field: str
    measured: float
    shipped: float | None
    held_out: float | None

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class LatencySource:
    """One source's MAPE of a latency field (TTFT, TPOT) with the shipped constants and left out (its refit)."""

    field: str
    file: str
    source: str
    cases: int
    shipped_mape: float | None
    held_out_mape: float | None


def _mean_error(cases: Sequence[HeldOutCase], which: str) -> float | None:
    """Mean |predicted / measured - 1| of ``cases`` predicted by ``which`` constants (None: any unpredicted)."""
    predicted: list[float | None] = [getattr(c, which) for c in cases]
    errors = [abs(p / c.measured - 1) for p, c in zip(predicted, cases, strict=True) if p is not None]
    return sum(errors) / len(errors) if len(errors) == len(cases) else None


@dataclass
class CrossValidation:
    """Per source the three MAPEs, per case the held-out prediction, and the profiles of the
    in-sample fits (with their file)."""

    sources: list[SourceResult] = field(default_factory=list)
    profiles: list[tuple[str, Profile]] = field(default_factory=list)
    fits: list[tuple[str, Fit[Any]]] = field(default_factory=list)
    cases: list[HeldOutCase] = field(default_factory=list)

    def latency_sources(self) -> list[LatencySource]:
        """Per latency field, file and source, the MAPE of its held-out cases with the shipped constants and with
        the constants fitted without the source (None: no held-out figure)."""
        groups: dict[tuple[str, str, str], list[HeldOutCase]] = {}
        for case in self.cases:
            if case.field in LATENCY_FIELDS.get(case.kind, ()):
                groups.setdefault((case.field, case.file, case.source), []).append(case)
        rows = []
        for (name, file, source), members in groups.items():
            shipped, held = _mean_error(members, "shipped"), _mean_error(members, "held_out")
            rows.append(LatencySource(name, file, source, len(members), shipped, held))
        return rows

    def to_json(self) -> dict[str, Any]:
        return {
            "cross_validation": [s.to_json() for s in self.sources],
            "latency_cross_validation": [dataclasses.asdict(row) for row in self.latency_sources()],
            "held_out_cases": [c.to_json() for c in self.cases],
            "profiles": [
                {
                    "file": path,
                    "group": p.group,
                    "constant": p.constant.name,
                    "value": p.value,
                    "low": p.low,
                    "high": p.high,
                    "change": p.change,
                    "flat": p.flat,
                    "prior": p.prior,
                }
                for path, p in self.profiles
            ],
        }


@dataclass
class _Job:
    """One file's cases of one kind, prepared."""

    path: str
    spec: FitSpec[Any]
    start: Any
    priors: set[tuple[str, str]]
    scored: list[Prepared[Any]]
    fitted: list[Prepared[Any]]
    sources: list[str]
    skipped: dict[str, list[tuple[str, str]]]  # per source, (case id, reason) of cases not predicted
    informed: list[Informed]
    file_of: dict[str, str]  # case id -> the name of the file it came from

    def refits(self) -> list[str]:
        """The sources that have cases in the fit (each needs a held-out fit)."""
        return [s for s in self.sources if any(p.source == s for p in self.fitted)]


def cross_validate(
    files: Sequence[tuple[str, Path]],
    catalog: Catalog,
    *,
    max_iterations: int | None = None,
    min_size_bytes: float | None = None,
    on_progress: Progress | None = None,
) -> CrossValidation:
    """Leave-one-source-out over the files ``(name, path)``, one fit per case kind over the cases of that
    kind in every file (the shared ground truth and the project's own fit together); ``max_iterations``
    overrides each spec's budget, ``min_size_bytes`` leaves smaller collective cases unscored (as
    ``validate --min-size``)."""
    jobs = _jobs(files, catalog, min_size_bytes)
    total = sum(1 + len(job.refits()) for job in jobs)
    done = 0
    result = CrossValidation()

    def step(what: str) -> None:
        if on_progress is not None:
            on_progress(what, done, total)

    for job in jobs:
        step(f"{job.path}: fitting every source")
        full = fit(job.spec, job.fitted, job.start, priors=job.priors, max_iterations=max_iterations)
        done += 1
        result.fits.append((job.path, full))
        result.profiles.extend((job.path, p) for p in profile(full, job.fitted))
        refits = job.refits()
        for source in job.sources:
            held: Any = full.calibration
            note = ""
            held_at: tuple[HeldAtPrior, ...] = ()
            if source in refits:
                step(f"{job.path}: leaving out {source}")
                held, note, held_at = _held_out(job, full, source, max_iterations)
                done += 1
            else:
                note = "none of its cases enter the fit"
            row, cases = _result(job, source, full.calibration, held, note, catalog)
            result.sources.append(dataclasses.replace(row, held_at_prior=held_at))
            result.cases.extend(cases)
    step("done")
    return result


def _jobs(files: Sequence[tuple[str, Path]], catalog: Catalog, min_size_bytes: float | None) -> list[_Job]:
    named = [(name, case) for name, path in files for case in read_cases(path)]
    packaged = {case.id for _, path in default_case_files() for case in read_cases(path)}
    jobs: list[_Job] = []
    for kind, spec in SPECS.items():
        file_of = {c.id: name for name, c in named if c.kind == kind}
        own = [c for _, c in named if c.kind == kind]
        if not own:
            continue
        name = " + ".join(dict.fromkeys(file_of.values()))
        if min_size_bytes is not None and kind == "collective":
            own = [c for c in own if (c.size_bytes or 0) >= min_size_bytes]
        start = spec.current()
        scored, skipped = prepare_cases(spec, own, catalog, start, selected=False)
        manifest = read_manifest(spec)
        held = priors(manifest)
        shipped = fitted_case_ids(manifest)
        fitted = [p for p in scored if spec.selects(p.case) and _in_shipped_fit(p.case.id, shipped, packaged)]
        source_of = {c.id: source_key(c.source) for c in own}
        sources = list(dict.fromkeys([*(p.source for p in scored), *(source_of[s.id] for s in skipped)]))
        by_source: dict[str, list[tuple[str, str]]] = {}
        for skip in skipped:
            by_source.setdefault(source_of[skip.id], []).append((skip.id, skip.reason))
        informed = informing(spec, fitted, start, priors=frozenset(held))
        jobs.append(_Job(name, spec, start, held, scored, fitted, sources, by_source, informed, file_of))
    return jobs


def _in_shipped_fit(case_id: str, shipped: frozenset[str] | None, packaged: set[str]) -> bool:
    """Whether the shipped procedure fits on the case: its manifest lists it, there is no manifest, or
    the package does not ship the case (a user's)."""
    return shipped is None or case_id in shipped or case_id not in packaged


def _held_out(
    job: _Job, full: Fit[Any], source: str, max_iterations: int | None
) -> tuple[Any, str, tuple[HeldAtPrior, ...]]:
    """The calibration fitted without ``source`` (None: no held-out figure), a note where a group had
    no case left, and the constants held at their priors because ``source`` alone informs them."""
    spec = job.spec
    rest = [p for p in job.fitted if p.source != source]
    affected = {p.group for p in job.fitted if p.source == source}
    constants = [c for g in full.groups if g.group in affected for c in g.constants]
    base = spec.replace(full.calibration, {c: spec.get(job.start, c) for c in constants})
    calibration = _best_of_two_starts(spec, rest, base, constants, job.priors, max_iterations, affected)
    notes: list[str] = []
    for group in sorted(affected - {p.group for p in rest}):
        fallback = spec.fallback(group)
        group_fit = next(g for g in full.groups if g.group == group)
        if fallback is None or not any(g.group == fallback for g in full.groups):
            return None, f"no other source fits the {group} constants", ()
        stand_in = {
            c: spec.get(calibration, dataclasses.replace(c, table=fallback))
            for c in (*group_fit.constants, *group_fit.priors)
        }
        calibration = spec.replace(calibration, stand_in)
        notes.append(f"no other source fits {group}: held out with {fallback}'s constants")
    orphans = {p.group for p in rest}
    alone = [c for c in only_source(job.informed, source) if _group_of(job, c) in orphans]
    held_at: list[HeldAtPrior] = []
    for constant in alone:
        prior = spec.prior(calibration, constant)
        if prior is None:
            notes.append(f"{constant.name} is informed by this source alone and has no stated prior")
            return None, "; ".join(notes), tuple(held_at)
        held_at.append(HeldAtPrior(constant.name, prior[0], prior[1]))
    if held_at:
        calibration = spec.replace(calibration, {c: h.value for c, h in zip(alone, held_at, strict=True)})
        notes.append("held at prior (this source alone informs them): " + ", ".join(h.constant for h in held_at))
    return calibration, "; ".join(notes), tuple(held_at)


def _best_of_two_starts(
    spec: FitSpec[Any],
    cases: list[Prepared[Any]],
    shipped: Any,
    constants: list[Constant],
    priors: set[tuple[str, str]],
    max_iterations: int | None,
    groups: set[str],
) -> Any:
    """The calibration fitted on ``cases`` from the shipped constants and, where the search runs, again from the
    middle of each fitted constant's bounds (in log space); per group, the fit with the lower objective. A constant
    the remaining sources leave flat would otherwise keep its shipped value, and with it what the left-out source
    taught the shipped fit."""
    first = fit(spec, cases, shipped, priors=priors, max_iterations=max_iterations, only_groups=groups)
    if (spec.max_iterations if max_iterations is None else max_iterations) == 0:  # no search: nothing to restart
        return first.calibration
    middle = spec.replace(shipped, {c: math.sqrt(c.low * c.high) for c in constants})
    second = fit(spec, cases, middle, priors=priors, max_iterations=max_iterations, only_groups=groups)
    residual = {g.group: g.residual for g in first.groups}
    better = [c for g in second.groups if g.residual < residual[g.group] for c in g.constants]
    return spec.replace(first.calibration, {c: spec.get(second.calibration, c) for c in better})


def _group_of(job: _Job, constant: Constant) -> str | None:
    """The group whose fit includes ``constant`` (the group of the cases that inform it)."""
    for informed in job.informed:
        if informed.constant == constant:
            return next((p.group for p in job.fitted if p.case.id in informed.case_ids), None)
    return None


def _result(
    job: _Job, source: str, in_sample: Any, held_out: Any, note: str, catalog: Catalog
) -> tuple[SourceResult, list[HeldOutCase]]:
    cases = [p for p in job.scored if p.source == source]
    held_cases = cases
    if job.spec.kind == "training":  # software constants fitted on this source alone go back to their priors
        held_cases, software_note = held_out_software(job.scored, source, catalog)
        note = "; ".join(n for n in (note, software_note) if n)
    skipped = job.skipped.get(source, [])
    if skipped:
        note = "; ".join(n for n in (note, f"{len(skipped)} case(s) skipped") if n)
    ids = [p.case.id for p in cases] + [i for i, _ in skipped]
    row = SourceResult(
        " + ".join(dict.fromkeys(job.file_of[i] for i in ids)) if ids else job.path,
        job.spec.kind,
        source,
        len(cases),
        sum(1 for p in job.fitted if p.source == source),
        mape(cases, job.start),
        mape(cases, in_sample),
        None if held_out is None else mape(held_cases, held_out),
        note,
        skipped=tuple(skipped),
    )
    per_case = [
        HeldOutCase(
            job.file_of[shipped.case.id],
            job.spec.kind,
            shipped.case.id,
            source,
            shipped.group,
            shipped.field,
            shipped.measured,
            _predicted(shipped, job.start),
            None if held_out is None else _predicted(held, held_out),
        )
        for shipped, held in zip(cases, held_cases, strict=True)
    ]
    per_case += _latency_cases(job, cases, job.start, held_out, catalog)
    return row, per_case


def _latency_cases(
    job: _Job, cases: Sequence[Prepared[Any]], shipped: Any, held_out: Any, catalog: Catalog
) -> list[HeldOutCase]:
    """The measured latency fields of ``cases`` (serving TTFT and TPOT, ``LATENCY_FIELDS``), each predicted
    with the shipped and the held-out constants as the primary field is: the residuals of the latency
    intervals. A field its predictor refuses is left out."""
    out: list[HeldOutCase] = []
    for prepared in cases:
        case = prepared.case
        for name in LATENCY_FIELDS.get(job.spec.kind, ()):
            measured = case.measured.get(name)
            if not measured or name == prepared.field:
                continue
            try:
                _, predict = job.spec.prepare(case, name, catalog, job.start)
            except ClusterSimError:
                continue
            latency = dataclasses.replace(prepared, field=name, measured=float(measured), predict=predict)
            held = None if held_out is None else _predicted(latency, held_out)
            where = (job.file_of[case.id], job.spec.kind, case.id, prepared.source, prepared.group)
            out.append(HeldOutCase(*where, name, float(measured), _predicted(latency, shipped), held))
    return out


def _predicted(case: Prepared[Any], calibration: Any) -> float | None:
    try:
        return case.predict(calibration)
    except ClusterSimError:
        return None


def mape(cases: Sequence[Prepared[Any]], calibration: Any) -> float | None:
    """Mean |predicted / measured - 1| of ``cases`` under ``calibration`` (None: nothing predicted)."""
    errors: list[float] = []
    for case in cases:
        try:
            errors.append(abs(case.predict(calibration) / case.measured - 1))
        except ClusterSimError:  # a case a candidate calibration cannot predict is left out of the mean
            continue
    return sum(errors) / len(errors) if errors else None
