"""Speed of the layout search end to end (enumerate, check the rules and memory, price, rank), in layouts per
second: the small MT-NLG search, the 405B plan example of issue 25, a space of over a million candidates, and the
plan split over 1 and 2 Ray workers.

Run: ``python benchmarks/bench_search.py [--repeats N] [--no-ray] [--no-cli] [--quick]``. Prints medians over
repeats with their min-max spread and a pure-Python reference workload timed in the same rounds (this machine's
speed moves by 2x under other load: compare figures through the reference). ``layouts`` are the candidates that
keep the layout rules and that the framework runs (what ``plan`` reports as ``evaluated``); ``grid`` is every
combination of the space's values before the rules. A table puts the cases side by side, and the 405B example
also runs as a user runs it (a new ``clustersim plan`` process each time). Not a test: the suite never times
anything.

Calculon's ``llm-optimal-execution`` took 39 minutes for 610k evaluations on this machine (issue 25).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import load_catalog
from clustersim.compute.efficiency import efficiency_table
from clustersim.compute.software import software_for, software_profiles
from clustersim.plan.parallel import RayPoints, run_here
from clustersim.plan.planner import Constraints, PlanPoint, plan_training
from clustersim.plan.planner_grid import PlanGrid, expand_counts, grid_points
from clustersim.plan.search import rank_layouts
from clustersim.plan.space import SearchSpace
from clustersim.system import system_for_instance
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model

CATALOG = load_catalog(use_env=False)
PROFILES = software_profiles(use_env=False)
FRACTIONS = efficiency_table(use_env=False)


@dataclass(frozen=True)
class PlanCase:
    """A plan to time: the model, its points, the layout space, the objective and the constraints."""

    name: str
    model: Transformer
    points: list[PlanPoint]
    notes: list[str]
    space: SearchSpace
    objective: str = "time"
    limits: Constraints = field(default_factory=Constraints)

    def grid(self) -> int:
        """Combinations of the space's values over all points, before any rule."""
        total = 0
        for point in self.points:
            dims = self.space.resolved(self.model, point.system, point.job)
            axes = (dims.tp, dims.pp, dims.vp, dims.cp, dims.ep, dims.micro_batch, dims.recompute, dims.zero)
            total += math.prod(len(a) for a in axes) * (1 if dims.sp is None else len(dims.sp)) * len(dims.etp or (0,))
        return total


def reference() -> None:
    """A fixed pure-Python workload: how fast this machine runs right now."""
    sum(range(10_000))


def timed(func: Callable[[], object]) -> float:
    """Wall seconds of one call."""
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def cpu_timed(func: Callable[[], object]) -> tuple[float, float]:
    """Wall and CPU seconds of one call (CPU time moves less when other processes share the cores)."""
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.perf_counter() - wall, time.process_time() - cpu


def spread(samples: list[float]) -> str:
    """Median, min and max of ``samples``, and how many."""
    return f"{statistics.median(samples):.4g} (min {min(samples):.4g}, max {max(samples):.4g}, n={len(samples)})"


def small_mt_nlg(repeats: int) -> None:
    """MT-NLG 530B on 2,240 A100 (280 p4de) at batch 1,920: the layouts Megatron runs, the fastest that fits."""
    model = load_model("mt-nlg-530b", use_env=False)
    system = system_for_instance(CATALOG, "p4de.24xlarge", 280)
    software = software_for(None, system.accelerator.family, PROFILES, accelerator=system.accelerator.id)
    job = TrainingJob(global_batch=1920, seq_len=2048)

    def search() -> object:
        return rank_layouts(model, system, job, software=software).fastest(1)

    ranking = rank_layouts(model, system, job, software=software)
    n, fits = len(ranking.layouts), int(ranking.fits.sum())
    for _ in range(20):
        search()  # settle: caches, clocks
    runs, cpus, refs = [], [], []
    for _ in range(repeats):
        wall, cpu = cpu_timed(search)
        runs.append(wall)
        cpus.append(cpu)
        refs.append(timed(reference))
    best = ranking.fastest(1)[0]
    median = statistics.median(runs)
    print(f"small MT-NLG search ({model.name}, {system.name}, batch 1920, {software.name}): {n} layouts, {fits} fit")
    print(f"  end to end {spread([r * 1e3 for r in runs])} ms wall; CPU {spread([c * 1e3 for c in cpus])} ms")
    print(
        f"  {n / median:,.0f} layouts/s median wall, {n / min(runs):,.0f} at the best run, "
        f"{n / statistics.median(cpus):,.0f} per CPU second; picks {best[0].describe()}"
    )
    print(f"  reference {statistics.median(refs) * 1e3:.3f} ms; search = {median / statistics.median(refs):.1f} refs")


def plan_cases(quick: bool) -> list[PlanCase]:
    """The 405B plan example of issue 25, the same widened (Calculon-like knobs: micro-batch, interleaving,
    sequence parallelism, several batches and node counts), MT-NLG on A100 widened likewise, DeepSeek-V3 (an
    MoE: expert and context parallelism, and expert TP derived or 1, too) on 1,024 to 4,096 H100, over a million
    layouts in six points, and DeepSeek-V3 under Megatron's default space (its MoE recipes' selective recompute
    sets beside the default, and the pipelined layouts each point balances) on 512 to 2,048 H100."""
    llama = load_model("llama3.1-405b", use_env=False)
    instances = ("p5.48xlarge", "p5en.48xlarge", "p6-b200.48xlarge", "trn2.48xlarge")
    example = PlanGrid(instances=instances, nodes=expand_counts("128..2048", "--nodes"), tokens=15e12)
    points, notes = grid_points(llama, CATALOG, example, profiles=PROFILES, efficiency=FRACTIONS)
    deadline = Constraints(deadline_s=90 * 86400)
    cases = [PlanCase("405B plan example", llama, points, notes, SearchSpace(), "cost", deadline)]
    if quick:
        return cases
    wide = PlanGrid(
        instances=instances[:3],
        nodes=(128, 192, 256, 384, 512, 768, 1024, 1536, 2048),
        tokens=15e12,
        global_batches=(512, 1024, 2048, 4096),
    )
    points, notes = grid_points(llama, CATALOG, wide, profiles=PROFILES, efficiency=FRACTIONS)
    space = SearchSpace(micro_batch=(1, 2, 3, 4, 6, 8, 12, 16), vp=tuple(range(1, 9)), sp=(False, True))
    cases.append(PlanCase("405B plan, widened", llama, points, notes, space, "cost", deadline))
    mt_nlg = load_model("mt-nlg-530b", use_env=False)
    matched = PlanGrid(
        instances=("p4d.24xlarge", "p4de.24xlarge"),
        nodes=(140, 280),
        tokens=270e9,
        frameworks=("megatron-deepspeed",),
        global_batches=(1920, 2240, 2560, 3840),
    )
    points, notes = grid_points(mt_nlg, CATALOG, matched, profiles=PROFILES, efficiency=FRACTIONS)
    space = SearchSpace(
        tp=(1, 2, 4, 8, 16, 32), micro_batch=(1, 2, 3, 4, 5, 6, 8, 10, 12, 16), vp=tuple(range(1, 9)),
        sp=(False, True), uneven_stages=True,
    )  # fmt: skip
    cases.append(PlanCase("MT-NLG on A100, widened", mt_nlg, points, notes, space))
    deepseek = load_model("deepseek-v3", use_env=False)
    moe = PlanGrid(
        instances=("p5.48xlarge",), nodes=(128, 256, 512), tokens=14.8e12, frameworks=("torchtitan",),
        global_batches=(2048, 4096), seq_len=4096,
    )  # fmt: skip
    points, notes = grid_points(deepseek, CATALOG, moe, profiles=PROFILES, efficiency=FRACTIONS)
    space = SearchSpace(
        tp=(1, 2, 4, 8), vp=tuple(range(1, 9)), micro_batch=(1, 2, 4, 8, 16), sp=(False, True), cp=(1, 2, 4),
        uneven_stages=True,
    )  # fmt: skip
    cases.append(PlanCase("DeepSeek-V3 on H100 (over a million layouts)", deepseek, points, notes, space))
    megatron_moe = PlanGrid(
        instances=("p5.48xlarge",), nodes=(64, 128, 256), tokens=14.8e12, frameworks=("megatron",),
        global_batches=(1024, 2048), seq_len=4096,
    )  # fmt: skip
    points, notes = grid_points(deepseek, CATALOG, megatron_moe, profiles=PROFILES, efficiency=FRACTIONS)
    cases.append(PlanCase("DeepSeek-V3 on H100, Megatron (recompute sets)", deepseek, points, notes, SearchSpace()))
    return cases


def run_plan(case: PlanCase, executor=run_here, workers: int = 1) -> tuple[int, float, float]:  # type: ignore[no-untyped-def]
    """Layouts evaluated, wall seconds (the plan's own ``elapsed_s``) and this process's CPU seconds."""
    cpu = time.process_time()
    plan = plan_training(
        case.model, case.points, objective=case.objective, constraints=case.limits, space=case.space,
        notes=case.notes, executor=executor, workers=workers,
    )  # fmt: skip
    return plan.evaluated, plan.elapsed_s, time.process_time() - cpu


@dataclass(frozen=True)
class Timed:
    """One case's figures over the timed repeats: layouts evaluated, wall (the plan's ``elapsed_s``) and CPU."""

    case: PlanCase
    evaluated: int
    walls: list[float]
    cpus: list[float]


def plans(cases: list[PlanCase], repeats: int) -> list[Timed]:
    """Each case planned ``repeats`` times after one settling run; prints each and returns the figures."""
    found = []
    for case in cases:
        first = run_plan(case)  # settle (the first case's is the first plan in this process: caches cold)
        samples, cpus, refs = [], [], []
        evaluated = 0
        for _ in range(repeats):
            evaluated, elapsed, cpu = run_plan(case)
            samples.append(elapsed)
            cpus.append(cpu)
            refs.append(timed(reference))
        median = statistics.median(samples)
        print(
            f"{case.name}: {len(case.points)} points, grid {case.grid():,} combinations, {evaluated:,} layouts "
            f"keep the rules"
        )
        print(f"  end to end {spread(samples)} s wall; CPU {spread(cpus)} s; first run {first[2]:.3f} s CPU")
        print(
            f"  {evaluated / median:,.0f} layouts/s median wall ({evaluated / min(samples):,.0f} best; "
            f"{evaluated / statistics.median(cpus):,.0f} per CPU second; {case.grid() / median:,.0f} grid "
            f"combinations/s); reference {statistics.median(refs) * 1e3:.3f} ms"
        )
        found.append(Timed(case, evaluated, samples, cpus))
    return found


def side_by_side(results: list[Timed]) -> None:
    """The cases in one table: points, layouts evaluated, median wall and CPU seconds, layouts per second."""
    print(f"side by side (median of {len(results[0].walls)} runs each):")
    print(
        f"  {'case':<46} {'points':>6} {'layouts':>10} {'wall s':>8} {'CPU s':>8} {'layouts/s':>11} "
        f"{'per CPU-s':>11} {'ms/point':>9}"
    )
    for r in results:
        wall, cpu = statistics.median(r.walls), statistics.median(r.cpus)
        print(
            f"  {r.case.name:<46} {len(r.case.points):>6} {r.evaluated:>10,} {wall:>8.3f} {cpu:>8.3f} "
            f"{r.evaluated / wall:>11,.0f} {r.evaluated / cpu:>11,.0f} {cpu / len(r.case.points) * 1e3:>9.2f}"
        )


EXAMPLE = (
    "plan llama3.1-405b --tokens 15T --instances p5.48xlarge,p5en.48xlarge,p6-b200.48xlarge,trn2.48xlarge "
    "--nodes 128..2048 --deadline 90d --objective cost --json"
)


def cli_example(repeats: int) -> None:
    """The issue's example as a user runs it: a new process each time (imports, catalog, plan, JSON); the
    plan's own figures from its JSON beside the process's wall time."""
    script = Path(sys.executable).with_name("clustersim")
    command = (
        [str(script)] if script.exists() else [sys.executable, "-c", "from clustersim.cli.app import main; main()"]
    )
    walls, elapsed, rates = [], [], []
    evaluated = 0
    for _ in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([*command, *EXAMPLE.split()], capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - start)
        found = json.loads(done.stdout)
        evaluated = found["evaluated"]
        elapsed.append(found["elapsed_s"])
        rates.append(found["layouts_per_s"])
    print(f"CLI: clustersim {EXAMPLE}")
    print(
        f"  evaluated {evaluated:,}; plan elapsed_s {spread(elapsed)}; layouts_per_s median "
        f"{statistics.median(rates):,.0f}; process wall {spread(walls)} s (imports and catalog included)"
    )


@dataclass
class Metered:
    """A plan task that also reports, per partition, the worker's process id and the CPU seconds it took."""

    task: Callable[[list[Any]], list[Any]]

    def __call__(self, part: list[Any]) -> tuple[int, float, list[Any]]:
        cpu = time.process_time()
        found = self.task(part)
        return os.getpid(), time.process_time() - cpu, found


@dataclass
class MeteredRay:
    """``RayPoints`` with each partition's worker and CPU seconds recorded (``cpu_by_worker``)."""

    ray_points: RayPoints[Any, Any]
    cpu_by_worker: dict[int, float] = field(default_factory=dict)

    def __call__(self, task: Callable[[list[Any]], list[Any]], parts: Any) -> Iterator[tuple[int, list[Any]]]:
        for index, (pid, cpu, found) in self.ray_points(Metered(task), parts):
            self.cpu_by_worker[pid] = self.cpu_by_worker.get(pid, 0.0) + cpu
            yield index, found


RAY_PARTS = 2  # the Ray runs' partitions: as plan_training makes them for this many workers


def ray_scaling(case: PlanCase, repeats: int) -> None:
    """The plan on a local Ray instance of 1 and 2 CPUs (started once each, workers warmed before timing).

    Wall time here says little when other jobs share the cores (Linux gives each session's group of processes
    its share, and Ray's workers form one group), so the CPU seconds each worker spent are reported too: their
    sum is the work, the busiest worker's the critical path, and their ratio the speed-up the partitions allow.
    Both use the partitions ``plan`` makes for 2 workers (runs of points of one framework and chip family, about
    four per worker, never splitting points that share a ranking; each task prices its points in one vectorized
    step), so 1 and 2 workers run the same tasks."""
    try:
        import ray
    except ImportError:
        print("Ray scaling: skipped, ray is not installed (pip install 'clustersim[ray]')")
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "0")
    if __name__ != "__main__":  # imported (not run): ship Metered to the workers by value, as __main__'s is
        ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    here = [run_plan(case)[1:] for _ in range(repeats)]
    print(f"Ray scaling on {case.name} ({os.cpu_count()} cores here; load {os.getloadavg()[0]:.1f}):")
    print(f"  in process, no Ray: wall {spread([w for w, _ in here])} s; CPU {spread([c for _, c in here])} s")
    base = None
    for workers in (1, 2):
        with RayPoints(ray, workers=workers) as executor:
            run_plan(case, executor, RAY_PARTS)  # workers import clustersim and load the catalog once
            samples, totals, busiest = [], [], []
            for _ in range(repeats):
                metered = MeteredRay(executor)
                samples.append(run_plan(case, metered, RAY_PARTS)[1])
                totals.append(sum(metered.cpu_by_worker.values()))
                busiest.append(max(metered.cpu_by_worker.values()))
        median = statistics.median(samples)
        base = base or median
        print(
            f"  Ray, {workers} worker(s): wall {spread(samples)} s ({base / median:.2f}x 1 worker); worker CPU "
            f"{statistics.median(totals):.3f} s in all, {statistics.median(busiest):.3f} s on the busiest "
            f"(the partitions allow {statistics.median(totals) / statistics.median(busiest):.2f}x)"
        )
    print(f"  load average after: {os.getloadavg()[0]:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-ray", action="store_true")
    parser.add_argument("--no-cli", action="store_true", help="skip the issue's example run as a new process")
    parser.add_argument("--quick", action="store_true", help="only the small search and the 405B example")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    small_mt_nlg(max(30, args.repeats))
    cases = plan_cases(args.quick)
    side_by_side(plans(cases, args.repeats))
    if not args.no_cli:
        cli_example(max(3, args.repeats // 2))
    if not args.no_ray:
        for case in [c for c in cases if c.name.startswith(("405B plan, widened", "DeepSeek"))]:
            ray_scaling(case, max(3, args.repeats // 2))


if __name__ == "__main__":
    main()
