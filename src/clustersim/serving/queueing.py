"""Queueing formulas of the serving closed forms: the wait for a free slot (Erlang C) and, in a closed loop, the
wait of a prompt for the other clients' prompts ahead of it (M/D/1; the server scenario's own queue, over a request
set's lengths, is in ``clustersim.serving.latency``).

A replica runs its prompts' work one after another: a step that carries two prompts takes about as long as
two steps that carry one each (prefill is compute-bound), so a new prompt waits for the prompt work ahead of
it whatever the engine's token budget. With prompts of ``prompt_s`` each arriving at ``arrivals_per_s``
(a closed loop of many clients, ``clustersim.serving.concurrency``) that is an M/D/1 queue:
Pollaczek-Khinchine's mean wait ``load x prompt_s / (2 (1 - load))``, ``load = arrivals_per_s x prompt_s``.
"""

from __future__ import annotations

import math

import numpy as np


def erlang_c(servers: int, load: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with ``servers`` and offered ``load`` (Erlang C)."""
    if load <= 0.0:
        return 0.0
    if load >= servers:
        return 1.0
    k = np.arange(servers + 1, dtype=np.float64)
    log_factorial = np.concatenate(([0.0], np.cumsum(np.log(k[1:]))))
    log_terms = k * math.log(load) - log_factorial
    top = log_terms.max()
    blocking = math.exp(log_terms[-1] - top) / float(np.exp(log_terms - top).sum())  # Erlang B
    return servers * blocking / (servers - load * (1.0 - blocking))


def prompt_queue_wait_s(arrivals_per_s: float, prompt_s: float, ahead_at_most: float) -> float:
    """Mean wait of a prompt for the prompts ahead of it: an M/D/1 queue of prompts of ``prompt_s`` each coming
    at ``arrivals_per_s``, never more than ``ahead_at_most`` prompts' worth (a closed loop's other clients);
    that cap past saturation."""
    if arrivals_per_s <= 0.0 or prompt_s <= 0.0:
        return 0.0
    cap = max(ahead_at_most, 0.0) * prompt_s
    load = arrivals_per_s * prompt_s
    if load >= 1.0:
        return cap
    return min(load * prompt_s / (2.0 * (1.0 - load)), cap)
