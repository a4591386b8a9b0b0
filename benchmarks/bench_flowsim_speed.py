"""The flow solver's speed beside SimGrid's, measured side by side in one run, and a 1,024-host ECMP
all-to-all.

1. The four workloads of ``flowsim_vs_simgrid.py`` (all-to-all, permutation, NCCL ring step, many
   distinct completions; 64 hosts on a 2:1 radix-16 fat-tree, ECMP) at ``--flows`` distinct
   completions (default 1,000 and 4,000): per workload the median wall and CPU seconds of our event
   loop and of SimGrid's ``engine.run`` over ``--repeats`` runs each (SimGrid's platform building
   apart), their ratio, and the largest relative difference in any flow's completion time (exactness:
   the target is 1e-6). SimGrid runs under ``--simgrid-python`` (Debian's ``python3-simgrid``), one
   process per run, as in ``flowsim_vs_simgrid.py``.
2. One all-to-all of ``--a2a-hosts`` hosts (default 1,024: 1,047,552 flows of 1 MB) on a radix-32
   fat-tree at 100 Gbit/s with ECMP, the fabric of ``bench_fabric.py``: routing and event-loop wall
   and CPU seconds, events, completion against the NIC bound. ``--a2a-hosts 0`` skips it.

Wall times on a shared machine move with its load; the CPU seconds move less, and both sides of a
ratio are measured in the same minutes.

    .venv/bin/python benchmarks/bench_flowsim_speed.py [--flows 1000 4000] [--repeats 3] [--a2a-hosts 1024]
        [--kernel auto|numba|numpy]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from clustersim.network.flowsim.engine import independent, route_flows, run
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTreeSpec, build
from flowsim_vs_simgrid import KERNELS, flowsim_side, load_kernel

SIMGRID_SCRIPT = Path(__file__).with_name("flowsim_vs_simgrid.py")


def ours(hosts: int, flows: int, seed: int, repeats: int, kernel: bool) -> dict[str, dict[str, Any]]:
    """Each workload's routes and times (``flowsim_side``), with the medians of ``repeats`` runs."""
    walls: dict[str, list[float]] = {}
    cpus: dict[str, list[float]] = {}
    cases: dict[str, dict[str, Any]] = {}
    for _ in range(repeats):
        for name, case in flowsim_side(hosts, flows, seed, kernel).items():
            walls.setdefault(name, []).append(case["wall_s"])
            cpus.setdefault(name, []).append(case["cpu_s"])
            cases[name] = case
    for name, case in cases.items():
        case["wall_s"] = statistics.median(walls[name])
        case["cpu_s"] = statistics.median(cpus[name])
    return cases


def simgrid(cases: dict[str, dict[str, Any]], python: str, repeats: int) -> dict[str, dict[str, Any]]:
    """SimGrid's completion times and the medians of ``repeats`` runs of each workload."""
    out: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.json"
        path.write_text(json.dumps(cases))
        for name in cases:
            runs = []
            for _ in range(repeats):
                command = [python, str(SIMGRID_SCRIPT), "--simgrid-one", str(path), name]
                done = subprocess.run(command, check=True, capture_output=True, text=True)
                runs.append(json.loads(done.stdout.splitlines()[-1]))
            out[name] = {
                "end_s": runs[0]["end_s"],
                "run_s": statistics.median(r["run_s"] for r in runs),
                "cpu_s": statistics.median(r.get("cpu_s", float("nan")) for r in runs),
            }
    return out


def side_by_side(hosts: int, flow_counts: list[int], seed: int, repeats: int, python: str, kernel: bool) -> None:
    print(f"{hosts} hosts, one 400 Gbit/s NIC each, radix-16 fat-tree at 2:1, ECMP (seed {seed}); medians of {repeats}")
    print(
        "workload | flows | events | max |rel diff| | ours wall s | SimGrid run s | SimGrid/ours wall | "
        "ours CPU s | SimGrid CPU s | SimGrid/ours CPU"
    )
    for i, flows in enumerate(flow_counts):
        mine = ours(hosts, flows, seed, repeats, kernel)
        if i:  # the other workloads do not depend on --flows: once is enough
            mine = {"distinct completions": mine["distinct completions"]}
        theirs = simgrid(mine, python, repeats)
        for name, case in mine.items():
            other = theirs[name]
            diff = max(abs(a - b) / b for a, b in zip(case["end_s"], other["end_s"], strict=True))
            print(
                f"{name} | {len(case['size']):,} | {case['events']:,} | {diff:.1e} | {case['wall_s']:.3f} | "
                f"{other['run_s']:.3f} | {other['run_s'] / case['wall_s']:.2f}x | {case['cpu_s']:.3f} | "
                f"{other['cpu_s']:.3f} | {other['cpu_s'] / case['cpu_s']:.2f}x",
                flush=True,
            )


def ecmp_all_to_all(hosts: int, seed: int, kernel: bool) -> None:
    spec = FatTreeSpec(
        num_hosts=hosts, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=12.5e9, scaleup_bytes_per_s=1e12, radix=32
    )
    tree = build(spec)
    src, dst = np.meshgrid(np.arange(hosts), np.arange(hosts))
    off = src != dst
    flows = independent(src[off], dst[off], np.full(int(off.sum()), 1e6))
    wall, cpu = time.perf_counter(), time.process_time()
    inc = route_flows(tree, flows, Routing.ECMP, seed)
    route_wall, route_cpu = time.perf_counter() - wall, time.process_time() - cpu
    wall, cpu = time.perf_counter(), time.process_time()
    times = run(tree, flows, inc, kernel=kernel)
    run_wall, run_cpu = time.perf_counter() - wall, time.process_time() - cpu
    bound = (hosts - 1) * 1e6 / 12.5e9
    print(
        f"all-to-all of {hosts:,} hosts ({flows.num_flows:,} flows of 1 MB), radix-32 fat-tree at 100 Gbit/s, ECMP "
        f"(seed {seed}): event loop {run_wall:.2f} s wall ({run_cpu:.2f} s CPU), routing {route_wall:.2f} s wall "
        f"({route_cpu:.2f} s CPU); {times.num_events:,} events, {times.num_rounds:,} filling rounds; completion "
        f"{times.makespan_s * 1e3:.3f} ms, NIC bound {bound * 1e3:.3f} ms",
        flush=True,
    )


WORK_CASES = (  # (nodes, jobs, algorithm: None for NCCL's pick, as fabric simulate makes it)
    *((n, 1, None) for n in (16, 64, 256, 1024)),
    *((16, j, None) for j in (4, 16, 64)),
    (64, 8, None),
    *((n, 1, "ring") for n in (16, 128)),
    (16, 8, "ring"),
)


def work_rates(cases: tuple[tuple[int, int, str | None], ...] = WORK_CASES) -> None:
    """3. What ``flowsim.work``'s rates should be: ``fabric simulate``'s runs (a 1 GiB all-reduce on p5
    nodes, calibrated links: each flow set runs twice; ``--jobs`` side by side and each alone) timed in CPU
    seconds, the flows and events their event loops ran counted, beside the estimate; then the three rates
    (per flow, per event, per flow-event, over the estimate's own counts) whose estimates spread least
    around the measured times, scaled so that no run is estimated short."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.network.collectives import Algorithm, Op
    from clustersim.network.flowsim import results, work
    from clustersim.network.flowsim.cluster import fat_tree_for_instance, place_jobs
    from clustersim.network.flowsim.collectives import default_algorithm
    from clustersim.network.topology import fabric_for_instance

    counted = np.zeros(3)  # flows, events, flow-events of the runs so far

    def counting(*args: Any, **kwargs: Any) -> Any:
        times = run(*args, **kwargs)
        counted[:] += (times.end_s.size, times.num_events, times.end_s.size * times.num_events)
        return times

    def terms(*args: Any, **kwargs: Any) -> list[float]:
        """The estimate's seconds at one second per flow, per event, per flow-event in turn (the rates
        are module constants: set them a moment, then put them back)."""
        rates = work.SECONDS_PER_FLOW, work.SECONDS_PER_EVENT, work.FLOW_EVENTS_PER_S
        out = []
        for unit in ((1.0, 0.0, np.inf), (0.0, 1.0, np.inf), (0.0, 0.0, 1.0)):
            work.SECONDS_PER_FLOW, work.SECONDS_PER_EVENT, work.FLOW_EVENTS_PER_S = unit
            out.append(work.collective_work(*args, **kwargs).seconds)
        work.SECONDS_PER_FLOW, work.SECONDS_PER_EVENT, work.FLOW_EVENTS_PER_S = rates
        return out

    results.run = counting  # type: ignore[assignment]  # every event loop ``fabric simulate`` runs
    catalog = load_catalog(())
    rows, cpu_s = [], []
    print("nodes | jobs | algorithm | flows | events | flow-events | CPU s | estimated s")
    for nodes, jobs, name in cases:
        tree = fat_tree_for_instance(catalog, "p5.48xlarge", nodes * jobs)
        hosts = place_jobs(tree, nodes, jobs)
        fabric = fabric_for_instance(catalog, "p5.48xlarge", nodes)
        algo = default_algorithm(Op.ALL_REDUCE, fabric, 2**30) if name is None else Algorithm(name)
        guess = work.collective_work(tree, hosts[0], Op.ALL_REDUCE, 2**30, algorithm=algo, jobs=jobs, runs=2)
        rows.append(terms(tree, hosts[0], Op.ALL_REDUCE, 2**30, algorithm=algo, jobs=jobs, runs=2))
        counted[:] = 0
        cpu = time.process_time()
        if jobs == 1:
            results.simulate_collective(tree, hosts[0], Op.ALL_REDUCE, 2**30, algorithm=algo)
        else:
            results.simulate_jobs(tree, hosts, Op.ALL_REDUCE, 2**30, algorithm=algo)
        cpu_s.append(time.process_time() - cpu)
        flows, events, flow_events = counted
        print(
            f"{nodes} | {jobs} | {algo.value} | {flows:,.0f} | {events:,.0f} | {flow_events:.3g} "
            f"({guess.events:.3g} estimated) | {cpu_s[-1]:.2f} | {guess.seconds:.2f} ({guess.seconds / cpu_s[-1]:.2f}x)"
        )
    a, b = np.array(rows), np.array(cpu_s)
    grid = [(f, e, fe) for f in np.geomspace(1e-6, 3e-5, 30) for e in np.geomspace(1e-5, 5e-3, 31) for fe in
            np.geomspace(1e-10, 1e-7, 40)]  # fmt: skip
    ratios = np.array(grid) @ a.T / b  # estimate / measured, per rates and run
    best = int(np.argmin(np.log(ratios.max(axis=1) / ratios.min(axis=1))))
    fit = np.array(grid[best]) / ratios[best].min()
    print(
        f"rates: {fit[0]:.3g} s a flow, {fit[1]:.3g} s an event, {1 / fit[2]:.3g} flow-events a second; the estimate "
        f"then 1.00-{ratios[best].max() / ratios[best].min():.2f}x the runs"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--flows", type=int, nargs="+", default=[1000, 4000], help="distinct-completions flows")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--a2a-hosts", type=int, default=1024, help="hosts of the ECMP all-to-all (0: skip it)")
    parser.add_argument("--simgrid-python", default="/usr/bin/python3")
    parser.add_argument(
        "--kernel", choices=KERNELS, default="auto", help="the solver's re-solve (auto: numba if installed)"
    )
    parser.add_argument("--work", action="store_true", help="only measure flowsim.work's rates (section 3)")
    args = parser.parse_args(argv)
    if args.work:
        work_rates()
        return
    kernel, solver_line = load_kernel(args.kernel)
    print(solver_line)
    side_by_side(args.hosts, args.flows, args.seed, args.repeats, args.simgrid_python, kernel)
    if args.a2a_hosts:
        ecmp_all_to_all(args.a2a_hosts, args.seed, kernel)


if __name__ == "__main__":
    main()
