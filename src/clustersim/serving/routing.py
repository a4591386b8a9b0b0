"""Which replica serves each request of an open loop (Poisson arrivals or a trace).

Two policies (``ROUTINGS``):

* ``random``: each request to a replica drawn at random, as a plain load balancer in front of independent
  engines does (a Kubernetes service, round robin over busy replicas);
* ``cache-aware``: each request to the replica where it is expected to get its first token soonest, as
  Mooncake's Conductor schedules prefill (Qin et al., FAST'25, Algorithm 1: for every prefill instance, the
  prefix it holds, its queue time and the time of the prefill left, the instance with the smallest sum
  chosen). Here a replica's queue is the prefill work already routed to it and not yet done at its prefill
  rate, and the prefill left is the request's tokens past its cached prefix (``prefill_s``). Without block
  hashes (a Poisson run, a trace that names none) nothing is cached and it sends each request to the replica
  with the least prefill work waiting.

The router decides before the replicas run, so its queues are its own estimate: prefill only (a replica's
decode steps also slow its prompts), at a prefill rate priced once from the step model.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError
from clustersim.serving.sim_steps import Steps
from clustersim.serving.traces import PrefixCache

ROUTINGS = ("random", "cache-aware")


def check_routing(routing: str) -> str:
    """``routing`` if it is a policy, else a ``ClusterSimError`` naming ``--routing`` and the policies."""
    if routing not in ROUTINGS:
        raise ClusterSimError(
            f"--routing: {routing!r} is not one of {', '.join(ROUTINGS)}", field="--routing", value=routing
        )
    return routing


def prefill_price(steps: Steps, token_budget: int) -> Callable[[int, int], float]:
    """A replica's prefill time of a prompt of ``n`` tokens past its ``cached`` ones, from its step prices: the
    tokens at a full-budget prompt step's time per token, and their attention's (query, key) pairs."""
    budget = float(token_budget)
    base_s = steps.step_s(0, 0.0, budget, 1, 0.0)
    pair_s = steps.step_s(0, 0.0, budget, 1, 1.0) - base_s
    token_s = base_s / budget

    def prefill_s(cached: int, n: int) -> float:
        return (n - cached) * token_s + pair_s * steps.chunk_pairs(cached, n)

    return prefill_s


@dataclass(frozen=True)
class Routed:
    """Each request's replica, and the prompt tokens it finds cached there (zeros without block hashes)."""

    replica: npt.NDArray[np.int64]
    cached_tokens: npt.NDArray[np.int64]


def route(
    routing: str,
    arrival_s: npt.NDArray[np.float64],
    input_tokens: npt.NDArray[np.int64],
    replicas: int,
    rng: np.random.Generator,
    *,
    hashes: Sequence[Sequence[int]] | None = None,
    capacity_blocks: float = float("inf"),
    prefill_s: Callable[[int, int], float] | None = None,
) -> Routed:
    """The replica of each request (arrival order) under ``routing``, and its cached prompt tokens there: each
    replica's own prefix cache of ``capacity_blocks`` (``traces.PrefixCache``) where ``hashes`` are given.
    ``prefill_s(cached, prompt)`` prices a prompt's prefill past its cached tokens (cache-aware only)."""
    count = int(input_tokens.size)
    if check_routing(routing) == "random":
        replica = rng.integers(0, replicas, count) if replicas > 1 else np.zeros(count, dtype=np.int64)
        cached = np.zeros(count, dtype=np.int64)
        if hashes is not None:
            caches = [PrefixCache(capacity_blocks) for _ in range(replicas)]
            for r in range(count):
                cache = caches[int(replica[r])]
                cached[r] = cache.found_tokens(hashes[r], int(input_tokens[r]))
                cache.use(hashes[r])
        return Routed(np.asarray(replica, dtype=np.int64), cached)
    if prefill_s is None:
        raise ClusterSimError("cache-aware routing needs the replicas' prefill price", field="--routing")
    caches = [PrefixCache(capacity_blocks) for _ in range(replicas)]
    free_at = np.zeros(replicas)  # when each replica's routed prefill work is done
    replica = np.zeros(count, dtype=np.int64)
    cached = np.zeros(count, dtype=np.int64)
    for r in range(count):
        t, n = float(arrival_s[r]), int(input_tokens[r])
        found = [cache.found_tokens(hashes[r], n) if hashes is not None else 0 for cache in caches]
        work = [prefill_s(c, n) for c in found]
        first_token = [max(free_at[k] - t, 0.0) + work[k] for k in range(replicas)]
        best = int(np.argmin(first_token))
        replica[r], cached[r] = best, found[best]
        free_at[best] = max(free_at[best], t) + work[best]
        if hashes is not None:
            caches[best].use(hashes[r])
    return Routed(replica, cached)
