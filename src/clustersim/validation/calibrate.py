"""One calibration run, as the ``benchmarks/calibrate_*.py`` scripts do it: fit a spec to a file of
cases starting from a calibration file's values, say what moved and what is flat, and write the fitted
values with their manifest (``fitted_on``, ``residual``) and a ``fitted`` note back into that file.
"""

from __future__ import annotations

import argparse
import datetime
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from clustersim.catalog.registry import Catalog
from clustersim.catalog.tomlfiles import update_toml_file
from clustersim.validation.cases import Case, default_paths
from clustersim.validation.fit import Fit, FitSpec, GroupFit, Prepared, fit, prepare_cases
from clustersim.validation.manifest import manifest_updates, priors, read_manifest
from clustersim.validation.profile import Profile, profile
from clustersim.validation.scoring import Skipped

C = TypeVar("C")


@dataclass(frozen=True)
class Calibration(Generic[C]):
    """A fit of a file's cases, the cases it used and skipped, and the profile of every constant."""

    fit: Fit[C]
    cases: list[Prepared[C]]
    skipped: list[Skipped]
    profiles: list[Profile]


def calibrate(
    spec: FitSpec[C],
    cases: Sequence[Case],
    catalog: Catalog,
    start: C,
    toml: str | Path,
    *,
    max_iterations: int,
    digits: int = 3,
    only_groups: Collection[str] | None = None,
    profile_iterations: int = 0,
) -> Calibration[C]:
    """Fit ``cases`` from ``start`` (the values of the file ``toml``, whose ``prior`` marks are kept),
    values rounded to ``digits`` significant digits; ``profile_iterations`` > 0 refits the other
    constants at every point of each profile (see ``profile``)."""
    prepared, skipped = prepare_cases(spec, cases, catalog, start)
    held = priors(read_manifest(spec, toml))
    result = fit(
        spec, prepared, start, priors=held, max_iterations=max_iterations, only_groups=only_groups, digits=digits
    )
    return Calibration(result, prepared, skipped, profile(result, prepared, refit_iterations=profile_iterations))


def summary_lines(calibration: Calibration[C]) -> list[str]:
    """Per group: cases, objective before and after, each constant's value (priors marked), then the
    constants whose profile is flat."""
    spec = calibration.fit.spec
    lines: list[str] = []
    for group in calibration.fit.groups:
        lines.append(
            f"{group.group}: {len(group.case_ids)} cases, {spec.objective} {group.start_residual:.4f} -> "
            f"{group.residual:.4f} ({group.evaluations} evaluations, {group.iterations} iterations"
            f"{'' if group.converged else ', not converged'})"
        )
        values = [f"{c.name} = {spec.get(calibration.fit.calibration, c):g}" for c in group.constants]
        values += [f"{c.name} = {spec.get(calibration.fit.calibration, c):g} (prior)" for c in group.priors]
        lines.append("  " + ", ".join(values))
    flat = [p for p in calibration.profiles if p.flat]
    if flat:
        lines.append("flat (the objective changes by under 0.5% over a 4x range; a stated prior would do):")
        lines += [
            f"  {p.constant.name} = {p.value:g}: {100 * p.change:.2f}% over {p.low:.3g}-{p.high:.3g}"
            + (" (prior)" if p.prior else "")
            for p in flat
        ]
    return lines


def write_calibration(calibration: Calibration[C], toml: str | Path, how: str, cases_file: str) -> None:
    """Write each group's fitted values, ``fitted_on`` and ``residual`` into ``toml`` with a ``fitted``
    note naming the date, ``how`` (the script and its budget), the objective and ``cases_file``."""
    updates = manifest_updates(calibration.fit)
    for group in calibration.fit.groups:
        tables = {c.table for c in group.constants}
        update_toml_file(
            toml, {t: updates[t] for t in sorted(tables)}, fitted=_note(calibration, group, how, cases_file)
        )


def _note(calibration: Calibration[C], group: GroupFit, how: str, cases_file: str) -> str:
    priors_text = f"; priors kept: {', '.join(c.name for c in group.priors)}" if group.priors else ""
    return (
        f"{datetime.date.today().isoformat()} by {how}: {calibration.fit.spec.objective} "
        f"{group.start_residual:.4f} -> {group.residual:.4f} over the {len(group.case_ids)} cases of {cases_file} "
        f"in fitted_on{priors_text}"
    )


def add_script_arguments(parser: argparse.ArgumentParser, kind_file: str, toml: Path) -> None:
    """The options every ``benchmarks/calibrate_*.py`` script shares: the case files (default: the
    bundled and the project's ``kind_file``), ``--digits``, ``--write`` and ``--toml``."""
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        default=default_paths(kind_file),
        help=f"{kind_file} files (default: bundled + project)",
    )
    parser.add_argument("--digits", type=int, default=3, help="significant digits written")
    parser.add_argument("--write", action="store_true", help="write the fitted values into the calibration file")
    parser.add_argument("--toml", type=Path, default=toml, help="the calibration file read and written")


def report(calibration: Calibration[C], files: Sequence[Path], toml: Path, *, how: str, write: bool) -> None:
    """What a calibration script prints (the skipped cases on stderr, then the fit), and with
    ``write`` the fitted values written into ``toml`` with ``how`` (the script and its budget)."""
    for skipped in calibration.skipped:  # as clustersim validate does: skipped, and said so
        print(f"skipped {skipped.id}: {skipped.reason}", file=sys.stderr)
    print("\n".join(summary_lines(calibration)))
    if write:
        write_calibration(calibration, toml, how, " + ".join(path.name for path in files))
        print(f"wrote {toml}")
