"""Where a plan's points are searched: in this process, one after another (the default), or as partitions of
consecutive points on Ray workers (``RayPoints``), the results put back in point order so that both give the
same plan.

An executor is called with a picklable ``task`` (points -> one result per point) and the partitions, and yields
``(partition index, results)`` as partitions finish. Ray is an extra: this module never imports it; the caller
hands in the module (``clustersim.sweep.execute.import_ray`` names the extra when it is missing).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Hashable, Iterator, Sequence
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

from clustersim.errors import ClusterSimError

Item = TypeVar("Item")
Result = TypeVar("Result")
PARTITIONS_PER_WORKER = 4  # a few per worker, so that a slow partition does not leave the others idle
POINTS_PER_PARTITION = 16  # one worker: items per partition (each a progress step; a plan's batch of points)
ENV_PREFIX = "CLUSTERSIM_"  # the settings a worker must read as this process does (calibration, overlays)


class Executor(Protocol):
    """Runs ``task`` over each partition and yields ``(partition index, results)`` as each finishes."""

    def __call__(
        self, task: Callable[[list[Any]], list[Any]], parts: Sequence[list[Any]]
    ) -> Iterator[tuple[int, list[Any]]]: ...


def run_here(
    task: Callable[[list[Item]], list[Result]], parts: Sequence[list[Item]]
) -> Iterator[tuple[int, list[Result]]]:
    """Every partition in this process, in order."""
    for index, part in enumerate(parts):
        yield index, task(part)


def partitions(
    items: Sequence[Item],
    workers: int,
    *,
    together: Callable[[Item], Hashable] | None = None,
    batch: Callable[[Item], Hashable] | None = None,
) -> list[list[Item]]:
    """Consecutive slices of ``items``: a run of items with equal ``together`` keys is never cut (they share
    work: a plan's points of one system share a ranking), and a slice ends where the ``batch`` key changes
    (what can be computed in one call: a plan's points of one framework and chip family). One worker: one slice
    per run of equal ``batch`` keys, at most ``POINTS_PER_PARTITION`` items where it can be cut (one item each
    without keys); more: about ``PARTITIONS_PER_WORKER`` slices per worker."""
    if workers <= 1 and batch is None:
        return [[item] for item in items]
    size = POINTS_PER_PARTITION if workers <= 1 else max(1, math.ceil(len(items) / (workers * PARTITIONS_PER_WORKER)))
    parts: list[list[Item]] = []
    previous: tuple[Hashable, Hashable] = (None, None)
    for item in items:
        keys = (None if together is None else together(item), None if batch is None else batch(item))
        shares = together is not None and keys[0] == previous[0]
        if not parts or (not shares and (keys[1] != previous[1] or len(parts[-1]) >= size)):
            parts.append([])
        parts[-1].append(item)
        previous = keys
    return parts


def _run_part(task: Callable[[list[Any]], list[Any]], part: list[Any]) -> list[Any]:
    """What a Ray task runs (module level, so that a worker imports it by name)."""
    return task(part)


class RayPoints(Generic[Item, Result]):
    """An executor on Ray: a local instance of ``workers`` CPUs without an ``address``, else the cluster there.
    Use it as a context manager; a Ray started here is shut down on exit. The task is shipped once
    (``ray.put``); each partition is one Ray task, retried ``retries`` times if its worker dies."""

    def __init__(self, ray: Any, *, address: str | None = None, workers: int | None = None, retries: int = 2) -> None:
        if workers is not None and workers < 1:
            raise ClusterSimError(f"--workers: {workers} must be at least 1", field="--workers", value=workers)
        self.ray, self.address, self.workers, self.retries = ray, address, workers, retries
        self.started = False

    def __enter__(self) -> RayPoints[Item, Result]:
        ray = self.ray
        if not ray.is_initialized():
            env = {key: value for key, value in os.environ.items() if key.startswith(ENV_PREFIX)}
            options: dict[str, Any] = {
                "include_dashboard": False, "log_to_driver": False, "configure_logging": False,
                "runtime_env": {"env_vars": env},
            }  # fmt: skip
            if self.address is None and self.workers is not None:
                options["num_cpus"] = self.workers
            try:
                ray.init(address=self.address, **options)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ClusterSimError(
                    f"--address: cannot join the Ray cluster at {self.address}: {exc}", field="--address"
                ) from None
            self.started = True
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.started:
            self.ray.shutdown()
            self.started = False

    @property
    def cpus(self) -> int:
        """The CPUs the Ray cluster offers (what ``partitions`` sizes for)."""
        return max(1, int(self.ray.cluster_resources().get("CPU", 1)))

    def __call__(
        self, task: Callable[[list[Item]], list[Result]], parts: Sequence[list[Item]]
    ) -> Iterator[tuple[int, list[Result]]]:
        ray = self.ray
        remote = ray.remote(max_retries=self.retries)(_run_part)
        shipped = ray.put(task)
        refs = {remote.remote(shipped, part): index for index, part in enumerate(parts)}
        try:
            while refs:
                done, _ = ray.wait(list(refs), num_returns=1)
                for ref in done:
                    yield refs.pop(ref), ray.get(ref)
        finally:
            for ref in refs:  # left over when the plan stops early
                ray.cancel(ref, force=True)
