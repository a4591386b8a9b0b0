"""Progress bars on stderr for the simulators' long runs: the work done, its rate and the time left.

A bar shows when the run's estimate (``network.work.WorkEstimate``) says it takes more than about two
seconds and stderr is a terminal; ``CLUSTERSIM_PROGRESS=1`` shows it anyway (a log, a test) and
``CLUSTERSIM_PROGRESS=0`` never. It goes to stderr only, so ``--json`` output on stdout stays JSON,
and it is gone when the run ends. The simulators report through a plain callback
``progress(done, total)``; rich is imported here only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

if TYPE_CHECKING:
    from clustersim.network.work import WorkEstimate

PROGRESS_ENV_VAR = "CLUSTERSIM_PROGRESS"

Progress = Callable[[int, int], None]


def wanted(estimate: WorkEstimate | None) -> bool:
    """Whether to show a bar: forced by the environment, else a terminal and a run of a few seconds."""
    if os.environ.get(PROGRESS_ENV_VAR, "").strip() == "0":
        return False
    return _forced() or (sys.stderr.isatty() and (estimate is None or estimate.shows_progress))


def _forced() -> bool:
    return os.environ.get(PROGRESS_ENV_VAR, "").strip() == "1"


@contextmanager
def progress_bar(description: str, unit: str, estimate: WorkEstimate | None = None) -> Iterator[Progress | None]:
    """A transient bar on stderr fed by ``progress(done, total)`` in ``unit``s, or ``None`` where none is
    wanted (``wanted``)."""
    if not wanted(estimate):
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
    )
    console = Console(stderr=True, force_terminal=True if _forced() else None)
    with Progress(*columns, console=console, transient=True, refresh_per_second=4) as bar:
        task = bar.add_task(description, total=None, rate="")

        def update(done: int, total: int) -> None:
            speed = bar.tasks[0].speed
            rate = f"{speed:,.0f} {unit}/s" if speed else ""
            bar.update(task, completed=done, total=max(total, done), rate=rate)

        yield update


@contextmanager
def packet_progress(estimate: WorkEstimate) -> Iterator[None]:
    """``progress_bar`` over the packet simulator's events: every environment run inside it reports
    (``transport.engine.reporting``), counted against the estimate's events."""
    from clustersim.network.transport.engine import reporting

    with progress_bar("simulating packets", "events", estimate) as update:
        if update is None:
            yield
            return
        report = update
        total = int(estimate.events)
        done = 0

        def ran(events: int) -> None:
            nonlocal done
            done += events
            report(done, total)

        with reporting(ran):
            yield


def _max_events_option() -> object:
    import typer

    from clustersim.cli.common import number

    return typer.Option(
        "--max-events",
        callback=number(gt=0),
        help="Run what is estimated at up to this many events (fabric: flow-events, transport: packet events), "
        "refuse more; default: 1e10 fabric, 2e7 transport, and at most 3 min estimated on a 2-core, 24 GiB machine.",
    )


MaxEventsOpt = Annotated[float | None, _max_events_option()]
