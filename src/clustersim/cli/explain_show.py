"""``clustersim explain``'s text: the job, the measurement against the prediction, and the ranked table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clustersim.cli.common import print_all

if TYPE_CHECKING:
    from clustersim.diagnose import Candidate, Explanation
    from clustersim.scenario.training import TrainingRun


def show(run: TrainingRun, explanation: Explanation, measured: str, notes: list[str]) -> None:
    """Print the explanation: the job (with ``notes`` on the fabric and the estimate's own notes, as ``train``
    prints them), ``measured`` (what was measured, in words) against the prediction, the candidates ranked with
    their ranges and slopes, the top three in a sentence each."""
    from rich.table import Table

    from clustersim.present.training import note_lines

    estimate = run.estimate
    chosen = " (chosen: the run's own layout should be given with --tp and --pp)" if run.layout_chosen else ""
    lines = [
        f"{run.model.name} on {estimate.system}, layout {estimate.layout.describe()}{chosen}",
        *notes,
        *note_lines(estimate),
        f"measured ({measured}): {explanation.measured_step_s:.4g} s per step; "
        f"predicted {explanation.predicted_step_s:.4g} s ({explanation.gap:+.1%})",
        explanation.summary(),
    ]
    table = Table(title="what would close the gap, alone (ranked by the share of its plausible range it needs)")
    columns = ("term", "seconds", "needs", "plausible range", "plausible", "d step / d parameter", "elasticity")
    for column in columns:
        table.add_column(column, justify="left" if column in ("term", "plausible range") else "right")
    for c in explanation.candidates:
        r = c.plausible_range
        slope = c.sensitivity.d_step_s_d_parameter
        table.add_row(
            c.term,
            f"{c.seconds:.3g}",
            _needs(c),
            "unknown" if r is None else f"{r.low:.2f}-{r.high:.2f}x",
            {True: "yes", False: "no", None: "?"}[c.plausible],
            "" if slope is None else f"{slope:+.3g}",
            f"{c.sensitivity.elasticity:+.3g}",
        )
    notes = [f"{i}. {c.line()}" for i, c in enumerate(explanation.candidates[:3], 1)]
    sources = sorted({c.plausible_range.source for c in explanation.candidates if c.plausible_range is not None})
    for line in lines:
        print_all(_plain(line))
    print_all(table, *(_plain(n) for n in notes), *(_plain(f"range: {s}") for s in sources))


def _needs(candidate: Candidate) -> str:
    if candidate.kind.value == "added":
        return f"+{candidate.needed_s:.3g} s" if candidate.needed_s > 0 else "-"
    return "-" if candidate.factor_needed is None else f"{candidate.factor_needed:.3g}x"


def _plain(line: str) -> Any:
    from rich.text import Text

    return Text(line)
