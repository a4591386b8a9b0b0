"""A run of a known number of requests (offline, a closed loop, or at a stated rate), as the request-level simulator
runs it.

A load generator's run is finite: ``vllm bench serve --request-rate inf --num-prompts N`` (and SGLang's
``bench_serving``) send N requests at once, ``--max-concurrency C`` keeps C of them in flight, ``--request-rate R``
sends them by Poisson at R a second. Its throughput is every output token over the run's length (the start, when
the engine admits the first batch, and the end, when the last and longest requests finish in an emptying batch,
included), and a burst's mean TTFT is mostly the queue: the closed forms' steady state misses both.

``finite_run_requests`` says how many requests a case's run had: ``workload.requests`` where stated. A run whose
count is not stated is priced by the closed forms' steady state. MLPerf's Offline runs are long (LoadGen's query
holds every sample of the set at least once and at least 600 s of work: tens of thousands of requests, over ten
times the batch) and the closed forms fit them: MLPerf v4.1's Llama 2 70B Offline runs on 8 H100 and 8 H200
within 4%, where simulating each as a burst of OpenOrca's 24,576 samples put them 3-9% below (the simulated
steady state of lengths that vary holds fewer sequences than the mean lengths' one). ``finite_run`` simulates a
run: the requests split evenly over the ``dp`` replicas, their lengths drawn from the set with the case's stated
means, once for each of ``SEEDS`` where anything is drawn (lengths from a set, Poisson arrivals); each figure is
the median over them. One draw's longest requests set when a
short run ends: over seven draws the vLLM 0.6.0 blog's 500-request ShareGPT bursts move by a standard deviation of
5-8% in throughput (Llama 3 70B on 4 H100: -31% on the first draw, -25% the median of five).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np

from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.intervals.residuals import PERCENTILE_FIELDS
from clustersim.memo import IdentityMemo
from clustersim.serving.engine import InferenceCalibration, ServingSystem
from clustersim.serving.engines import EngineProfile
from clustersim.serving.estimate import Request
from clustersim.serving.sim_requests import RequestLengthSampler, request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import CaseWorkload
from clustersim.workload.transformer import Transformer

SEEDS = (0, 1, 2, 3, 4)
PERCENTS = (50.0, 99.0)  # the percentiles of PERCENTILE_FIELDS, in its order (median, 99th) per figure


FIGURES = ("output_tokens_per_s", "ttft_s", "tpot_s", *PERCENTILE_FIELDS)
"""What a finite run predicts: the output rate, the mean TTFT and TPOT, and their percentiles over the requests."""


@dataclass(frozen=True)
class FiniteRun:
    """A simulated finite run: output tokens per second of the whole system; TTFT and each request's mean time
    between its tokens (TPOT, requests of more than one output token), their means, medians and 99th percentiles
    over the run's requests (seconds); and the requests it ran."""

    output_tokens_per_s: float
    ttft_s: float
    tpot_s: float
    requests: int
    ttft_p50_s: float
    ttft_p99_s: float
    tpot_p50_s: float
    tpot_p99_s: float

    def value(self, field: str) -> float:
        """One of ``FIGURES``."""
        if field not in FIGURES:
            raise ClusterSimError(f"cannot predict inference field {field!r} ({', '.join(FIGURES)})")
        return float(getattr(self, field))


def finite_run_requests(workload: CaseWorkload) -> int | None:
    """The requests of a finite run: an offline, closed-loop (``concurrency``) or stated-rate server case's; None
    where not stated. Refused on a server case without ``request_rate_per_s``, whose rate the model searches."""
    stated_rate = workload.scenario == "server" and workload.request_rate_per_s is not None
    if workload.requests is not None and workload.scenario not in ("offline", "concurrency") and not stated_rate:
        raise ClusterSimError(
            f"workload.requests {workload.requests}: a finite run is an offline, concurrency or stated-rate server "
            f"case's (workload.request_rate_per_s), not a {workload.scenario or 'null'} scenario's without a rate",
            field="workload.requests",
            value=workload.requests,
        )
    return workload.requests


def simulates(engine: EngineProfile) -> bool:
    """Whether the simulator runs the engine: one that compiles no static shapes (``sim_steps.step_table``),
    batching continuously."""
    return engine.bucket_min_tokens is None and engine.benchmark_batching is Batching.CONTINUOUS


def finite_run(
    model: Transformer,
    serving: ServingSystem,
    request: Request,
    engine: EngineProfile,
    workload: CaseWorkload,
    requests: int,
    cal: InferenceCalibration | None = None,
) -> FiniteRun:
    """``requests`` requests over the ``dp`` replicas (an even share each): offline, all sent at once; a closed
    loop, ``workload.batch`` clients (an even share each) each sending its next as its last finishes; a server run,
    Poisson arrivals at ``workload.request_rate_per_s`` (a share each). Lengths from
    the workload's set with its stated means; the system's output rate over one replica's run, and each figure's
    median over the draws of ``SEEDS``."""
    dp = serving.dp
    per_replica = -(-requests // dp)
    sampler = workload_sampler(workload, request.input_tokens, request.output_tokens)
    if workload.scenario == "server":  # a Poisson stream sent to dp replicas at random: dp streams at rate / dp
        load = Load(rate_per_s=float(workload.request_rate_per_s or 0.0) / dp)
    else:  # clients that all start at once: a burst is as many clients as requests
        clients = per_replica if workload.scenario == "offline" else -(-(workload.batch or 1) // dp)
        load = Load(concurrency=max(clients, 1))
    drawn = workload.scenario == "server" or {sampler.input.kind, sampler.output.kind} != {"fixed"}
    figures = []
    for seed in SEEDS if drawn else SEEDS[:1]:  # fixed lengths, all sent at once or in a closed loop: one run
        run = simulate(
            model, replace(serving, dp=1), request, load, requests=per_replica, sampler=sampler, seed=seed, cal=cal,
            engine=engine,
        )  # fmt: skip
        span = float(run.finish_s.max() - run.arrival_s.min())
        tpot = run.request_itl_s[run.output_tokens > 1]  # a load generator's TPOT: requests of two tokens or more
        tpot = tpot if tpot.size else np.zeros(1)
        figures.append((
            dp * float(run.output_tokens.sum()) / span, run.ttft_s.mean(), tpot.mean(),
            *np.percentile(run.ttft_s, PERCENTS), *np.percentile(tpot, PERCENTS),
        ))  # fmt: skip
    rate, ttft, tpot_mean, ttft_p50, ttft_p99, tpot_p50, tpot_p99 = (
        float(x) for x in np.median(np.asarray(figures), axis=0)
    )
    return FiniteRun(
        output_tokens_per_s=rate, ttft_s=ttft, tpot_s=tpot_mean, requests=per_replica * dp,
        ttft_p50_s=ttft_p50, ttft_p99_s=ttft_p99, tpot_p50_s=tpot_p50, tpot_p99_s=tpot_p99,
    )  # fmt: skip


def remembered_run(
    case_key: str, catalog: object, cal: InferenceCalibration | None, run: Callable[[], FiniteRun]
) -> FiniteRun:
    """``run()``, simulated once per case (``case_key``: its JSON), catalog and calibration: a case's throughput,
    TTFT and TPOT are each predicted from the same run."""
    return _RUNS.get((catalog,), (case_key, cal), run)


_RUNS: IdentityMemo[FiniteRun] = IdentityMemo(keep=256)


def workload_sampler(workload: CaseWorkload, input_tokens: float, output_tokens: float) -> RequestLengthSampler:
    """The lengths of a case's requests: the workload's request set at the case's means (``input_tokens``,
    ``output_tokens``: stated, or the set's), a stated mean being the run's mean of the set's lengths."""
    stated = (workload.input_tokens is not None, workload.output_tokens is not None)
    return request_sampler(workload.dataset, input_tokens, output_tokens, stated=stated, stated_means=True)
