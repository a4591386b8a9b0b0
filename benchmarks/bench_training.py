"""Speed of the training estimator: one estimate in-process, and many layouts in one vectorized call.

Prints medians over repeated runs (one process, one run of this script). Run:
``python benchmarks/bench_training.py``. The target is under 1 ms per single estimate (Calculon
takes 2-3.5 ms per evaluation on the same machine, issue 4).
"""

from __future__ import annotations

import statistics

from clustersim.catalog.registry import load_catalog
from clustersim.execution import Layout, Recompute
from clustersim.network.analytic import default_candidate_arrays
from clustersim.plan.search import rank_layouts
from clustersim.plan.space import candidate_layouts
from clustersim.system import system_for_instance
from clustersim.training.estimate import estimate_training, evaluate_layouts
from clustersim.training.job import TrainingJob
from clustersim.workload.zoo import load_model
from timing import median_s


def main() -> None:
    catalog = load_catalog(use_env=False)
    model = load_model("gpt3-175b", use_env=False)
    system = system_for_instance(catalog, "p5en.48xlarge", 128)  # 1,024 H200
    job = TrainingJob(global_batch=1536, seq_len=2048)
    layout = Layout(tp=8, pp=8, vp=2, dp=16, micro_batch=1, sequence_parallel=True, recompute=Recompute.SELECTIVE)

    def warm() -> None:
        estimate_training(model, system, layout, job)

    def cold() -> None:
        default_candidate_arrays.cache_clear()  # nothing remembered from an earlier estimate
        estimate_training(model, system, layout, job)

    median_s(warm, 500)  # let the machine settle (clock ramp, caches) before measuring

    def reference() -> None:  # a fixed pure-Python workload: this machine's speed varies by 2x over seconds
        sum(range(10_000))

    cold_samples, warm_samples, reference_samples = [], [], []
    for _ in range(300):  # interleaved, so a slow spell of the machine hits all three alike
        cold_samples.append(median_s(cold, 1))
        warm_samples.append(median_s(warm, 1))
        reference_samples.append(median_s(reference, 1))
    cold_s, single = statistics.median(cold_samples), statistics.median(warm_samples)
    ref = statistics.median(reference_samples)
    step = estimate_training(model, system, layout, job).step_s
    print(f"one estimate, {model.name} on {system.name} ({layout.describe()}), step {step:.2f} s:")
    print(
        f"  {cold_s * 1e3:.3f} ms median cold; {single * 1e3:.3f} ms with the system's collective candidates remembered"
    )
    print(
        f"  machine reference, sum(range(10_000)) in the same rounds: {ref * 1e3:.3f} ms; "
        f"one estimate = {cold_s / ref:.1f} (cold) / {single / ref:.1f} (warm) references"
    )

    arrays = candidate_layouts(model, system, job)
    n = len(arrays)
    space = median_s(lambda: candidate_layouts(model, system, job), 20)
    batch = median_s(lambda: evaluate_layouts(model, system, arrays, job), 20)
    print(
        f"{n} candidate layouts generated and filtered as arrays: {space * 1e3:.2f} ms median, "
        f"{space / n * 1e6:.2f} us per candidate ({space / batch:.2f}x the evaluation below)"
    )
    print(
        f"{n} layouts in one vectorized call: {batch * 1e3:.2f} ms median, "
        f"{batch / n * 1e6:.1f} us per layout, {n / batch:,.0f} layouts/s "
        f"({single / (batch / n):.0f}x a single estimate)"
    )
    ranking = rank_layouts(model, system, job)
    search = median_s(lambda: rank_layouts(model, system, job).fastest(1), 20)
    print(
        f"the search end to end (enumerate, rules, memory, price the {int(ranking.fits.sum())} that fit, rank): "
        f"{search * 1e3:.2f} ms median, {len(ranking.layouts) / search:,.0f} layouts/s (benchmarks/bench_search.py: "
        f"more spaces)"
    )


if __name__ == "__main__":
    main()
