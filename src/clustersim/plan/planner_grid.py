"""The points a training plan searches: instance types x node counts x frameworks x precisions x batches x price
offers x checkpoint policies, each a :class:`~clustersim.plan.planner.PlanPoint`.

A combination that cannot run (a framework on a chip it does not run on, a precision without tensor cores
for it, a cluster larger than the instance type allows, a budget smaller than one step) is left out with a
note; a name nothing knows (an instance, a framework, a precision) is an error naming the option.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from clustersim.catalog.registry import Catalog
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.precision import check_training_format, job_dtype, parse_training_format
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.errors import ClusterSimError
from clustersim.plan.planner import PlanPoint, Resilient
from clustersim.system import system_for_instance
from clustersim.training.job import PRICE_OFFERS, TrainingJob, default_global_batch
from clustersim.units import MAX_NODES, parse_count
from clustersim.workload.transformer import Transformer

RANGE = ".."


def expand_counts(text: str, field: str, *, limit: int = MAX_NODES, tokens: bool = False) -> tuple[int, ...]:
    """Whole counts from ``"128..2048"`` (the powers of two inside the range and both ends), ``"16,24,32"``
    or ``"64"``, sorted, each once; ``tokens`` reads suffixes (``4M..16M``). An error names ``field``."""
    valid = f"a count, a list (16,24,32) or a range (128..2048) of whole numbers from 1 to {limit:,}"

    def where(part: str) -> str:
        return repr(part) if part == text else f"{part!r} in {text!r}"

    def one(part: str) -> int:
        try:
            value = parse_count(part) if tokens else float(part)
        except (ClusterSimError, ValueError):
            raise ClusterSimError(
                f"{field}: {where(part)} is not a count (valid: {valid})", field=field, value=text
            ) from None
        if not math.isfinite(value) or value != int(value) or not 1 <= value <= limit:
            raise ClusterSimError(f"{field}: {where(part)} is out of range (valid: {valid})", field=field, value=text)
        return int(value)

    text = str(text).strip()
    if RANGE in text:
        low_text, _, high_text = text.partition(RANGE)
        low, high = one(low_text.strip()), one(high_text.strip())
        if low > high:
            raise ClusterSimError(f"{field}: range {text!r} runs backwards (valid: {valid})", field=field, value=text)
        powers = [1 << k for k in range(low.bit_length() - 1, high.bit_length() + 1) if low <= 1 << k <= high]
        return tuple(sorted({low, high, *powers}))
    parts = [p.strip() for p in text.split(",")]
    if not text or any(not p for p in parts):
        raise ClusterSimError(f"{field}: {text!r} has an empty entry (valid: {valid})", field=field, value=text)
    return tuple(sorted({one(p) for p in parts}))


@dataclass(frozen=True)
class PlanGrid:
    """The axes of a training plan. ``global_batches`` (sequences) or ``batch_tokens`` (tokens per step, each
    rounded to whole sequences) give the batches; neither: ``default_global_batch`` on each point's devices.
    ``frameworks`` None stands for the accelerator's default; ``checkpoints`` pairs a policy's name with
    what it does to an estimate (None: failure-free)."""

    instances: tuple[str, ...]
    nodes: tuple[int, ...]
    tokens: float
    seq_len: int | None = None
    frameworks: tuple[str | None, ...] = (None,)
    precisions: tuple[str, ...] = ("bf16",)
    global_batches: tuple[int, ...] | None = None
    batch_tokens: tuple[int, ...] | None = None
    offers: tuple[str, ...] = ("on_demand",)
    checkpoints: tuple[tuple[str, Resilient | None], ...] = (("none", None),)
    devices_per_node: int | None = None


def grid_points(
    model: Transformer,
    catalog: Catalog,
    grid: PlanGrid,
    *,
    profiles: Mapping[str, SoftwareProfile],
    efficiency: Mapping[str, FamilyEfficiency] | None = None,
) -> tuple[list[PlanPoint], list[str]]:
    """Every point of ``grid`` that can run, and a note for each combination left out (see the module)."""
    for offer in grid.offers:
        if offer not in PRICE_OFFERS:
            raise ClusterSimError(
                f"--price: unknown price offer {offer!r} (valid: {', '.join(PRICE_OFFERS)})",
                field="--price",
                value=offer,
            )
    for name in grid.frameworks:
        if name is not None and name.strip().lower() not in profiles:
            raise ClusterSimError(
                f"--framework: unknown framework {name!r} (valid: {', '.join(sorted(profiles))})",
                field="--framework",
                value=name,
            )
    formats = [parse_training_format(p, "--precision") for p in grid.precisions]
    seq_len = grid.seq_len or model.seq_len
    model.check_context(seq_len, f"--seq {seq_len}")
    model.check_unquantized("training")
    points: list[PlanPoint] = []
    notes: list[str] = []
    for instance in grid.instances:
        entry = catalog.instance(instance)  # an unknown id is an error naming it and the closest ones
        chip = catalog.accelerator(entry.accelerator)
        for framework in grid.frameworks:
            try:
                software = software_for(framework, chip.family, profiles, accelerator=chip.id)
            except ClusterSimError as exc:
                notes.append(f"skipped {entry.id} with {framework}: {exc}")
                continue
            for fmt in formats:
                try:
                    check_training_format(fmt, chip, "--precision")
                except ClusterSimError as exc:
                    notes.append(f"skipped {entry.id} in {fmt.value}: {exc}")
                    continue
                for nodes in grid.nodes:
                    try:
                        system = system_for_instance(catalog, entry.id, nodes, devices_per_node=grid.devices_per_node)
                    except ClusterSimError as exc:
                        notes.append(f"skipped {nodes} x {entry.id}: {exc}")
                        continue
                    fractions = efficiency_for(system.accelerator, efficiency) if efficiency is not None else None
                    for batch in _batches(grid, seq_len, system.num_devices):
                        try:
                            job = TrainingJob(batch, seq_len, precision=job_dtype(fmt), tokens=grid.tokens)
                        except ClusterSimError as exc:
                            notes.append(f"skipped {nodes} x {entry.id} at batch {batch}: {exc}")
                            continue
                        for offer in grid.offers:
                            for policy, resilience in grid.checkpoints:
                                points.append(
                                    PlanPoint(
                                        system, entry.id, nodes, job, software, fractions, offer, policy, resilience
                                    )
                                )
    return points, notes


def _batches(grid: PlanGrid, seq_len: int, devices: int) -> Sequence[int]:
    if grid.global_batches is not None:
        return grid.global_batches
    if grid.batch_tokens is not None:
        return sorted({max(1, round(t / seq_len)) for t in grid.batch_tokens})
    return (default_global_batch(seq_len, devices),)
