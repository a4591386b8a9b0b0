"""``--level``: the level of the intervals a command prints beside its figures (light to import).

``clustersim.intervals`` makes the intervals; this module holds only the option, so that loading a
command stays cheap (``DEFAULT_LEVEL`` equals ``clustersim.intervals.DEFAULT_LEVEL``; a test says so).
"""

import math
from typing import Annotated

import typer

DEFAULT_LEVEL = 0.8


def _check(value: float) -> float:
    if not (math.isfinite(value) and 0 < value < 1):
        raise typer.BadParameter(f"{value!r} is out of range (valid: a number between 0 and 1, exclusive, e.g. 0.8)")
    return value


LevelOption = Annotated[
    float,
    typer.Option(
        "--level",
        callback=_check,
        help="Level of the intervals beside the figures, e.g. 0.8 for 80% (from left-out residuals of similar "
        "published cases).",
    ),
]
