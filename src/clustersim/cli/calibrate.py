"""``clustersim calibrate``: fit the collective calibration to your own cases, as an overlay file; and
``--calibration FILE``, the option that lays such a file over the packaged calibration."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, user_errors

# clustersim.network.analytic.ENV_VAR (a test keeps them equal; the CLI does not import the models to start)
COLLECTIVE_ENV_VAR = "CLUSTERSIM_COLLECTIVE_CALIBRATION"

CalibrationOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--calibration",
        help="A collective calibration overlay (written by clustersim calibrate) over the packaged values; "
        f"repeatable. Also read from ${COLLECTIVE_ENV_VAR}.",
    ),
]


@contextmanager
def calibration_overlay(paths: list[Path] | None) -> Iterator[None]:
    """Within the block, the collective model reads ``paths`` over the packaged calibration (after the
    files already in the environment); each file is read first, so a bad one is refused naming it."""
    if not paths:
        yield
        return
    from clustersim.network.analytic import collective_calibration

    for path in paths:
        if not Path(path).is_file():
            from clustersim.errors import ClusterSimError

            raise ClusterSimError(f"--calibration: no such file {path}", field="--calibration", value=str(path))
    collective_calibration(paths)  # refuses an unknown entry, a missing source or a bad value, naming the file
    before = os.environ.get(COLLECTIVE_ENV_VAR)
    os.environ[COLLECTIVE_ENV_VAR] = os.pathsep.join([*([before] if before else []), *(str(p) for p in paths)])
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(COLLECTIVE_ENV_VAR, None)
        else:
            os.environ[COLLECTIVE_ENV_VAR] = before


def refuse_with_save_scenario(paths: list[Path] | None, save_scenario: Path | None) -> None:
    """A scenario file does not carry ``--calibration``: the pair is refused in one line."""
    if paths and save_scenario is not None:
        from clustersim.errors import ClusterSimError

        raise ClusterSimError(
            "--calibration is not part of a scenario file; save the scenario without it, then replay it with "
            "--scenario FILE --calibration OVERLAY",
            field="--calibration",
            value=",".join(str(p) for p in paths),
        )


def calibrate_command(
    cases: Annotated[
        list[Path], typer.Argument(help="Case files (JSON Lines), e.g. written by clustersim ingest.", metavar="CASES")
    ],
    output: Annotated[Path, typer.Option("-o", "--output", help="The overlay written (TOML).")],
    max_iterations: Annotated[
        int | None,
        typer.Option("--max-iterations", min=1, help="Compass sweeps of each fit (default: the shipped 40)."),
    ] = None,
    folds: Annotated[
        int,
        typer.Option("--folds", min=2, max=20, help="Folds of the left-out error where one node count and one file."),
    ] = 4,
    catalog: CatalogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Fit the collective calibration to your cases with the shipped fit and bounds (what your data cannot pin
    stays at the packaged value), write the overlay, and print the busbw MAPE before and after, in sample and
    left out (by node count, else by file, else k-fold by size) when there are 8 cases or more."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.validation.cases import read_all
    from clustersim.validation.user_calibration import calibrate_user, write_overlay

    with user_errors():
        loaded = load_catalog(catalog or ())
        result = calibrate_user(read_all(cases), loaded, max_iterations=max_iterations, folds=folds)
        write_overlay(result, [str(c) for c in cases], output)
    moved = {constant.name: value for constant, value in result.fit.moved.items()}
    held = {h.name: {"value": h.value, "why": h.why} for h in result.fit.held}
    left = result.left_out
    if as_json:
        payload = {
            "output": str(output),
            "cases": len(result.case_ids),
            "skipped": len(result.skipped),
            "mape": {"before": result.before_mape, "after": result.after_mape},
            "left_out": None
            if left is None
            else {"split": left.split, "cases": left.cases, "before": left.before_mape, "after": left.after_mape},
            "fitted": moved,
            "held": held,
        }
        emit_json(payload)
        return
    lines = [
        f"{len(result.case_ids)} cases of at least 1 MiB fitted ({len(result.skipped)} skipped)",
        f"busbw MAPE in sample: {100 * result.before_mape:.1f}% packaged -> {100 * result.after_mape:.1f}% fitted",
    ]
    if left is not None:
        lines.append(
            f"busbw MAPE left out ({left.split}, {left.cases} cases): {100 * left.before_mape:.1f}% packaged -> "
            f"{100 * left.after_mape:.1f}% fitted on the other folds"
        )
    else:
        lines.append("left out: not estimated (fewer than 8 cases)")
    lines += [f"fitted {name} = {value:g}" for name, value in moved.items()] or ["fitted: nothing moved"]
    lines += [f"kept {h.name} = {h.value:g} ({h.why})" for h in result.fit.held]
    lines.append(f"wrote {output}")
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
