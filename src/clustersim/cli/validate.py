"""``clustersim validate``: score the model against ground-truth cases (JSON Lines files).

Only typer and the standard library load with this module; the models, the scoring and rich load
when the command runs. ``--cross-validate`` refits the calibrations (``clustersim.validation.crossval``)
with a progress bar on stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.cli.calibrate import CalibrationOption, calibration_overlay
from clustersim.cli.common import (
    CatalogOption,
    JsonOption,
    console,
    emit_json,
    plot_path,
    print_all,
    user_errors,
    write_figure,
)
from clustersim.cli.level_option import DEFAULT_LEVEL, LevelOption

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog
    from clustersim.validation.crossval import CrossValidation


def validate_command(
    files: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Ground-truth files (JSON Lines), e.g. ../shared/validation/*.jsonl. "
            "None given: the ground truth bundled with clustersim (training, inference, collectives, memory).",
            show_default=False,
            metavar="FILES",
        ),
    ] = None,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
    min_size: Annotated[
        str | None,
        typer.Option("--min-size", help="Only score collective cases with size_bytes at least this, e.g. 64MiB."),
    ] = None,
    cross_validate: Annotated[
        bool,
        typer.Option(
            "--cross-validate",
            help="Also refit the calibration once per source with that source's cases left out, and print per "
            "source the MAPE in-sample (refitted on what the packaged fit uses, its fitted_on, and your files' own "
            "cases) and left out; with the profile of each fitted constant (flat: the data cannot pin it down).",
        ),
    ] = False,
    max_iterations: Annotated[
        int | None,
        typer.Option(
            "--max-iterations",
            min=0,
            help="With --cross-validate: iterations of each fit (compass sweeps or Nelder-Mead steps); "
            "default: each calibration's own (training 40, collectives 40, serving 300).",
        ),
    ] = None,
    level: LevelOption = DEFAULT_LEVEL,
    calibration: CalibrationOption = None,
    latency: Annotated[
        str,
        typer.Option(
            "--latency",
            help="How measured TTFT/TPOT are predicted: closed (the closed forms) or simulated (MLPerf-style "
            "server cases through the request simulator at the highest rate meeting their p99 targets; slower).",
        ),
    ] = "closed",
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers",
            min=1,
            max=4096,
            help="With --latency simulated: processes that run the server cases' rate searches at once "
            "(default: every core).",
        ),
    ] = None,
    plot: Annotated[
        Path | None,
        typer.Option(
            "--plot",
            callback=plot_path,
            help="Draw predicted against measured per case kind (log-log, by source, each case's interval), with "
            "each file's interval coverage.",
        ),
    ] = None,
) -> None:
    """Compare predictions with measured cases: error per case, MAPE, worst case and Spearman per file,
    MAPE per source and whether the calibration was fitted on it (in-sample) or not (held-out).

    Each case's prediction has an interval at --level from the left-out residuals of every other source
    (never its own); per file and source, the share of measured values inside (coverage) and the median
    width of the intervals.

    With no FILES, scores the ground-truth files bundled inside the package (named by file name).
    """
    from clustersim.catalog.registry import load_catalog
    from clustersim.errors import ClusterSimError
    from clustersim.present.validation import report_renderables, skipped_lines
    from clustersim.units import parse_bytes
    from clustersim.validation.cases import default_case_files
    from clustersim.validation.run import validate_bundled, validate_cases
    from clustersim.validation.unread import unread_by_file, unread_lines

    with user_errors(), calibration_overlay(calibration):
        min_size_bytes = parse_bytes(min_size) if min_size is not None else None
        if min_size_bytes is not None and not min_size_bytes >= 0:
            raise ClusterSimError(f"--min-size: {min_size!r} is negative; give a size of 0 or more, e.g. 64MiB")
        if latency not in ("closed", "simulated"):
            raise ClusterSimError(
                f"--latency: {latency!r} is not closed or simulated", field="--latency", value=latency
            )
        if workers is not None and latency != "simulated":
            raise ClusterSimError(
                "--workers: runs the simulated server latencies' searches; give it with --latency simulated",
                field="--workers",
                value=workers,
            )
        from clustersim.validation.serving_latency import simulated_latency_predictors

        predictors = simulated_latency_predictors() if latency == "simulated" else None
        loaded = load_catalog(catalog or ())
        if latency == "simulated":
            _search_latencies(files, loaded, workers)
        if files:
            report = validate_cases(files, loaded, predictors, min_size_bytes=min_size_bytes, level=level)
        else:
            report = validate_bundled(loaded, predictors, min_size_bytes=min_size_bytes, level=level)
        named = [(str(f), f) for f in files] if files else default_case_files()
        crossed = _cross_validate(named, loaded, max_iterations, min_size_bytes) if cross_validate else None
        if plot is not None and not report.cases:
            raise ClusterSimError(
                "--plot draws the scored cases, and none was scored (each one skipped: see validate without --plot)",
                field="--plot",
                value=str(plot),
            )
        if plot is not None:
            from clustersim.present.report_plots import plot_validation

            sources = {case.id: case.source for case in report.cases}
            write_figure(lambda: plot_validation(report.to_json(), sources, plot), plot)
            typer.echo(f"figure written to {plot}", err=True)
    unread = unread_by_file(named)
    if as_json:
        emit_json(report.to_json() | {"unread_fields": unread} | (crossed.to_json() if crossed else {}))
        return
    print_all(*report_renderables(report))
    for line in [*skipped_lines(report.skipped), *unread_lines(unread)]:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    if crossed:
        from clustersim.present.validation import (
            cross_validation_table,
            latency_cross_validation_table,
            profile_table,
        )

        left_out_latency = crossed.latency_sources()
        tables = [cross_validation_table(crossed.sources)]
        tables += [latency_cross_validation_table(left_out_latency)] if left_out_latency else []
        print_all(*tables, profile_table(crossed.profiles))


def _search_latencies(files: list[Path] | None, catalog: Catalog, workers: int | None) -> None:
    """The simulated server latencies' searches ahead of the scoring, on ``workers`` processes (default: every core),
    with a bar on stderr."""
    from clustersim.cli.progress import progress_bar
    from clustersim.processes import default_workers
    from clustersim.validation.cases import default_case_files, read_all
    from clustersim.validation.serving_latency import search_server_latencies

    paths = list(files) if files else [path for _, path in default_case_files()]
    cases = read_all(paths)
    with progress_bar("simulated server latency", "cases") as progress:
        search_server_latencies(cases, catalog, workers=workers or default_workers(), progress=progress)


def _cross_validate(
    files: list[tuple[str, Path]], catalog: Catalog, max_iterations: int | None, min_size_bytes: float | None
) -> CrossValidation:
    """``cross_validate`` with a progress bar on stderr (gone when done)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from clustersim.validation.crossval import cross_validate

    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("cross-validating", total=None)

        def on_progress(what: str, done: int, total: int) -> None:
            progress.update(task, description=what, completed=done, total=total)

        return cross_validate(
            files, catalog, max_iterations=max_iterations, min_size_bytes=min_size_bytes, on_progress=on_progress
        )
