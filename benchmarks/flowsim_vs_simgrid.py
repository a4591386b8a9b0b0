"""The flow simulator beside SimGrid on the same routes: every flow's completion time and the wall time.

clustersim's flow solver (``network/flowsim``) shares links max-min fairly and re-solves only the flows an
event can change. SimGrid's CM02 network model with cross-traffic off, no TCP window bound and zero
latency is plain max-min sharing too, so on the same links, capacities and routes both should give the
same completion time for every flow. This script routes four workloads on a fat-tree with ECMP (one path
per flow: every flow crosses each of its links whole), hands SimGrid the very links, capacities and
routes (a star zone: each flow its own source host, whose route is the flow's links), and prints per
workload the largest relative difference in any flow's completion time, the makespans, both wall
times (SimGrid's platform building apart from its run) and both CPU times (steadier on a shared machine;
``bench_flowsim_speed.py`` takes medians of several runs).

Workloads, on ``--hosts`` hosts of one NIC each: an all-to-all (every host to every other, equal sizes),
a random permutation, one NCCL ring step (host i to i + 1), and many distinct completions (``--flows``
random pairs with sizes spread over two decades, so nearly every completion is its own event).

SimGrid comes from Debian (``apt-get install python3-simgrid``) for the system Python, so the SimGrid side
runs this file under ``--simgrid-python`` (default ``/usr/bin/python3``); not in CI:

    .venv/bin/python benchmarks/flowsim_vs_simgrid.py [--hosts 64] [--flows 1000] [--kernel auto|numba|numpy]
        [--simgrid-python PATH]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GBPS = 1e9 / 8  # bytes/s per Gbit/s


def workloads(hosts: int, flows: int, seed: int) -> dict[str, tuple[list[int], list[int], list[float]]]:
    """(sources, destinations, sizes in bytes) of each workload."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out: dict[str, tuple[list[int], list[int], list[float]]] = {}
    src, dst = np.meshgrid(np.arange(hosts), np.arange(hosts), indexing="ij")
    off = src != dst
    out["all-to-all"] = (src[off].tolist(), dst[off].tolist(), [64e6] * int(off.sum()))
    perm = rng.permutation(hosts)
    while np.any(perm == np.arange(hosts)):
        perm = rng.permutation(hosts)
    out["permutation"] = (list(range(hosts)), perm.tolist(), [1e9] * hosts)
    out["ring step"] = (list(range(hosts)), [(i + 1) % hosts for i in range(hosts)], [256e6] * hosts)
    a = rng.integers(0, hosts, flows)
    b = (a + rng.integers(1, hosts, flows)) % hosts
    sizes = np.round(10 ** rng.uniform(7, 9, flows))
    out["distinct completions"] = (a.tolist(), b.tolist(), sizes.tolist())
    return out


KERNELS = ("auto", "numba", "numpy")  # --kernel: numba's re-solve where installed, it (refused if absent), numpy's


def load_kernel(choice: str) -> tuple[bool, str]:
    """``run``'s ``kernel`` for ``--kernel`` and a line saying which re-solve runs. Numba's is loaded
    here (imported, compiled or read from its cache), before any timing, as SimGrid's library is
    loaded before its run is timed; the line gives what loading cost."""
    from clustersim.network.flowsim.kernel import load

    if choice == "numpy":
        return False, "re-solve: numpy"
    cpu, wall = time.process_time(), time.perf_counter()
    if load() is None:
        if choice == "numba":
            raise SystemExit("--kernel numba: numba is not installed (pip install 'clustersim[fast]')")
        return False, "re-solve: numpy (numba not installed)"
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    return True, f"re-solve: numba kernel, loaded once in {wall:.2f} s wall ({cpu:.2f} s CPU) before the timed runs"


def flowsim_side(hosts: int, flows: int, seed: int, kernel: bool | None = None) -> dict[str, dict]:
    """Run each workload in clustersim's flow simulator (``kernel``: as ``run`` takes it); return its
    routes, capacities and times."""
    import numpy as np

    from clustersim.network.flowsim.engine import independent, route_flows, run
    from clustersim.network.flowsim.routing import Routing
    from clustersim.network.flowsim.topology import FatTreeSpec, build

    spec = FatTreeSpec(
        num_hosts=hosts, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=400 * GBPS, scaleup_bytes_per_s=900e9,
        radix=16, oversubscription=2.0,
    )  # fmt: skip
    tree = build(spec)
    out = {}
    for name, (src, dst, size) in workloads(hosts, flows, seed).items():
        batch = independent(np.array(src), np.array(dst), np.array(size))
        inc = route_flows(tree, batch, Routing.ECMP, seed)
        assert np.all(inc.weight == 1.0), "ECMP gives every flow one whole path"
        began, cpu = time.perf_counter(), time.process_time()
        times = run(tree, batch, inc, kernel=kernel)
        wall, cpu = time.perf_counter() - began, time.process_time() - cpu
        used = np.unique(inc.resource)
        index = {int(r): i for i, r in enumerate(used)}
        routes: list[list[int]] = [[] for _ in size]
        for f, r in zip(inc.flow.tolist(), inc.resource.tolist(), strict=True):
            routes[f].append(index[r])
        out[name] = {
            "capacity": tree.capacity_bytes_per_s[used].tolist(),
            "routes": routes,
            "size": list(size),
            "end_s": times.end_s.tolist(),
            "wall_s": wall,
            "cpu_s": cpu,
            "events": times.num_events,
        }
    return out


def simgrid_side(path: Path) -> None:
    """(Under the system Python with SimGrid) run each workload of ``path`` in a child process of its own
    (one SimGrid engine per process); print their times as JSON."""
    out = {}
    for name in json.loads(path.read_text()):
        command = [sys.executable, __file__, "--simgrid-one", str(path), name]
        out[name] = json.loads(
            subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1]
        )
    print(json.dumps(out))


def simgrid_one(path: Path, name: str) -> None:
    """One workload in one SimGrid engine: print its flows' completion times and the wall times."""
    from simgrid import Actor, Comm, Engine, LinkInRoute, NetZone

    case = json.loads(path.read_text())[name]
    began = time.perf_counter()
    engine = Engine(["flowsim_vs_simgrid", "--cfg=network/model:CM02", "--cfg=network/crosstraffic:0",
                     "--cfg=network/TCP-gamma:0", "--log=root.thres:critical"])  # fmt: skip
    zone = NetZone.create_star_zone("fabric")
    links = [zone.create_link(f"l{i}", float(c)).seal() for i, c in enumerate(case["capacity"])]
    ends = []
    for i, route in enumerate(case["routes"]):
        src = zone.create_host(f"s{i}", 1e9).seal()
        dst = zone.create_host(f"d{i}", 1e9).seal()
        zone.add_route(src.netpoint, None, None, None, [LinkInRoute(links[k]) for k in route], False)
        zone.add_route(None, dst.netpoint, None, None, [], False)
        ends.append((src, dst))
    zone.seal()
    built = time.perf_counter()
    finish: list[float] = []

    def main() -> None:
        comms = [Comm.sendto_async(s, d, int(size)) for (s, d), size in zip(ends, case["size"], strict=True)]
        Comm.wait_all(comms)
        finish.extend(c.finish_time for c in comms)

    Actor.create("main", ends[0][0], main)
    cpu = time.process_time()
    engine.run()
    done, cpu = time.perf_counter(), time.process_time() - cpu
    print(json.dumps({"end_s": finish, "build_s": built - began, "run_s": done - built, "cpu_s": cpu}))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--flows", type=int, default=1000, help="flows of the distinct-completions workload")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--simgrid-python", default="/usr/bin/python3")
    parser.add_argument(
        "--kernel", choices=KERNELS, default="auto", help="the solver's re-solve (auto: numba if installed)"
    )
    parser.add_argument("--simgrid-side", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--simgrid-one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.simgrid_one:
        simgrid_one(Path(args.simgrid_one[0]), args.simgrid_one[1])
        return
    if args.simgrid_side:
        simgrid_side(args.simgrid_side)
        return
    kernel, solver_line = load_kernel(args.kernel)
    ours = flowsim_side(args.hosts, args.flows, args.seed, kernel)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.json"
        path.write_text(json.dumps(ours))
        command = [args.simgrid_python, __file__, "--simgrid-side", str(path)]
        theirs = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
    print(f"{args.hosts} hosts, one 400 Gbit/s NIC each, radix-16 fat-tree at 2:1, ECMP (seed {args.seed})")
    print(solver_line)
    header = ("workload", "flows", "events", "max |rel diff|", "makespan s", "SimGrid makespan", "ours s",
              "SimGrid run s", "(+ build s)", "speed-up", "ours CPU s", "SimGrid CPU s", "CPU speed-up")  # fmt: skip
    print(" | ".join(header))
    for name, case in ours.items():
        other = theirs[name]
        diffs = [abs(a - b) / b for a, b in zip(case["end_s"], other["end_s"], strict=True)]
        print(
            f"{name} | {len(case['size']):,} | {case['events']:,} | {max(diffs):.1e} | {max(case['end_s']):.6g} | "
            f"{max(other['end_s']):.6g} | {case['wall_s']:.3f} | {other['run_s']:.3f} | {other['build_s']:.3f} | "
            f"{other['run_s'] / case['wall_s']:.1f}x | {case['cpu_s']:.3f} | {other['cpu_s']:.3f} | "
            f"{other['cpu_s'] / case['cpu_s']:.2f}x"
        )


if __name__ == "__main__":
    sys.exit(main())
