"""Randomly drawn flow workloads shared by the solver, engine and kernel tests."""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from clustersim.network.flowsim.engine import Flows


def dependent_transfers(
    pairs: list[tuple[int, int]], sizes: list[float], starts: list[float], waits: list[list[int]]
) -> Flows:
    """Transfers from ``src`` to ``(src + offset) % 16`` for each ``(src, offset)`` pair, each waiting on the
    earlier transfers its ``waits`` entry names."""
    src = np.array([a for a, _ in pairs])
    dst = (src + np.array([b for _, b in pairs])) % 16
    deps = [sorted(d for d in w if d < i) for i, w in enumerate(waits)]
    return Flows(
        src_gpu=src,
        dst_gpu=dst,
        size_bytes=np.array(sizes),
        start_at_s=np.array(starts),
        dep_ptr=np.concatenate([[0], np.cumsum([len(d) for d in deps])]).astype(np.int64),
        dep_idx=np.array([x for d in deps for x in d], dtype=np.int64),
    )


def toggled_flows(min_paths: int, max_paths: int) -> st.SearchStrategy[tuple[int, list, list, list]]:
    """``(n, paths, capacities, batches)``: n flows, each over ``min_paths..max_paths`` (resource, weight)
    hops of six resources with those capacities, and batches of flow indices toggled in and out."""
    return st.integers(2, 12).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(
                st.lists(
                    st.tuples(st.integers(0, 5), st.sampled_from([0.25, 0.5, 1.0])),
                    min_size=min_paths,
                    max_size=max_paths,
                ),
                min_size=n,
                max_size=n,
            ),
            st.lists(st.floats(0.5, 20.0), min_size=6, max_size=6),
            st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=1, max_size=8),
        )
    )
