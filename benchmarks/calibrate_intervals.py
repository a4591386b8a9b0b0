"""Make the residuals clustersim's prediction intervals come from (src/clustersim/intervals/residuals.toml).

Runs leave-one-source-out cross-validation over the bundled ground truth and the project's own cases
(training, inference and collectives: ``clustersim.validation.crossval``, several minutes; memory, bundled and
the project's, which no fit uses, by the packaged model's predictions): a project case
whose source a fit used (another of its cases in a ``fitted_on``) takes the prediction of the fit without
that source, one of a source no fit used the packaged constants' (they never saw it, so it is held out
already). It keeps, per scored case with a held-out prediction,
``r = ln(measured / predicted)`` of its duration (a rate's residual with its sign flipped), rounded to
4 significant digits, with its id, source, kind, chip, accelerator, framework and devices. Prints how
intervals at ``--level`` built from those residuals fare on the cases they leave out (each case judged
by the other sources' residuals and its held-out prediction): per kind and per source the coverage
(share of measured values inside), the median half-width and the median |error| of the held-out
predictions. With ``--write`` the residuals go into the package with a header saying when and from
what (a sha256 fingerprint of the calibration and case files; a test fails when they change and this
script was not rerun).

    .venv/bin/python benchmarks/calibrate_intervals.py [--write] [--max-iterations N] [--level 0.8]
        [--from-json FILE]   # reuse `clustersim validate --cross-validate --json` output instead of refitting

The calibration overlays of the environment (CLUSTERSIM_EFFICIENCY, ...) are ignored: the residuals
describe the packaged constants.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from clustersim.catalog.registry import load_catalog
from clustersim.intervals.lookup import MIN_CASES, SCALE_EDGES
from clustersim.intervals.residuals import MEASURED_LATENCY_FIELDS, HeaderValue, default_path, residuals_toml
from clustersim.validation.cases import bundled_dir, default_paths, project_case_files, read_all, read_cases
from clustersim.validation.intervals import (
    CASE_FILES,
    MEMORY_FILE,
    LeftOut,
    Prediction,
    input_files,
    inputs_fingerprint,
    left_out,
    residuals_of,
)
from clustersim.validation.unfitted import unfitted_residuals

OVERLAYS = (
    "CLUSTERSIM_CATALOG",
    "CLUSTERSIM_EFFICIENCY",
    "CLUSTERSIM_SOFTWARE",
    "CLUSTERSIM_COLLECTIVE_CALIBRATION",
    "CLUSTERSIM_SERVING_CALIBRATION",
    "CLUSTERSIM_SERVING_ENGINES",
)


def case_files() -> list[tuple[str, Path]]:
    """The bundled files cross-validated and the project's own of the same kinds, named as ``validate`` names them."""
    project = [(f"project/{path.name}", path) for path in project_case_files() if path.name in CASE_FILES]
    return [(name, bundled_dir() / name) for name in CASE_FILES] + project


def held_out_cases(max_iterations: int | None, from_json: Path | None) -> list[Any]:
    """``CrossValidation.cases`` of ``case_files`` (or read from a saved ``--json`` output of them)."""
    if from_json is not None:
        return [SimpleNamespace(**c) for c in json.loads(from_json.read_text())["held_out_cases"]]
    from clustersim.validation.crossval import cross_validate

    files = case_files()

    def progress(what: str, done: int, total: int) -> None:
        print(f"\r[{done}/{total}] {what[:70]:<70}", end="", file=sys.stderr, flush=True)

    result = cross_validate(files, load_catalog(use_env=False), max_iterations=max_iterations, on_progress=progress)
    print(file=sys.stderr)
    return list(result.cases)


def neuron_held_out(rows: list[Any], catalog: Any) -> list[Any]:
    """``rows`` with the Trainium serving cases' residuals (throughput, TTFT, TPOT) made from the Neuron fit's
    leave-one-source-out predictions (benchmarks/calibrate_neuron_serving.py): the Neuron engines' constants
    are fitted on those cases outside the calibration files' manifests, so their packaged prediction is in
    sample."""
    from calibrate_neuron_serving import SCORED_FIELDS, held_out_figures, neuron_cases, source_of

    neuron = neuron_cases(read_all(default_paths("inference.jsonl")))
    held = held_out_figures(neuron)
    ids = {c.id for c in neuron}
    predictions = [
        Prediction(c.id, "inference", source_of(c), field, c.measured[field], held.get(c.id, {}).get(field))
        for c in neuron
        for field in SCORED_FIELDS
        if c.measured.get(field)
    ]
    redone, _ = residuals_of(predictions, {c.id: c for c in neuron}, catalog)
    return [r for r in rows if r.id not in ids] + redone


def summary_rows(judged: Sequence[LeftOut], key: Any) -> list[tuple[str, int, float, float, float]]:
    """Per ``key(row)``: cases, coverage, median half-width, median |error|."""
    groups: dict[str, list[LeftOut]] = {}
    for j in judged:
        groups.setdefault(key(j.row), []).append(j)
    return [
        (
            name,
            len(members),
            sum(m.inside for m in members) / len(members),
            statistics.median(m.half_width for m in members),
            statistics.median(m.abs_error for m in members),
        )
        for name, members in groups.items()
    ]


def _figure(row: Any) -> str:
    """The kind, and a latency field's name where the residual is of one (its intervals are its own)."""
    return row.kind if row.field not in MEASURED_LATENCY_FIELDS else f"{row.kind} {MEASURED_LATENCY_FIELDS[row.field]}"


def print_summary(judged: Sequence[LeftOut], level: float) -> None:
    print(
        f"intervals at {level:.0%} on the cases they leave out (leave-one-source-out, both the fit and the residuals)"
    )
    header = f"{'':44} {'cases':>5} {'coverage':>9} {'half-width':>10} {'median |err|':>12} {'ratio':>6}"
    for title, key in (("per kind", _figure), ("per kind and source", lambda r: f"{_figure(r)}: {r.source}")):
        print(f"\n{title}\n{header}")
        primary = [j for j in judged if j.row.field not in MEASURED_LATENCY_FIELDS]
        every = summary_rows(primary, lambda r: "every kind") if title == "per kind" else []
        rows = summary_rows(judged, key) + every
        for name, n, cov, half, err in rows:
            ratio = f"{half / err:6.2f}" if err > 0 else "     -"
            print(f"{name[:44]:44} {n:5d} {cov:9.1%} {half:10.1%} {err:12.1%} {ratio}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="write the residuals into the package")
    parser.add_argument("--max-iterations", type=int, default=None, help="iterations of each refit")
    parser.add_argument("--level", type=float, default=0.8, help="level of the intervals judged (default 0.8)")
    parser.add_argument("--from-json", type=Path, default=None, help="held_out_cases of a saved --cross-validate run")
    parser.add_argument("--toml", type=Path, default=default_path(), help="where --write writes")
    args = parser.parse_args(argv)
    for name in OVERLAYS:
        if os.environ.pop(name, None) is not None:
            print(f"ignoring ${name}: the residuals describe the packaged constants", file=sys.stderr)

    fingerprint = inputs_fingerprint()  # before the slow part: the files must not change under it
    catalog = load_catalog(use_env=False)
    cases = {c.id: c for _, path in case_files() for c in read_cases(path)}
    unfitted, unused = unfitted_residuals([*project_case_files(), bundled_dir() / MEMORY_FILE], catalog)
    packaged = {r.id for r in unfitted}  # a source no fit used: the packaged prediction is held out
    refitted = [c for c in held_out_cases(args.max_iterations, args.from_json) if c.id not in packaged]
    rows, left = residuals_of(refitted, cases, catalog)
    rows = neuron_held_out(rows + unfitted, catalog)
    kept = {r.id for r in rows}
    left += [(case_id, reason) for case_id, reason in unused if case_id not in kept]
    for case_id, reason in left:
        print(f"left out {case_id}: {reason}", file=sys.stderr)
    print_summary(left_out(rows, args.level), args.level)
    if inputs_fingerprint() != fingerprint:
        print("the calibration or case files changed during the run: run it again", file=sys.stderr)
        return 1
    if args.write:
        header: dict[str, HeaderValue] = {
            "made_by": "python benchmarks/calibrate_intervals.py --write"
            + (f" --max-iterations {args.max_iterations}" if args.max_iterations is not None else "")
            + (f" --from-json {args.from_json.name}" if args.from_json else ""),
            "made_at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "fingerprint": fingerprint,
            "inputs": [name for name, _ in input_files()],
            "convention": "r = ln(measured / predicted) of the case's duration (step time, collective time, time "
            "per output token); a rate's residual (tokens/s, busbw, MFU) has its sign flipped; predicted with "
            "the constants fitted without the case's source (clustersim.validation.crossval)",
            "min_cases": MIN_CASES,
            "scale_edges_devices": list(SCALE_EDGES),
            "unfitted": "the project's own cases (validation/project) that no fit used: their residual is of the "
            "packaged constants' prediction, already held out; those of a source a fit used, as the bundled ones",
            "left_out": len(left),
        }
        args.toml.write_text(residuals_toml(rows, header), encoding="utf-8")
        print(f"wrote {len(rows)} residuals to {args.toml}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
