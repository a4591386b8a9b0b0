"""An estimate's notes and names print as written in ``train``'s text, alone or side by side: a note (or a model's
name) holding ``[...]`` or a backslash, e.g. a path or a run's tag, is one plain line made in one place
(``present.training.note_line``), never read as rich markup."""

from __future__ import annotations

import io
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from clustersim.catalog.registry import load_catalog
from clustersim.execution import Layout
from clustersim.present.training import comparison_view, estimate_view, note_line, note_lines
from clustersim.system import system_for_instance
from clustersim.training.comparison import ComparedSystem, compare_estimates
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model

NOTE = "model read from /runs/[2024-11]/config.json; [bold]not bold[/bold], [red]"


def _text(renderables: list[object]) -> str:
    console = Console(width=400, record=True, file=io.StringIO())
    for r in renderables:
        console.print(r)
    return console.export_text()


@pytest.fixture(scope="module")
def systems() -> list[tuple[str, object, Estimate]]:
    model = load_model("llama3-8b")
    job = TrainingJob(global_batch=64, seq_len=8192, tokens=1e11)
    found = []
    for instance in ("p5.48xlarge", "p5en.48xlarge"):
        system = system_for_instance(load_catalog(use_env=False), instance, 2)
        estimate = estimate_training(model, system, Layout(tp=8, pp=1, dp=2, zero=1), job, notes=(NOTE,))
        found.append((instance, system, estimate))
    return found


def test_a_note_with_brackets_prints_as_written_alone_and_side_by_side(systems: list) -> None:
    _, _, estimate = systems[0]
    alone = _text(estimate_view(replace(estimate, model="llama3-8b [ft-2]"), 8_000_000_000))
    assert f"note: {NOTE}" in alone
    assert alone.startswith("llama3-8b [ft-2] (8B parameters) on 2 x p5.48xlarge:")
    model = load_model("llama3-8b")
    compared = [ComparedSystem(i, 2, system, e) for i, system, e in systems]
    side = _text(comparison_view(compare_estimates(model, compared)))
    for _, _, e in systems:
        assert f"note ({e.system}): {NOTE}" in side
    # one definition: what the two views print is the same line
    assert _text(note_lines(estimate)) == _text([note_line(NOTE)]) == f"note: {NOTE}\n"


@settings(max_examples=60, deadline=None)
@given(st.text(alphabet="ab [/]=\\#:", min_size=1, max_size=30))
def test_any_note_prints_as_written(note: str) -> None:
    assert _text([note_line(note)]).rstrip() == f"note: {note}".rstrip()
    assert _text([note_line(note, "2 x p5[x]")]).rstrip() == f"note (2 x p5[x]): {note}".rstrip()
