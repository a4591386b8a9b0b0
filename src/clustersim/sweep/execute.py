"""Run a sweep's pending points in partitions, by a local process pool or a Ray cluster, and hand each
finished partition back (in the order they finish) to be committed.

A runner is a module-level function ``runner(command, items) -> list[Outcome]`` over ``(id, inputs)``
pairs, so that a worker process (spawned, or Ray's) imports it by name. A partition whose worker dies is
tried again, up to ``retries`` more times (locally: deaths in a pool of its own, where they are its).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.processes import spawned_pool
from clustersim.sweep.spec import Point, Value
from clustersim.sweep.store import Outcome

Items = list[tuple[str, dict[str, Value]]]
Runner = Callable[[str, Items], list[Outcome]]
RAY_EXTRA = "pip install 'clustersim[ray]'"
PARTITIONS_PER_WORKER = 4
MAX_PARTITION_POINTS = 64


@dataclass(frozen=True)
class Finished:
    """A partition that finished: its index, its outcomes and how many tries it took."""

    partition: int
    outcomes: list[Outcome]
    attempts: int


def partition(points: list[Point], workers: int, size: int | None = None) -> list[list[Point]]:
    """Consecutive slices of ``points`` (spec order), ``size`` points each; by default about
    ``PARTITIONS_PER_WORKER`` per worker, at most ``MAX_PARTITION_POINTS`` points each."""
    if size is None:
        size = min(MAX_PARTITION_POINTS, max(1, math.ceil(len(points) / (max(workers, 1) * PARTITIONS_PER_WORKER))))
    return [points[i : i + size] for i in range(0, len(points), size)]


def _items(part: list[Point]) -> Items:
    return [(point.id, point.inputs) for point in part]


def run_local(runner: Runner, command: str, parts: list[list[Point]], workers: int, retries: int) -> Iterator[Finished]:
    """Run ``parts`` on a pool of ``workers`` spawned processes (in this process for one worker).

    A worker that dies breaks its whole pool, failing every partition still in it, so the death cannot be laid to
    one of them there: the partitions it left unfinished run again, each in a pool of its own (``workers`` at a
    time), where a death is that partition's own; a partition is given up after ``retries`` more such deaths."""
    if workers <= 1 or len(parts) <= 1:
        for index, part in enumerate(parts):
            yield Finished(index, runner(command, _items(part)), 1)
        return
    attempts = dict.fromkeys(range(len(parts)), 0)
    deaths = dict.fromkeys(range(len(parts)), 0)  # deaths in a pool of its own: the partition's
    pending, alone = set(range(len(parts))), set[int]()
    while pending:
        isolated = sorted(pending & alone)[:workers]
        batches = [[index] for index in isolated] or [sorted(pending)]
        pools = [spawned_pool(min(workers, len(batch))) for batch in batches]
        futures: dict[Future[list[Outcome]], tuple[int, bool]] = {}
        try:
            for pool, batch in zip(pools, batches, strict=True):
                for index in batch:
                    attempts[index] += 1
                    futures[pool.submit(runner, command, _items(parts[index]))] = (index, len(batch) == 1)
            while futures:
                done, _ = wait(futures, return_when=FIRST_COMPLETED)
                for future in done:
                    index, own_pool = futures.pop(future)
                    try:
                        outcomes = future.result()
                    except BrokenProcessPool:
                        alone.add(index)
                        deaths[index] += own_pool
                        if deaths[index] > retries:
                            raise ClusterSimError(
                                f"--executor local: a worker died running partition {index} {deaths[index]} times; "
                                "giving up",
                                field="--executor",
                            ) from None
                        continue
                    pending.discard(index)
                    yield Finished(index, outcomes, attempts[index])
        finally:  # a sweep stopped early (an error, Ctrl-C) waits only for the partitions already running
            for pool in pools:
                pool.shutdown(wait=True, cancel_futures=True)


def run_ray(
    runner: Runner, command: str, parts: list[list[Point]], address: str | None, workers: int | None, retries: int
) -> Iterator[Finished]:
    """Run ``parts`` as Ray tasks (a local Ray instance of ``workers`` CPUs without an ``address``); Ray
    retries a task whose worker died or which raised, up to ``retries`` times."""
    ray = import_ray()
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "configure_logging": False}
        if address is None and workers is not None:
            options["num_cpus"] = workers
        try:
            ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ClusterSimError(
                f"--address: cannot join the Ray cluster at {address}: {exc}", field="--address"
            ) from None
    refs: dict[Any, int] = {}
    try:
        task = ray.remote(max_retries=retries, retry_exceptions=True)(runner)
        refs = {task.remote(command, _items(part)): index for index, part in enumerate(parts)}
        while refs:
            done, _ = ray.wait(list(refs), num_returns=1)
            for ref in done:
                index = refs.pop(ref)
                yield Finished(index, ray.get(ref), 1)
    finally:
        for ref in refs:  # left over when the sweep stops early
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()


def import_ray() -> Any:
    """``ray``, or a one-line error naming the extra that installs it."""
    import importlib

    try:  # imported by name: ray is an extra, absent where only the base install is
        ray = importlib.import_module("ray")
    except ImportError:
        raise ClusterSimError(
            f"--executor ray needs Ray, which is not installed: {RAY_EXTRA}", field="--executor", value="ray"
        ) from None
    return ray
