"""``clustersim explain``'s text: the job, the measurement against the prediction, and the ranked table."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from clustersim.cli.common import print_all

GIVE_THE_LAYOUT = "the run's own layout should be given with --tp and --pp"

if TYPE_CHECKING:
    from clustersim.diagnose import Candidate, Explanation
    from clustersim.scenario.training import TrainingRun


def show(run: TrainingRun, explanation: Explanation, measured: str, notes: list[str], safe: bool = False) -> None:
    """Print the explanation: the job (with ``notes`` on the fabric and the estimate's own notes, as ``train``
    prints them; ``safe``: the layout was chosen by --safe), ``measured`` (what was measured, in words) against
    the prediction, the candidates ranked with their ranges and slopes, the top three in a sentence each."""
    from rich.table import Table

    from clustersim.plan.search import chosen_note
    from clustersim.present.training import note_lines

    estimate = run.estimate
    # a chosen layout is said once, on the first line, with what to do about it (not again in the notes)
    chosen = chosen_note(run.model, estimate.layout, safe=safe) if run.layout_chosen else None
    said = f"layout {estimate.layout.describe()}" if chosen is None else f"{chosen}; {GIVE_THE_LAYOUT}"
    lines = [
        _plain(f"{run.model.name} on {estimate.system}, {said}"),
        *(_plain(n) for n in notes),
        *note_lines(estimate, leave_out=() if chosen is None else (chosen,)),  # markup, escaped
        _plain(
            f"measured ({measured}): {explanation.measured_step_s:.4g} s per step; "
            f"predicted {explanation.predicted_step_s:.4g} s ({explanation.gap:+.1%})"
        ),
        _plain(explanation.summary()),
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
    top = [f"{i}. {c.line()}" for i, c in enumerate(explanation.candidates[:3], 1)]
    print_all(*lines, table, *(_plain(n) for n in top), *(_plain(f"range: {s}") for s in range_lines(explanation)))


def range_lines(explanation: Explanation) -> list[str]:
    """Where the plausible ranges come from, each source once: a range that narrows another (the optimizer's,
    the model's own error within the training fit's step_s bounds) is said after the one it narrows, with its
    term."""
    used: dict[str, list[str]] = {}
    for c in explanation.candidates:
        if c.plausible_range is not None:
            used.setdefault(c.plausible_range.source, []).append(c.term)
    lines = []
    for source in sorted(used):
        narrower = [s for s in sorted(used) if s.startswith(f"{source}, ")]
        if any(source.startswith(f"{wider}, ") for wider in used):
            continue  # said with the range it narrows
        lines.append("; ".join([source, *(f"{', '.join(used[s])}: {s.removeprefix(f'{source}, ')}" for s in narrower)]))
    return lines


def _needs(candidate: Candidate) -> str:
    if candidate.kind.value == "added":
        return f"+{candidate.needed_s:.3g} s" if candidate.needed_s > 0 else "-"
    return "-" if candidate.factor_needed is None else f"{candidate.factor_needed:.3g}x"


def _plain(line: str) -> Any:
    from rich.text import Text

    return Text(line)
