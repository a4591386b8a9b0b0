"""Run a sweep into its store: check the spec against what the store holds, run the points not yet there,
commit each partition as it finishes."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from clustersim import __version__
from clustersim.errors import ClusterSimError
from clustersim.sweep.execute import Finished, Runner, partition, run_local, run_ray
from clustersim.sweep.spec import SweepSpec, differences, parse_spec
from clustersim.sweep.store import MEMORY, SweepStore

Progress = Callable[[int, int], None]
EXECUTORS = ("local", "ray")


@dataclass(frozen=True)
class SweepRun:
    """What one start or resume did: points in the spec, found in the store, computed now, errors, time."""

    points: int
    from_store: int
    computed: int
    partitions: int
    errors: int
    elapsed_s: float
    run: int


def open_for(spec: SweepSpec, store: SweepStore, *, resume: bool) -> None:
    """Refuse a store that holds another sweep, or rows without ``resume``, or ``resume`` with nothing to resume."""
    meta = store.meta()
    where = store.path
    if not meta:
        if resume and where != MEMORY:
            raise ClusterSimError(
                f"--resume: {where} holds no sweep to resume; run without --resume to start one",
                field="--resume",
                value=where,
            )
        return
    if not resume:
        raise ClusterSimError(
            f"--store: {where} already holds a sweep ({len(store.finished_ids()):,} of {meta.get('points')} points); "
            f"give --resume to continue it, or another --store",
            field="--store",
            value=where,
        )
    changed = differences(parse_spec(meta["spec"], f"the spec stored in {where}"), spec)
    if changed:
        raise ClusterSimError(
            f"--resume: the spec differs from the one {where} was started with: {'; '.join(changed)}; "
            f"resume with the same spec, or give another --store",
            field="SPEC",
        )
    if meta.get("version") != __version__:
        raise ClusterSimError(
            f"--resume: {where} was written by clustersim {meta.get('version')}, this is {__version__}: its rows "
            f"would not compare; give another --store",
            field="--resume",
        )


def run_sweep(
    spec: SweepSpec,
    store: SweepStore,
    runner: Runner,
    *,
    executor: str = "local",
    workers: int = 1,
    address: str | None = None,
    partition_size: int | None = None,
    retries: int = 2,
    resume: bool = False,
    progress: Progress | None = None,
) -> SweepRun:
    """Run every point of ``spec`` that ``store`` lacks and commit each partition as it finishes."""
    if executor not in EXECUTORS:
        raise ClusterSimError(
            f"--executor: {executor!r} is not one (valid: {', '.join(EXECUTORS)})", field="--executor"
        )
    start = time.perf_counter()
    points = spec.expand()
    open_for(spec, store, resume=resume)
    meta = {"spec": spec.text, "command": spec.command, "version": __version__, "points": str(len(points))}
    run = store.begin_sweep(meta, executor, workers)
    finished = store.finished_ids()
    pending = [point for point in points if point.id not in finished]
    parts = partition(pending, workers, partition_size)
    seqs = {point.id: point.seq for point in pending}
    inputs = {point.id: json.dumps(point.inputs, separators=(",", ":")) for point in pending}
    stream: Iterator[Finished]
    if executor == "ray":
        stream = run_ray(runner, spec.command, parts, address, workers, retries)
    else:
        stream = run_local(runner, spec.command, parts, workers, retries)
    done = len(points) - len(pending)
    errors = 0
    if progress is not None:
        progress(done, len(points))
    for item in stream:
        store.commit_partition(item.outcomes, seqs, inputs, item.partition, run, item.attempts)
        done += len(item.outcomes)
        errors += sum(outcome.error is not None for outcome in item.outcomes)
        if progress is not None:
            progress(done, len(points))
    return SweepRun(
        len(points), len(points) - len(pending), len(pending), len(parts), errors, time.perf_counter() - start, run
    )
