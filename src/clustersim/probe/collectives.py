"""Collectives through ``torch.distributed``, timed as nccl-tests times them (``doc/PERFORMANCE.md``).

Local ranks are started with ``torch.multiprocessing`` (gloo on the CPU, forked; nccl on GPUs, spawned,
one GPU per rank), or the process is one rank of a ``torchrun`` launch (``RANK`` and ``WORLD_SIZE`` in
the environment, ``env://`` rendezvous). Each size of each collective runs ``warmup`` untimed calls,
then ``repeats`` calls each after a barrier, each timed alone (CUDA events on a GPU); a repetition's
time is the slowest rank's. Sizes follow nccl-tests: ``size`` is the larger of the send and receive
buffers, rounded down to whole float elements per rank; ``count`` is the elements per rank of the
gather family and alltoall, else of the buffer.
"""

from __future__ import annotations

import os
import queue as queues
import socket
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op, busbw_factor
from clustersim.probe.timing import Stats, summarize, time_once

COLLECTIVES = (Op.ALL_REDUCE, Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL, Op.BROADCAST)
ELEMENT_BYTES = 4  # float32, nccl-tests' default type "float"
PER_RANK_COUNT = (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALLTOALL)
POLL_S = 0.1


@dataclass(frozen=True)
class CollectivePlan:
    """What every rank runs: the collectives, the sizes (bytes), the timing, the device kind and backend."""

    ops: tuple[Op, ...]
    sizes_bytes: tuple[int, ...]
    warmup: int
    repeats: int
    device: str
    backend: str
    ranks: int


@dataclass(frozen=True)
class CollectiveRow:
    """One size of one collective: nccl-tests' size and count columns and the repetitions' times."""

    size_bytes: int
    count: int
    stats: Stats


@dataclass(frozen=True)
class CollectiveResult:
    """One collective over the size sweep, and where its ranks ran (rank -> host, process id, device name)."""

    op: Op
    ranks: int
    backend: str
    rows: tuple[CollectiveRow, ...]
    placement: tuple[tuple[str, int, str], ...]

    def bandwidths(self, row: CollectiveRow) -> tuple[float, float, float]:
        """nccl-tests' time (us), algbw and busbw (GB/s) of ``row`` at the median time."""
        algbw = row.size_bytes / row.stats.median_s / 1e9
        return row.stats.median_s * 1e6, algbw, algbw * busbw_factor(self.op, self.ranks)


def backend_of(device: str) -> str:
    """gloo for CPU tensors, nccl for GPU tensors."""
    return "nccl" if device == "cuda" else "gloo"


def under_torchrun() -> bool:
    """Whether this process is one rank of a launch that set ``RANK`` and ``WORLD_SIZE``."""
    return "RANK" in os.environ and "WORLD_SIZE" in os.environ


def shape(op: Op, size_bytes: int, ranks: int) -> tuple[int, int]:
    """nccl-tests' (size, count) for a requested ``size_bytes``: the size rounded down to whole elements per
    rank (at least one), the count per rank for the gather family and alltoall."""
    per_rank = max(size_bytes // (ELEMENT_BYTES * ranks), 1)
    total = per_rank * ranks
    return total * ELEMENT_BYTES, per_rank if op in PER_RANK_COUNT else total


def _call(torch: Any, dist: Any, op: Op, count: int, ranks: int, device: str) -> Callable[[], object]:
    """The collective on fresh float32 buffers of nccl-tests' sizes (``count`` per the ``shape`` rule)."""
    total = count * ranks if op in PER_RANK_COUNT else count
    big = torch.ones(total, dtype=torch.float32, device=device)
    small = torch.ones(total // ranks, dtype=torch.float32, device=device)
    out = torch.empty_like(big)
    if op is Op.ALL_REDUCE:
        return lambda: dist.all_reduce(big)
    if op is Op.ALL_GATHER:
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return lambda: gather(out, small)
    if op is Op.REDUCE_SCATTER:
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        return lambda: scatter(small, big)
    if op is Op.ALLTOALL:
        return lambda: dist.all_to_all_single(out, big)
    return lambda: dist.broadcast(big, 0)


def run_rank(torch: Any, plan: CollectivePlan, rank: int, report: Callable[[str, object], None]) -> None:
    """This rank's part: every (collective, size) of ``plan`` in an initialized process group; rank 0 reports
    ``("step", None)`` after each and ``("done", [CollectiveResult, ...])`` at the end."""
    import torch.distributed as dist

    warnings.filterwarnings("ignore", category=FutureWarning)  # the deprecated *_into_tensor names
    device = plan.device
    if device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)) % torch.cuda.device_count())
        name = str(torch.cuda.get_device_name())
    else:
        name = "cpu"
    placement: list[tuple[str, int, str]] = [("", 0, "")] * plan.ranks
    dist.all_gather_object(placement, (socket.gethostname(), os.getpid(), name))
    results = []
    for op in plan.ops:
        rows = []
        for requested in plan.sizes_bytes:
            size_bytes, count = shape(op, requested, plan.ranks)
            work = _call(torch, dist, op, count, plan.ranks, device)
            for _ in range(plan.warmup):
                work()
            samples = []
            for _ in range(plan.repeats):
                dist.barrier()
                samples.append(time_once(torch, device, work))
            per_rank: list[list[float]] = [[] for _ in range(plan.ranks)]
            dist.all_gather_object(per_rank, samples)
            times = [max(each[i] for each in per_rank) for i in range(plan.repeats)]
            rows.append(CollectiveRow(size_bytes, count, summarize(times, plan.warmup)))
            if rank == 0:
                report("step", None)
        results.append(CollectiveResult(op, plan.ranks, plan.backend, tuple(rows), tuple(placement)))
    if rank == 0:
        report("done", results)


def _worker(rank: int, plan: CollectivePlan, init_method: str, channel: Any) -> None:
    """A spawned or forked local rank: join the group, run, report to the parent through ``channel``."""
    import torch
    import torch.distributed as dist

    try:
        if plan.device == "cpu":
            torch.set_num_threads(1)  # the ranks share the cores
        dist.init_process_group(plan.backend, init_method=init_method, rank=rank, world_size=plan.ranks)
        run_rank(torch, plan, rank, lambda kind, payload: channel.put((kind, payload)))
        dist.destroy_process_group()
    except Exception as exc:  # the parent turns it into one line (torch keeps the traceback in its exception)
        channel.put(("error", f"rank {rank}: {type(exc).__name__}: {exc}".splitlines()[0]))
        raise


def measure_collectives(torch: Any, plan: CollectivePlan, step: Callable[[], None]) -> list[CollectiveResult] | None:
    """Run ``plan``: in this process under torchrun (None on ranks other than 0), else on ``plan.ranks`` local
    processes; ``step`` is called after each (collective, size)."""
    results: list[CollectiveResult] = []

    def report(kind: str, payload: object) -> None:
        if kind == "step":
            step()
        elif kind == "done":
            results.extend(payload)  # type: ignore[arg-type]

    if under_torchrun():
        import torch.distributed as dist

        rank = int(os.environ["RANK"])
        ours = not dist.is_initialized()
        if ours:
            dist.init_process_group(plan.backend, init_method="env://")
        run_rank(torch, plan, rank, report)
        if ours:
            dist.destroy_process_group()
        return results if rank == 0 else None
    _local(plan, report)
    return results


def _local(plan: CollectivePlan, report: Callable[[str, object], None]) -> None:
    """Run ``plan`` on local processes, passing rank 0's reports to ``report``; a failed rank is one line."""
    import torch.multiprocessing as mp
    from torch.multiprocessing.spawn import start_processes

    # Forking shares the imported torch (ranks start in a fraction of a second); CUDA needs spawn.
    method = "fork" if plan.device == "cpu" and "fork" in mp.get_all_start_methods() else "spawn"
    channel = mp.get_context(method).Queue()
    errors: list[str] = []

    def drain(wait_s: float) -> None:
        try:
            while True:
                kind, payload = channel.get(timeout=wait_s)
                if kind == "error":
                    errors.append(str(payload))
                else:
                    report(kind, payload)
                wait_s = 0.0
        except queues.Empty:
            return

    with tempfile.TemporaryDirectory(prefix="clustersim-probe-") as scratch:
        init = f"file://{os.path.join(scratch, 'rendezvous')}"
        context = start_processes(  # type: ignore[no-untyped-call]
            _worker, args=(plan, init, channel), nprocs=plan.ranks, join=False, start_method=method
        )
        failure: Exception | None = None
        try:
            while True:
                drain(POLL_S)
                try:
                    if context.join(timeout=POLL_S):
                        break
                except Exception as exc:  # a rank failed; the others were terminated
                    failure = exc
                    break
            drain(POLL_S)
        finally:  # an interrupt leaves no rank behind
            for process in context.processes:
                if process.is_alive():
                    process.terminate()
    if failure is not None or errors:
        why = errors[0] if errors else str(failure).strip().splitlines()[-1]
        raise ClusterSimError(f"collectives ({plan.backend}, {plan.ranks} ranks) failed: {why}", field="--what")
