"""A pool of spawned worker processes that leave when the process that started them is gone (stdlib only).

Spawned, not forked: a worker imports what it runs by name, so it never inherits a half-built state (module-level
tables, an open store) from its parent. A worker watches its parent and exits when it is gone (killed), rather than
wait forever on a queue it holds open itself. The sweep's local executor and ``validate --latency simulated`` use it.
"""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

PARENT_POLL_S = 0.5


def default_workers() -> int:
    """Every core of this machine."""
    return os.cpu_count() or 1


def spawned_pool(workers: int) -> ProcessPoolExecutor:
    """A pool of ``workers`` spawned processes that leave when this one is gone."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(workers, mp_context=spawn, initializer=_leave_with_parent, initargs=(os.getpid(),))


def _leave_with_parent(parent: int) -> None:
    """A pool worker's watch on its parent: when the process that started it is gone, the worker exits."""
    import threading
    import time

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="pool-parent-watch", daemon=True).start()
