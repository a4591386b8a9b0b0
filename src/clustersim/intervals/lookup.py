"""The interval of a prediction: split conformal over the left-out residuals of the most similar cases.

Residuals are grouped from the most specific to the least, and the first group with enough cases
is used:

1. the kind, the chip, the framework and the scale (devices: up to 64, 65 to 512, more);
2. the kind, the chip and the framework;
3. the kind and the chip;
4. the kind: every chip and stack (pooled);
5. every kind, where the kind itself has too few cases (serving, scored on cases of other sources).

A serving latency figure (TTFT, TPOT) is sized by the residuals of that figure only, in the same groups; the
other figures of every kind by the primary figures' (a case's throughput, step time, bus bandwidth). A latency
percentile (median, p99) whose residuals come from fewer than ``MIN_SOURCES`` publications is never narrower than
its mean's interval (``PERCENTILE_OF``): two load generators' percentiles judge each other, not a third stack.

A serving deployment's features (``layout``) select or widen. Attention data parallel selects: its interval is sized
by the residuals of the deployments whose selecting features are among its own, so a tensor-parallel deployment is
not judged by the attention-DP runs' errors (another mechanism), while an attention-DP one is judged by both. A MoE
model (``experts``) widens, as a training layout's features do below: a MoE deployment's interval is never narrower
than the spread of the MoE deployments' left-out runs (19.5% off at the median where the dense ones are 6.1%).

Then, for a training layout (``layout``: its features, ``clustersim.intervals.layout``) or a serving deployment's, the
interval is never narrower than the spread of the left-out cases, of any chip, whose layouts have every one of
those features (a pipelined, expert-parallel job is judged by the pipelined, expert-parallel runs as
well as by its chip's), where there are enough of them.

Enough is ``MIN_CASES`` (20), or more where the level needs more for its rank (``cases_needed``:
99 at 99%), from at least ``MIN_SOURCES`` publications: one source's residuals measure how well the
model meets that source, not a new one (a group of one source's runs that the model happens to meet
closely would judge every other source by that closeness). A chip with no validated case of the kind
(Trainium2, which runs on Trainium1's fractions; a family of your own catalog), or too few, borrows: its
interval is the widest of the pooled one and each chip's own (never narrower than any chip with evidence:
the pooled training cases, mostly A100 runs the model meets within a few percent, are narrower than
Hopper's), or of the chip's own few cases where they are wider (enough for the level's rank, from any number of
sources: they widen, never narrow; a collective's, those of its message-size band where there are enough:
``size_band``), and a note says so. A
framework with no case on the chip gets the chip's cases of other stacks, and a note.

A chip is the accelerator's catalog family (H100 and H200 are one Hopper die, A100 40 and 80 GB one
Ampere, B200 and GB200 one Blackwell GPU), except the generations in ``SEPARATE_CHIPS`` that share a
family in the efficiency table but are other silicon: Trainium1, 2 and 3 each stand for themselves.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Callable, Sequence

from clustersim.intervals.conformal import DEFAULT_LEVEL, Interval, Spread, cases_needed, check_level, spread
from clustersim.intervals.layout import SELECTING
from clustersim.intervals.residuals import (
    MEASURED_LATENCY_FIELDS,
    PERCENTILE_OF,
    Residual,
    ResidualTable,
    load_residuals,
    measure_of,
)

MIN_CASES = 20
MIN_SOURCES = 3
STACK_SOURCES = 2  # a stack's own cases widen another group's interval from this many sources (never narrow it)
SCALE_EDGES = (64, 512)  # devices: up to 64, 65 to 512, more than 512
SIZE_BANDS_BYTES = (2**20, 2**26)  # a collective's message: under 1 MiB, 1 to 64 MiB, 64 MiB and up
SEPARATE_CHIPS = frozenset({"trainium1", "trainium2", "trainium3"})
DEFAULT_FRAMEWORK = {
    "training": "megatron",
    "inference": "tensorrt-llm",
    "collective": "nccl-tests",
    "memory": "megatron",
}
_PLURAL = {"training": "training", "inference": "serving", "collective": "collective", "memory": "training memory"}


def chip_of(accelerator: str, family: str) -> str:
    """The chip whose residuals stand for ``accelerator`` (see the module's docstring)."""
    return accelerator if accelerator in SEPARATE_CHIPS else family


def scale_of(devices: int) -> str:
    """The scale bucket of a job on ``devices`` devices."""
    low = 1
    for edge in SCALE_EDGES:
        if devices <= edge:
            return f"{low}-{edge} devices"
        low = edge + 1
    return f"over {SCALE_EDGES[-1]} devices"


def spread_for(
    kind: str,
    *,
    accelerator: str,
    family: str,
    framework: str | None,
    devices: int,
    level: float = DEFAULT_LEVEL,
    table: ResidualTable | None = None,
    exclude_source: str | None = None,
    layout: Sequence[str] = (),
    field: str = "",
    size_bytes: float = 0.0,
) -> Spread | None:
    """The log-spread for a ``kind`` job of ``framework`` on ``devices`` ``accelerator``s (of catalog
    ``family``) whose layout has the features ``layout``; ``exclude_source`` leaves that source's
    residuals out (a case's own, when scoring it). ``field``: a latency field (``MEASURED_LATENCY_FIELDS``) is sized
    by its own residuals only, any other by the primary figures'. ``size_bytes``: a collective's message size, whose
    band (``size_band``) selects the chip's own cases where they widen a borrowed interval. None where there are none
    of the kind."""
    level = check_level(level)
    measure = measure_of(field)
    every = [
        r
        for r in (table or load_residuals()).residuals
        if (exclude_source is None or r.source != exclude_source) and measure_of(r.field) == measure
    ]
    # a serving deployment's selecting features (attention data parallel) name another mechanism: its residuals size
    # only the deployments that have them (its other features, and a training layout's, widen below)
    rows = [r for r in every if r.kind == kind and (kind != "inference" or set(r.layout) & SELECTING <= set(layout))]
    if not rows:
        return None
    label = kind if measure == "primary" else f"{kind} {MEASURED_LATENCY_FIELDS[field]}"
    found = _spread_of_system(label, kind, rows, every, accelerator, family, framework, devices, level, size_bytes)
    found = _widened_by_layout(found, kind, rows, tuple(layout), level)
    mean = PERCENTILE_OF.get(field)
    sources = len({r.source for r in rows})
    if mean is None or sources >= MIN_SOURCES:
        return found
    borrowed = spread_for(
        kind, accelerator=accelerator, family=family, framework=framework, devices=devices, level=level, table=table,
        exclude_source=exclude_source, layout=layout, field=mean,
    )  # fmt: skip
    if borrowed is None or borrowed.q_hi - borrowed.q_lo <= found.q_hi - found.q_lo:
        return found
    what = MEASURED_LATENCY_FIELDS[field]
    why = f"{what}: {len(rows)} cases from {sources} source{'s' * (sources > 1)}, too few to judge by alone"
    return dataclasses.replace(borrowed, note=_joined(f"{why}: the wider interval of {MEASURED_LATENCY_FIELDS[mean]}",
                                                      borrowed.note))  # fmt: skip


def _spread_of_system(
    label: str,
    kind: str,
    rows: list[Residual],
    every: list[Residual],
    accelerator: str,
    family: str,
    framework: str | None,
    devices: int,
    level: float,
    size_bytes: float = 0.0,
) -> Spread:
    """The spread of the most similar system's residuals (the module's groups 1-5); ``label`` names the kind
    (and a latency field) in the bases."""
    chip = chip_of(accelerator, family)
    stack = framework or DEFAULT_FRAMEWORK.get(kind, "")
    scale = scale_of(devices)
    need = max(MIN_CASES, cases_needed(level))
    what = _PLURAL.get(kind, kind) + label.removeprefix(kind)
    groups: list[tuple[str, Callable[[Residual], bool]]] = [
        (f"{label}, {chip}, {stack}, {scale}", lambda r: r.chip == chip and r.framework == stack and _in(r, scale)),
        (f"{label}, {chip}, {stack}", lambda r: r.chip == chip and r.framework == stack),
        (f"{label}, {chip}, every stack", lambda r: r.chip == chip),
    ]
    on_chip = [r for r in rows if r.chip == chip]
    for index, (basis, keep) in enumerate(groups):
        members = [r for r in rows if keep(r)]
        if _enough(members, need):
            note = ""
            if not any(r.framework == stack for r in on_chip):
                note = f"no validated {what} cases with {stack} on {chip}: interval from {chip}'s cases of other stacks"
            found = _spread(members, level, basis, note)
            return found if index < 2 else _widened_by_stack(found, label, rows, chip, stack, level)
    sources = len({r.source for r in on_chip})
    why = (
        f"no validated {what} cases on {accelerator}"
        if not on_chip
        else f"only {len(on_chip)} {what} cases from {sources} source{'s' * (sources > 1)} on {chip}"
    )
    if len(rows) < need <= len(every):
        note = f"{why} and {len(rows)} of any chip: interval from all {len(every)} cases of every kind, pooled, wider"
        return _spread(every, level, "every kind, chip and stack", note)
    # Borrowed evidence is never narrower than any chip's own: the widest of the pooled cases and each chip's.
    pooled = _spread(rows, level, f"{label}, every chip and stack", "")
    chips = sorted({r.chip for r in rows} - {chip})
    own = [
        (c, _spread(m, level, f"{label}, {c}", ""))
        for c in chips
        if _enough(m := [r for r in rows if r.chip == c], need)
    ]
    widest, spread_of = max([("", pooled), *own], key=lambda pair: pair[1].q_hi)
    if not widest:
        note = f"{why}: interval from all {len(rows)} {what} cases, pooled (no other chip's own is wider)"
    else:
        note = f"{why}: interval from {widest}'s {spread_of.cases} cases, the widest of any chip's and the pooled"
    found = dataclasses.replace(spread_of, note=_joined(note, spread_of.note))
    widened = _widened_by_own_chip(found, label, on_chip, chip, level, size_bytes)
    return _widened_by_stack(widened, label, rows, chip, stack, level)


def size_band(size_bytes: float) -> str:
    """The message-size band of a collective (``SIZE_BANDS_BYTES``): below 1 MiB (latency-bound), 1 to 64 MiB (where
    the algorithm and protocol change), 64 MiB and up (bandwidth-bound)."""
    low, high = SIZE_BANDS_BYTES
    if size_bytes < low:
        return "under 1 MiB"
    return "1-64 MiB" if size_bytes < high else "64 MiB and up"


def _widened_by_own_chip(
    found: Spread, label: str, on_chip: list[Residual], chip: str, level: float, size_bytes: float = 0.0
) -> Spread:
    """``found`` (borrowed from other chips), or the spread of the chip's own left-out cases where it is wider and
    they are enough for the level's rank: too few, or from too few sources, to judge the chip by alone, they still
    say how far the model has missed on it, and borrowed evidence never narrows that (Trainium1's collectives,
    nccom-test's 18 runs from one page, are off by up to 12x at 1-8 MiB where the pooled GPU runs are within tens of
    percent). A collective of ``size_bytes`` is judged by the chip's own cases of its size band where there are
    enough of them (Trainium1's runs of 64 MiB and up are within 50%), else by all of them."""
    members, band = on_chip, ""
    if size_bytes:
        banded = [r for r in on_chip if r.size_bytes and size_band(r.size_bytes) == size_band(size_bytes)]
        if len(banded) >= cases_needed(level):
            members, band = banded, size_band(size_bytes)
    if len(members) < cases_needed(level):
        return found
    own = _spread(members, level, f"{label}, {chip}" + (f", {band}" if band else ""), "")
    if own.q_hi - own.q_lo <= found.q_hi - found.q_lo:
        return found
    sources = len({r.source for r in members})
    of_band = f" of {band}" if band else ""
    note = f"widened to {chip}'s own {len(members)} left-out cases{of_band} from {sources} source{'s' * (sources > 1)}"
    return dataclasses.replace(own, note=_joined(found.note, f"{note} (wider than {found.basis})"))


def _widened_by_stack(found: Spread, label: str, rows: list[Residual], chip: str, stack: str, level: float) -> Spread:
    """``found`` (other stacks' cases), or the spread of the stack's own left-out cases where it is wider: on the chip,
    else on any chip, where they are too few to judge by alone (under ``MIN_CASES`` or ``MIN_SOURCES``) but enough
    for the level's rank from ``STACK_SOURCES`` sources. Another stack's closeness never narrows this one's interval
    (vLLM's runs are not judged by TensorRT-LLM's alone)."""
    need = cases_needed(level)
    for where, members in (
        (f"{chip}, {stack}", [r for r in rows if r.chip == chip and r.framework == stack]),
        (f"every chip, {stack}", [r for r in rows if r.framework == stack]),
    ):
        if len(members) < need or len({r.source for r in members}) < STACK_SOURCES:
            continue
        own = _spread(members, level, f"{label}, {where}", "")
        if own.q_hi - own.q_lo <= found.q_hi - found.q_lo:
            return found
        note = f"widened to {stack}'s own {len(members)} left-out cases (wider than {found.basis})"
        return dataclasses.replace(own, note=_joined(found.note, note))
    return found


def interval_for(
    kind: str,
    *,
    accelerator: str,
    family: str,
    framework: str | None,
    devices: int,
    predicted: float,
    rate: bool = False,
    level: float = DEFAULT_LEVEL,
    table: ResidualTable | None = None,
    exclude_source: str | None = None,
    field: str = "",
    size_bytes: float = 0.0,
) -> Interval | None:
    """The interval of ``predicted`` (a duration; ``rate``: its inverse, such as tokens/s or busbw) of
    ``field`` (``spread_for``; ``size_bytes``: a collective's message size)."""
    found = spread_for(
        kind,
        accelerator=accelerator,
        family=family,
        framework=framework,
        devices=devices,
        level=level,
        table=table,
        exclude_source=exclude_source,
        field=field,
        size_bytes=size_bytes,
    )
    if found is None:
        return None
    return found.rate(predicted) if rate else found.duration(predicted)


def _widened_by_layout(found: Spread, kind: str, rows: list[Residual], layout: tuple[str, ...], level: float) -> Spread:
    """``found``, or the widest spread of the ``rows`` whose layouts have every feature of some subset of
    ``layout``, over the subsets with enough of them, where it is wider: a feature added to a layout never
    narrows its interval (runs with experts and FSDP together too few to judge by, the runs with experts are)."""
    need = max(MIN_CASES, cases_needed(level))
    widest: tuple[Spread, int, str] | None = None
    for size in range(len(layout), 0, -1):  # the most specific first: it names a tie
        for subset in itertools.combinations(layout, size):
            members = [r for r in rows if set(subset) <= set(r.layout)]
            if not _enough(members, need):
                continue
            features = ", ".join(subset)
            candidate = _spread(members, level, f"{kind}, every chip, layouts with {features}", "")
            if widest is None or candidate.q_hi - candidate.q_lo > widest[0].q_hi - widest[0].q_lo:
                widest = (candidate, len(members), features)
    if widest is None or widest[0].q_hi - widest[0].q_lo <= found.q_hi - found.q_lo:
        return found
    by_layout, count, features = widest
    note = f"widened to the {count} left-out cases whose layouts also have {features} (wider than {found.basis})"
    return dataclasses.replace(by_layout, note=_joined(found.note, note))


def _enough(members: Sequence[Residual], need: int) -> bool:
    """Whether ``members`` are enough to judge by: ``need`` cases from ``MIN_SOURCES`` sources or more."""
    return len(members) >= need and len({r.source for r in members}) >= MIN_SOURCES


def _joined(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


def _in(row: Residual, scale: str) -> bool:
    return scale_of(row.devices) == scale


def _spread(members: Sequence[Residual], level: float, basis: str, note: str) -> Spread:
    return spread([r.r for r in members], level, basis=f"{basis}: {len(members)} cases", note=note)
