"""The request simulator's latency percentiles beside a published load generator's: MLPerf's server runs.

MLPerf's LoadGen is a load generator: in the server scenario it sends Poisson arrivals at a target rate and its
log reports TTFT and TPOT (each request's mean gap) at p50, p90 and p99. The project's MLPerf server cases copy
those percentiles into their notes ("Log percentiles: TTFT p50/p90/p99 ... s, TPOT p50/p90/p99 ... ms", 18 runs
of Llama 2 70B, Mixtral 8x7B and Llama 3.1 405B on H100, H200, B200 and GB200). For each, this script simulates
one replica (``clustersim.serving.simulate``, the case's engine profile and caps) at the run's own rate per
replica (its completed requests/s over its ``dp`` replicas: a Poisson stream split at random is Poisson), with
the request set's lengths at the run's means, ``--seeds`` runs of ``--requests`` requests pooled over each run's
steady middle half, and prints the simulated percentiles beside the published ones, and the closed forms' means
(``clustersim.serving.latency.estimate_server``) at the same rate (none past their saturation rate). A run under
attention data parallel (the DeepSeek-R1 runs' DEP layouts) gets the closed forms and the step check only: the
simulator schedules one queue a replica, not one a group.

It also prices one step at the published batch: by Little's law a replica holds rate x output tokens x mean TPOT
sequences, and its mean step is then the mean TPOT. That checks the step model where the run ran, apart from
the queueing: these servers run at 85-97% of their capacity, where the batch a rate holds is steep in the step
(about 1 / (1 - utilization)), so a step 8% short at the published batch puts the batch the rate holds, and the
simulated TPOT, at less than half the published.

    .venv/bin/python benchmarks/sim_vs_published.py [--requests 8000] [--seeds 3] [--only SUBSTRING] [--json]

Not in CI: about 2-20 s a run on this 2-core machine (the 405B runs are the slow ones).

``--finite`` does the same for the finite runs of the other load generators, ``vllm bench serve`` and SGLang's
``bench_serving`` (InferenceMAX's and GPUStack's runs: bursts and closed loops of a stated count, their measured
``ttft_p50_s`` ... ``tpot_p99_s``): each case's run as ``validate`` simulates it (``validation.finite_runs``: the
stated requests, the median over its seeds), its medians and 99th percentiles beside the published ones, and per
source the MAPE of each.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from dataclasses import replace
from typing import Any

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError
from clustersim.serving.estimate import continuous_step
from clustersim.serving.latency import estimate_server
from clustersim.serving.sim_requests import request_sampler
from clustersim.serving.simulate import Load, simulate
from clustersim.validation.cases import Case, project_case_files, read_cases
from clustersim.validation.inference import case_deployment, predict_inference_case

PERCENTILES = re.compile(
    r"Log percentiles: TTFT p50/p90/p99 ([\d.]+)/([\d.]+)/([\d.]+) s, TPOT p50/p90/p99 ([\d.]+)/([\d.]+)/([\d.]+) ms"
)
QUANTILES = (50, 90, 99)


def published(case: Case) -> dict[str, list[float]] | None:
    """The log's TTFT and TPOT p50/p90/p99 in seconds, from the case's notes (None: not stated)."""
    found = PERCENTILES.search(case.notes or "")
    if found is None:
        return None
    values = [float(v) for v in found.groups()]
    return {"ttft_s": values[:3], "tpot_s": [v / 1e3 for v in values[3:]]}


def _quantiles(values: np.ndarray) -> list[float]:
    return [float(np.percentile(values, q)) for q in QUANTILES]


def simulated(case: Case, catalog: Any, requests: int, seeds: int) -> dict[str, Any]:
    """One replica at the run's own rate: the pooled percentiles and means, and the closed forms' means."""
    deployment = case_deployment(case, catalog)
    workload = deployment.workload
    request = replace(deployment.request, batching=Batching.CONTINUOUS)
    stated = (workload.input_tokens is not None, workload.output_tokens is not None)
    sampler = request_sampler(workload.dataset, request.input_tokens, request.output_tokens, stated=stated,
                              stated_means=True)  # fmt: skip
    one = replace(deployment.serving, dp=1)
    rate = case.measured["output_tokens_per_s"] / request.output_tokens / deployment.serving.dp
    middle = slice(requests // 4, 3 * requests // 4)
    ttft, tpot = [], []
    pooled: dict[str, Any] | None = None
    if one.attention_dp == 1:  # the simulator schedules one queue a replica: attention-DP groups have their own
        for seed in range(seeds):
            run = simulate(deployment.model, one, request, Load(rate_per_s=rate), requests=requests, sampler=sampler,
                           seed=seed, engine=deployment.engine)  # fmt: skip
            ttft.append(run.ttft_s[middle])
            tpot.append(run.request_itl_s[middle])
        pooled = {"ttft_s": np.concatenate(ttft), "tpot_s": np.concatenate(tpot)}
    try:
        closed = estimate_server(deployment.model, one, request, rate, engine=deployment.engine)
        closed_means: dict[str, float | None] = {"ttft_s": closed.ttft_s, "tpot_s": closed.tpot_s}
    except ClusterSimError:  # past the closed forms' saturation rate
        closed_means = {"ttft_s": None, "tpot_s": None}
    # the step at the published batch: Little's law puts rate x output x TPOT sequences in flight
    batch = rate * request.output_tokens * case.measured["tpot_s"]
    mix = continuous_step(deployment.model, one, request, batch, engine=deployment.engine, arrivals_in_time=True)
    return {
        "rate_per_replica_s": rate,
        "published_batch": batch,
        "step_at_published_batch_s": float(mix.mean.step_s[0]) * one.pp,
        "percentiles": None if pooled is None else {k: _quantiles(v) for k, v in pooled.items()},
        "mean": None if pooled is None else {k: float(v.mean()) for k, v in pooled.items()},
        "closed_form_mean": closed_means,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=8000, help="requests per run (default 8,000)")
    parser.add_argument("--seeds", type=int, default=3, help="runs pooled per case (default 3)")
    parser.add_argument("--only", default="", help="only the cases whose id contains this")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--finite", action="store_true", help="the finite runs of vllm bench serve and bench_serving")
    args = parser.parse_args(argv)
    catalog = load_catalog(use_env=False)
    cases = [c for path in project_case_files() if path.name == "inference.jsonl" for c in read_cases(path)]
    if args.finite:
        return finite_runs_side_by_side(cases, catalog, args.only, args.json)
    rows = []
    for case in cases:
        logged = published(case)
        if logged is None or args.only not in case.id:
            continue
        found = simulated(case, catalog, args.requests, args.seeds)
        rows.append({"id": case.id, "published": logged,
                     "published_mean": {k: case.measured.get(k) for k in ("ttft_s", "tpot_s")}} | found)  # fmt: skip
        if not args.json:
            _print_row(rows[-1])
    if args.json:
        print(json.dumps({"requests": args.requests, "seeds": args.seeds, "rows": rows}, indent=1))
    else:
        _print_summary(rows)
    return 0


FINITE_FIELDS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s")


def finite_runs_side_by_side(cases: list[Case], catalog: Any, only: str, as_json: bool) -> int:
    """Each finite run's published percentiles beside the simulated ones, then per source the MAPE of each."""
    rows = []
    for case in cases:
        if only not in case.id or not all(case.measured.get(f) for f in FINITE_FIELDS):
            continue
        try:
            found = {f: predict_inference_case(case, f, catalog) for f in FINITE_FIELDS}
        except ClusterSimError:  # no stated request count: the closed forms give means only
            continue
        rows.append({"id": case.id, "source": case.source.split()[0], "published": {f: case.measured[f] for f in
                     FINITE_FIELDS}, "simulated": found})  # fmt: skip
        if not as_json:
            shown = "; ".join(f"{f[:4].upper()} p{f[6:8]} {1e3 * case.measured[f]:.4g} / {1e3 * found[f]:.4g} ms"
                              for f in FINITE_FIELDS)  # fmt: skip
            print(f"{case.id}: published / simulated {shown}")
    by_source: dict[str, dict[str, float]] = {}
    for source in dict.fromkeys(r["source"] for r in rows):
        members = [r for r in rows if r["source"] == source]
        by_source[source] = {f: statistics.mean(abs(r["simulated"][f] / r["published"][f] - 1) for r in members)
                             for f in FINITE_FIELDS} | {"runs": len(members)}  # fmt: skip
    if as_json:
        print(json.dumps({"rows": rows, "mape_by_source": by_source}, indent=1))
        return 0
    for source, figures in by_source.items():
        shown = ", ".join(f"{f} {figures[f]:.1%}" for f in FINITE_FIELDS)
        print(f"{source} ({figures['runs']:.0f} runs): MAPE {shown}")
    return 0


def _print_row(row: dict[str, Any]) -> None:
    print(f"{row['id']} at {row['rate_per_replica_s']:.3g} requests/s a replica")
    for field, unit, scale in (("ttft_s", "s", 1.0), ("tpot_s", "ms", 1e3)):
        pub = "/".join(f"{scale * v:.3g}" for v in row["published"][field])
        simulated_row = row["percentiles"] is not None
        sim = "/".join(f"{scale * v:.3g}" for v in row["percentiles"][field]) if simulated_row else "- (attention DP)"
        means = (row["published_mean"][field], row["mean"][field] if simulated_row else None,
                 row["closed_form_mean"][field])  # fmt: skip
        shown = " / ".join("-" if v is None else f"{scale * v:.3g}" for v in means)
        print(f"  {field[:4].upper()} p50/p90/p99 published {pub} {unit}, simulated {sim}; "
              f"mean published / simulated / closed form {shown}")  # fmt: skip
    step, tpot = row["step_at_published_batch_s"], row["published_mean"]["tpot_s"]
    print(f"  at the published batch, {row['published_batch']:.0f} sequences: the model's step {1e3 * step:.1f} ms "
          f"against the published mean TPOT {1e3 * tpot:.1f} ms ({step / tpot - 1:+.1%})")  # fmt: skip


def _print_summary(rows: list[dict[str, Any]]) -> None:
    if not rows:
        print("no case states the log's percentiles", file=sys.stderr)
        return
    steps = [abs(r["step_at_published_batch_s"] / r["published_mean"]["tpot_s"] - 1) for r in rows]
    print(
        f"\nthe model's step at the published batch against the published mean TPOT: median |error| "
        f"{statistics.median(steps):.1%} over {len(rows)} runs"
    )
    runs = [r for r in rows if r["percentiles"] is not None]  # attention-DP runs have the closed forms only
    if not runs:
        return
    print(f"median |simulated / published - 1| at the published rate over {len(runs)} runs")
    for field in ("ttft_s", "tpot_s"):
        for i, q in enumerate(QUANTILES):
            errors = [abs(r["percentiles"][field][i] / r["published"][field][i] - 1) for r in runs]
            print(f"  {field[:4].upper()} p{q}: {statistics.median(errors):.1%}")


if __name__ == "__main__":
    sys.exit(main())
