"""One replica's engine, step by step: continuous batching with chunked prefill, or static batches.

**Continuous batching** (vLLM V1 / TensorRT-LLM in-flight batching). Each step first serves the running
requests: every decoding one makes a token (one token of the budget), every one still in its prompt gets
the next chunk the budget leaves; then waiting requests are admitted first-come first-served while the
sequence cap, the token budget and the free KV blocks allow, each starting its first chunk. A hybrid model's
request also holds ``state_blocks`` from its admission to its end (its Gated DeltaNet state, as vLLM's hybrid
cache gives each running request its state's blocks from the same pool). An engine that
schedules once every ``scheduler_steps`` decode steps (vLLM V0's multi-step scheduling) admits only at those
steps: prompts that arrive or find room between two schedulings wait for the next one. An engine that takes
arrivals in once every ``receive_steps`` decode steps, or right after a step that ran a prompt (SGLang's
``--scheduler-recv-interval``), leaves an arrival outside until then; what it has taken in is admitted at any step.
A request's prompt blocks are taken when it is admitted (``ceil(prompt / block)``); decoding grows it a block at a
time. When the decoders' next tokens need more blocks than are free, the latest admitted running request
is preempted (recompute: its blocks are freed, it goes back to the head of the queue and, readmitted,
prefills its prompt and the tokens it made, then carries on). With a reservation (``reserve_tokens``, TensorRT-LLM's
GUARANTEED_NO_EVICT capacity policy) a request is admitted only when the blocks of its prompt and its whole
output cap (the ``max_tokens`` it asked for) are free: it takes them all at admission, its decoding takes no
more, nothing is ever preempted, and it gives them back when it is done. A prefix-cache hit skips that share of a
prompt's prefill, or the request's own count of cached tokens (``cached_tokens``, from a trace's block hashes:
``clustersim.serving.traces``); the tokens are still held. The step that completes a prompt makes its first token. A
disaggregated decode pool (``kv_arrives``) receives each prompt's KV cache with the request: admitted, it
runs only the prompt's last position (a decode token's work) to make its next token. A serving stack whose
first streamed response leaves ``first_token_lag_steps`` iterations after the one that computed the token
(``SchedulerLimits.first_token_lag_steps``; 0: at the end of that iteration) reports it at the end of that
later step, or when the request finishes if that comes first; the engine's work is unchanged.

**Static batching**: an idle replica takes the waiting requests whose full lengths' blocks fit (up to the
batch cap), prefills them in one step and decodes the whole batch until its longest request is done (the
finished ones' slots are still computed); a request is done at its own last token.

Decoding sequences advance in lockstep, so the scheduler keeps sums instead of visiting each one: the
decoders' context (``S0 + b x step``), how many reach a block boundary at each step (by the residue of
their cache length modulo the block), and a heap of the steps at which they finish. Stretches of
decode-only steps up to the next event (an arrival that can be admitted, a finish, a block shortage) are
priced in one vectorized call (event batching).
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from clustersim.errors import ClusterSimError
from clustersim.serving.sim_steps import Steps

BATCH_STEPS = 512  # most decode-only steps priced in one call


@dataclass(frozen=True)
class SchedulerLimits:
    """What one replica's engine allows: tokens per step, sequences in flight, KV blocks and their size."""

    token_budget: int
    max_sequences: int
    block_tokens: int
    kv_blocks: int
    prefix_hit_rate: float = 0.0
    static: bool = False
    kv_arrives: bool = False  # a disaggregated decode pool: a prompt's KV comes with it, only its last token runs
    reserve_tokens: tuple[int, ...] = ()  # per request (run index): KV tokens reserved at admission; empty: paged
    first_token_lag_steps: int = 0  # a first token is reported at the end of this many steps after its own
    mixed_steps: bool = True  # false: a step runs prompts or decodes, never both, prompts first (vLLM V0)
    scheduler_steps: int = 1  # decode steps from one scheduling to the next (vLLM V0's --num-scheduler-steps)
    receive_steps: int = 1  # decode steps between intakes of arrivals (SGLang's --scheduler-recv-interval)
    cached_tokens: tuple[int, ...] = ()  # per request (run index): its prompt tokens in the prefix cache; empty:
    # prefix_hit_rate of each prompt
    state_blocks: int = 0  # blocks a request holds from admission to its end beside its tokens' (a hybrid's state)

    def cached(self, r: int, prompt_tokens: int) -> int:
        """Request ``r``'s prompt tokens found in the prefix cache: its own count, else the hit rate's share."""
        return self.cached_tokens[r] if self.cached_tokens else int(self.prefix_hit_rate * prompt_tokens)


@dataclass
class ReplicaLog:
    """What one replica's run recorded: per request (indices of the run) and per step."""

    first_token_s: dict[int, float] = field(default_factory=dict)
    finish_s: dict[int, float] = field(default_factory=dict)
    arrival_s: dict[int, float] = field(default_factory=dict)
    preemptions: dict[int, int] = field(default_factory=dict)
    step_s: list[float] = field(default_factory=list)  # steps with decoding sequences: duration
    step_decoding: list[int] = field(default_factory=list)  # and how many tokens their decoders made
    resume_gaps_s: list[float] = field(default_factory=list)  # a preempted request's wait for its next token
    steps: int = 0
    blocks_left: int = 0  # free KV blocks at the end (all of them: every block given back)
    prefix_cached_tokens: int = 0  # prompt tokens its requests found in the prefix cache


class Arrivals:
    """Requests of one replica in arrival order: fixed times (open loop), or clients that send the next
    request when their last is done (closed loop)."""

    def __init__(self, order: list[int], times: list[float] | None, starts: list[float] | None) -> None:
        self.heap: list[tuple[float, int]] = []
        self.queue = deque(order)
        self.closed = times is None
        if times is not None:
            self.heap = [(t, i) for t, i in zip(times, order, strict=True)]
            heapq.heapify(self.heap)
            self.queue.clear()
        else:
            for start in starts or ():
                self.send(start)

    def send(self, time_s: float) -> None:
        """A closed-loop client sends its next request (if any is left) at ``time_s``."""
        if self.queue:
            heapq.heappush(self.heap, (time_s, self.queue.popleft()))

    def next_s(self) -> float:
        return self.heap[0][0] if self.heap else math.inf


Progress = Callable[[int], None]


def run_replica(
    table: Steps,
    limits: SchedulerLimits,
    inputs: list[int],
    outputs: list[int],
    arrivals: Arrivals,
    done: Progress | None = None,
) -> ReplicaLog:
    """Serve one replica's requests (indices into ``inputs``/``outputs``) until all are done."""
    if limits.static:
        return _run_static(table, limits, inputs, outputs, arrivals, done)
    return _run_continuous(table, limits, inputs, outputs, arrivals, done)


def _run_continuous(
    table: Steps,
    limits: SchedulerLimits,
    inputs: list[int],
    outputs: list[int],
    arrivals: Arrivals,
    done: Progress | None,
) -> ReplicaLog:
    log = ReplicaLog()
    block = limits.block_tokens
    free = limits.kv_blocks
    budget_cap, seq_cap = limits.token_budget, limits.max_sequences
    waiting: deque[int] = deque()
    running: dict[int, None] = {}  # admission order
    prefilling: dict[int, int] = {}  # request -> prompt tokens done (of its current admission)
    generated: dict[int, int] = {}
    held: dict[int, int] = {}  # blocks of a prefilling request
    entry: dict[int, tuple[int, int, int]] = {}  # decoder -> (prompt length m, first decode step t0, version)
    last_token: dict[int, float] = {}
    residues = np.zeros(block, dtype=np.int64)  # decoders by (m - t0) mod block
    heap: list[tuple[int, int, int]] = []  # (last decode step, request, version)
    version = 0
    decoding, offset = 0, 0  # decoders; sum over them of (m - t0 + 1)
    clock, tick = 0.0, 0
    scheduled = 0  # the tick of the last scheduling: the next one is scheduler_steps decode steps after it
    every = limits.scheduler_steps
    intake = limits.receive_steps
    since_intake = intake  # decode steps since arrivals were last taken in (none yet: the first step takes them)
    pairs_of = table.chunk_pairs
    reserving = bool(limits.reserve_tokens)
    state = limits.state_blocks
    reserved: dict[int, int] = {}  # a reserving decoder's blocks
    lag = limits.first_token_lag_steps
    started: set[int] = set()  # requests whose first token has been computed
    unreported: dict[int, int] = {}  # request -> the step at whose end its first token is reported (lag > 0)
    reports: deque[tuple[int, int]] = deque()  # (that step, request), in step order

    def report(first: int, ends_s: Sequence[float] | np.ndarray) -> None:
        """Report the first tokens due at the end of steps ``first``, ``first + 1``, ... (ending at ``ends_s``)."""
        while reports and reports[0][0] < first + len(ends_s):
            step, r = reports.popleft()
            if unreported.pop(r, None) is not None:
                log.first_token_s[r] = float(ends_s[step - first])

    def blocks_of(r: int) -> int:
        """Blocks an admission takes: the prompt and what it made (paged), or its whole reservation."""
        tokens = limits.reserve_tokens[r] if reserving else inputs[r] + generated[r]
        return -(-tokens // block) + state

    def finished(r: int) -> None:
        del running[r]
        log.finish_s[r] = clock
        if unreported.pop(r, None) is not None:  # its last response carries the first token too
            log.first_token_s[r] = clock
        arrivals.send(clock)
        if done is not None:
            done(1)

    def finish_decoder(r: int) -> None:
        nonlocal free, decoding, offset
        m, t0, _ = entry.pop(r)
        if not reserving:
            residues[(m - t0) % block] -= 1
        decoding -= 1
        offset -= m - t0 + 1
        free += reserved.pop(r) if reserving else -(-(m + tick - t0) // block) + state
        generated[r] = outputs[r]
        finished(r)

    def preempt(victim: int) -> None:
        nonlocal free, decoding, offset
        del running[victim]
        if victim in prefilling:
            del prefilling[victim]
            free += held.pop(victim)
        else:
            m, t0, _ = entry.pop(victim)
            residues[(m - t0) % block] -= 1
            decoding -= 1
            offset -= m - t0 + 1
            free += -(-(m + tick - t0) // block) + state
            generated[victim] += tick - t0
            last_token[victim] = clock
        log.preemptions[victim] = log.preemptions.get(victim, 0) + 1
        waiting.appendleft(victim)

    while arrivals.heap or waiting or running:
        if since_intake >= intake or not running:  # an intake: the arrivals so far come in
            since_intake = 0
            while arrivals.heap and arrivals.heap[0][0] <= clock:
                t_in, r = heapq.heappop(arrivals.heap)
                log.arrival_s[r] = t_in
                generated[r] = 0
                waiting.append(r)
        if not running and not waiting:
            clock = arrivals.heap[0][0]
            continue
        room = budget_cap - (decoding if limits.mixed_steps else 0)  # prompts apart: the whole budget is theirs
        head_blocked = True
        if waiting and len(running) < seq_cap and room > 0:
            r = waiting[0]
            head_blocked = blocks_of(r) > free
        gate = (scheduled - tick) % every if decoding else 0  # decode steps before the engine schedules again
        closed = intake - since_intake if intake > 1 else 0  # decode steps before the next intake
        if decoding and not prefilling and (head_blocked or gate):
            # decode-only steps up to the next event, priced together
            admits = not gate and not closed and not waiting and len(running) < seq_cap and room > 0
            until = arrivals.next_s() if admits else math.inf
            while heap and (heap[0][1] not in entry or entry[heap[0][1]][2] != heap[0][2]):
                heapq.heappop(heap)
            steps = min(heap[0][0] - tick + 1, BATCH_STEPS)
            demand = np.cumsum(residues[(-(tick + np.arange(steps))) % block])
            short = int(np.searchsorted(demand, free, side="right"))
            steps = min(steps, short, gate or steps, closed or steps)
            if steps > 0:
                contexts = (offset + decoding * (tick + np.arange(steps, dtype=np.float64))) / decoding
                durations = table.decode_steps_s(decoding, contexts)
                ends = clock + np.cumsum(durations)
                if until < math.inf:
                    steps = min(steps, int(np.searchsorted(ends, until, side="left")) + 1)
                log.step_s.extend(durations[:steps].tolist())
                log.step_decoding.extend([decoding] * steps)
                free -= int(demand[steps - 1])
                clock = float(ends[steps - 1])
                report(tick, ends[:steps])
                tick += steps
                log.steps += steps
                since_intake += steps
                while heap and heap[0][0] < tick:
                    _, r, v = heapq.heappop(heap)
                    if r in entry and entry[r][2] == v:
                        finish_decoder(r)
                continue
        # one step: the decoders' new blocks, preempting the latest admitted while they do not fit. An engine that
        # never mixes runs the prompts it can admit in a step of their own, the decoders waiting (the tick stays)
        prompts_only = not limits.mixed_steps and bool(prefilling or not (head_blocked or gate))
        need = 0 if prompts_only else int(residues[(-tick) % block])
        while need > free:
            victim = next(reversed(running))
            if victim in entry and (entry[victim][0] - entry[victim][1] + tick) % block == 0:
                need -= 1
            preempt(victim)
        free -= need
        room = budget_cap - (0 if prompts_only else decoding)
        chunks: list[tuple[int, int, int]] = []  # (request, start, end)
        for r, start in prefilling.items():
            if room <= 0:
                break
            length = inputs[r] + generated[r]
            take = min(length - start, room)
            chunks.append((r, start, start + take))
            room -= take
        while waiting and not gate and len(running) < seq_cap and room > 0:
            r = waiting[0]
            length = inputs[r] + generated[r]
            blocks = blocks_of(r)
            if blocks > free:
                break
            waiting.popleft()
            free -= blocks
            held[r] = blocks
            running[r] = None
            # a handed-over request's first admission runs its last token on the KV it brought; a preempted one
            # recomputes (its blocks were given back)
            arrived = limits.kv_arrives and r not in log.preemptions
            start = length - 1 if arrived else min(limits.cached(r, inputs[r]), length - 1)
            prefilling[r] = start
            take = min(length - start, room)
            chunks.append((r, start, start + take))
            room -= take
        prefill = sum(end - start for _, start, end in chunks)
        if not decoding and not chunks:  # the head of the queue fits no KV cache: refused before the run
            raise ClusterSimError(f"request {waiting[0]}: its prompt does not fit the {limits.kv_blocks} KV blocks")
        stepping = 0 if prompts_only else decoding  # the decoders this step advances
        context = (offset + stepping * tick) / stepping if stepping else 0.0
        pairs = sum(pairs_of(start, end) for _, start, end in chunks)
        dt = table.step_s(stepping, context, prefill, len(chunks), pairs)
        clock += dt
        if stepping:
            log.step_s.append(dt)
            log.step_decoding.append(stepping)
        log.steps += 1
        if not gate:  # this step was a scheduling
            scheduled = tick
        since_intake = intake if chunks else since_intake + 1  # after a prompt's step, an intake
        if not prompts_only:
            tick += 1
            report(tick - 1, (clock,))
        while heap and heap[0][0] < tick:
            _, r, v = heapq.heappop(heap)
            if r in entry and entry[r][2] == v:
                finish_decoder(r)
        for r, _, end in chunks:
            length = inputs[r] + generated[r]
            if end < length:
                prefilling[r] = end
                continue
            del prefilling[r]
            generated[r] += 1
            if r not in started:
                started.add(r)
                if lag:
                    unreported[r] = tick - 1 + lag
                    reports.append((tick - 1 + lag, r))
                else:
                    log.first_token_s[r] = clock
            else:
                log.resume_gaps_s.append(clock - last_token[r])
            if generated[r] >= outputs[r]:
                free += held.pop(r)
                finished(r)
                continue
            if reserving:
                reserved[r] = held.pop(r)
            else:
                held.pop(r)
                residues[(length - tick) % block] += 1
            version += 1
            entry[r] = (length, tick, version)
            decoding += 1
            offset += length - tick + 1
            heapq.heappush(heap, (tick + outputs[r] - generated[r] - 1, r, version))

    log.blocks_left = free
    return log


def _run_static(
    table: Steps,
    limits: SchedulerLimits,
    inputs: list[int],
    outputs: list[int],
    arrivals: Arrivals,
    done: Progress | None,
) -> ReplicaLog:
    log = ReplicaLog()
    block = limits.block_tokens
    waiting: deque[int] = deque()
    clock = 0.0
    while arrivals.heap or waiting:
        while arrivals.heap and arrivals.heap[0][0] <= clock:
            t_in, r = heapq.heappop(arrivals.heap)
            log.arrival_s[r] = t_in
            waiting.append(r)
        if not waiting:
            clock = arrivals.heap[0][0]
            continue
        batch: list[int] = []
        free = limits.kv_blocks
        while waiting and len(batch) < limits.max_sequences:
            blocks = -(-(inputs[waiting[0]] + outputs[waiting[0]]) // block) + limits.state_blocks
            if blocks > free:
                break
            free -= blocks
            batch.append(waiting.popleft())
        n = np.array([inputs[r] for r in batch], dtype=np.float64)
        o = np.array([outputs[r] for r in batch], dtype=np.int64)
        starts = np.minimum(np.array([limits.cached(r, inputs[r]) for r in batch], dtype=np.float64), n - 1)
        pairs = sum(table.chunk_pairs(a, b) for a, b in zip(starts.tolist(), n.tolist(), strict=True))
        clock += table.step_s(0, 0.0, float((n - starts).sum()), len(batch), pairs)
        log.steps += 1
        prefilled = clock
        steps = int(o.max()) - 1
        ends = np.array([clock])
        if steps > 0:  # every slot computes until the longest is done; contexts grow a token a step
            contexts = float(n.mean()) + 1.0 + np.arange(steps, dtype=np.float64)
            durations = table.decode_steps_s(len(batch), contexts)
            ends = clock + np.cumsum(durations)
            making = (o[None, :] - 1 > np.arange(steps)[:, None]).sum(axis=1)  # tokens each step makes
            log.step_s.extend(durations.tolist())
            log.step_decoding.extend(making.tolist())
            log.steps += steps
        lag = min(limits.first_token_lag_steps, steps)  # reported at the end of a later decode step
        reported = float(ends[lag - 1]) if lag else prefilled
        for r, length in zip(batch, o.tolist(), strict=True):
            finish = float(ends[length - 2]) if length >= 2 else prefilled
            log.first_token_s[r] = min(reported, finish)
            log.finish_s[r] = finish
            arrivals.send(finish)
            if done is not None:
                done(1)
        clock = float(ends[-1])
    log.blocks_left = limits.kv_blocks  # a batch's blocks are all given back when it ends
    return log
