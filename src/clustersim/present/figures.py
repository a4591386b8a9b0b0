"""The one way ``present/`` draws a figure: matplotlib's file-only backend (imported here, and only when a
figure is drawn), one row of axes, then the layout tightened, the file written and the figure closed,
closed also when writing fails (a process that draws many, the fuzz run or a notebook, holds none open)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


@contextmanager
def figure(
    path: Path, *, ncols: int = 1, figsize: tuple[float, float], dpi: float | None = None
) -> Iterator[tuple[Any, Any]]:
    """``(fig, axes)`` to draw on (``axes`` one axes, or a row of ``ncols``); on leaving, written to ``path``
    (the format from its suffix; ``dpi``: matplotlib's default when None) and closed."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, ncols, figsize=figsize)
    try:
        yield fig, axes
        fig.tight_layout()
        if dpi is None:
            fig.savefig(path)
        else:
            fig.savefig(path, dpi=dpi)
    finally:
        plt.close(fig)
