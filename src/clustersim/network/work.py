"""The work a simulation will do, estimated from its inputs before it starts, and the bound above which
a command refuses it (issue 20: ``fabric simulate --jobs 1024`` ran 10 minutes to 23 GB).

Both simulators count their work in events, the unit ``--max-events`` bounds:

* the flow-level fabric simulator (``flowsim.work``): **flow-events**, the flows the event loop holds
  times the events it runs (each event scans every flow's arrays), so ``--jobs`` enters squared;
* the packet-level transport simulator (``transport.work``): **packet events**, packets (messages x
  message size / MTU, per transport) times the events each packet makes (a send, a hop, an ack).

The rates that turn events into seconds, and flows into bytes, were measured on the reference machine
(2 cores, 24 GiB): the default bounds (events, and ``DEFAULT_MAX_SECONDS`` of estimated time) keep a run
to a few minutes there and its arrays to a few GiB. A given ``--max-events`` replaces both; memory has a
hard bound (``MEMORY_BOUND_BYTES``) that no option lifts, for a run past it would swap or be killed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from clustersim.errors import ClusterSimError

MAX_EVENTS_OPTION = "--max-events"
REFERENCE_MACHINE = "2-core, 24 GiB"
MEMORY_BOUND_BYTES = 8 * 2**30  # a third of the reference machine's memory
DEFAULT_MAX_SECONDS = 180.0  # without --max-events, a run estimated longer is refused too
PROGRESS_AFTER_S = 2.0  # runs estimated longer than this show a progress bar


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkEstimate:
    """A simulation's estimated size: ``events`` in ``unit``, seconds at ``events_per_s`` (measured on
    the reference machine) and the bytes of its arrays at their largest."""

    what: str  # what is simulated, e.g. "16 jobs x 7,936 flows"
    events: float
    unit: str  # "flow-events" or "packet events"
    seconds: float
    memory_bytes: float
    default_bound: float  # the events a run may have unless --max-events says otherwise

    def describe(self) -> str:
        """One phrase: the events, the time they take and the memory they hold."""
        memory = f", ~{self.memory_bytes / 2**30:.2g} GiB of arrays" if self.memory_bytes >= 2**30 / 10 else ""
        return (
            f"{self.what}: ~{count(self.events)} {self.unit}, ~{duration(self.seconds)} on a {REFERENCE_MACHINE} "
            f"machine{memory}"
        )

    @property
    def shows_progress(self) -> bool:
        """Whether the run takes long enough to deserve a progress bar."""
        return self.seconds >= PROGRESS_AFTER_S


def count(value: float) -> str:
    """A large count in three figures: 4.34e10, 7.8e7, 950."""
    return re.sub(r"e\+?0*(\d)", r"e\1", f"{value:.3g}")


def duration(seconds: float) -> str:
    """``seconds`` as a short human duration: 0.4 s, 52 s, 3.1 min, 5.2 h, 3.0 days."""
    if seconds < 10:
        return f"{seconds:.1g} s" if seconds < 1 else f"{seconds:.0f} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:,.0f} days"


def check_work(estimate: WorkEstimate, max_events: float | None = None) -> None:
    """Refuse ``estimate`` in one line when its memory passes ``MEMORY_BOUND_BYTES`` or its events pass
    ``max_events``; without ``max_events``, when its events pass the estimate's default bound or its time
    ``DEFAULT_MAX_SECONDS``. The line names the estimate, the bound and what lifts it."""
    if estimate.memory_bytes > MEMORY_BOUND_BYTES:
        raise ClusterSimError(
            f"{estimate.describe()}; more than the {MEMORY_BOUND_BYTES / 2**30:.0f} GiB of arrays a run may hold "
            f"on this {REFERENCE_MACHINE} machine: simulate fewer jobs, nodes or steps",
            field=MAX_EVENTS_OPTION,
            value=max_events,
        )
    bound = estimate.default_bound if max_events is None else max_events
    given = "given" if max_events is not None else "default"
    lift = f"pass {MAX_EVENTS_OPTION} {count(_round_up(estimate.events))} to run it anyway, or make it smaller"
    if not math.isfinite(estimate.events) or estimate.events > bound:
        default = f" (default {count(estimate.default_bound)})" if max_events is not None else ""
        raise ClusterSimError(
            f"{estimate.describe()}; more than the {given} bound of {count(bound)} {estimate.unit}{default}: {lift}",
            field=MAX_EVENTS_OPTION,
            value=max_events,
        )
    if max_events is None and estimate.seconds > DEFAULT_MAX_SECONDS:
        raise ClusterSimError(
            f"{estimate.describe()}; longer than the default bound of {duration(DEFAULT_MAX_SECONDS)} here "
            f"(and {count(bound)} {estimate.unit}): {lift}",
            field=MAX_EVENTS_OPTION,
            value=max_events,
        )


def _round_up(events: float) -> float:
    """``events`` rounded up to two significant figures (a bound that admits it)."""
    if not math.isfinite(events) or events <= 0:
        return events
    scale = 10.0 ** (math.floor(math.log10(events)) - 1)
    return float(math.ceil(events / scale) * scale)
