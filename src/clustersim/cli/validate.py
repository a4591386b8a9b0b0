"""``clustersim validate``: score the model against ground-truth cases (JSON Lines files).

Only typer and the standard library load with this module; the models, the scoring and rich load
when the command runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import CatalogOption, JsonOption, console, emit_json, print_all, user_errors


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
) -> None:
    """Compare predictions with measured cases: error per case, MAPE, worst case and Spearman per file.

    With no FILES, scores the ground-truth files bundled inside the package (named by file name).
    """
    from clustersim.catalog.registry import load_catalog
    from clustersim.present.validation import report_renderables, skipped_lines
    from clustersim.units import parse_bytes
    from clustersim.validation.run import validate_bundled, validate_cases

    with user_errors():
        min_size_bytes = parse_bytes(min_size) if min_size is not None else None
        loaded = load_catalog(catalog or ())
        if files:
            report = validate_cases(files, loaded, min_size_bytes=min_size_bytes)
        else:
            report = validate_bundled(loaded, min_size_bytes=min_size_bytes)
    if as_json:
        emit_json(report.to_json())
        return
    print_all(*report_renderables(report))
    for line in skipped_lines(report.skipped):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
