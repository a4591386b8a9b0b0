"""Speed and figures of the flow-level fabric simulator (``clustersim.network.flowsim``).

Prints, in one run:

1. wall time and solver events/s of one ring all-reduce step across 2,500 p5 nodes (20,000 GPUs,
   32 EFA rails each) on the UltraCluster fat-tree (target: under 10 s);
2. wall time and events/s of a 65,280-flow all-to-all of 1 MB flows on a 256-host fat-tree
   (target: under 0.2 s; SimGrid 4.1's flow model took 2.1 s on this machine), sprayed, and the
   same with ECMP; a side-by-side SimGrid run is not attempted (not installed here);
3. analytic against simulated (spraying, non-blocking) at 2 to 2,048 nodes;
4. ECMP against spraying for all-reduce and all-to-all on p5 at 16, 128 and 2,048 nodes with 1:1
   and 2:1 spines (``--quick`` skips 2,048).

Run: ``.venv/bin/python benchmarks/bench_fabric.py [--quick] [--no-ecmp-alltoall]`` (the ECMP
all-to-all takes about 2 minutes: hashing makes hundreds of distinct bottleneck levels per event).
"""

from __future__ import annotations

import sys
import time

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.cost import ANALYTIC
from clustersim.network.flowsim.cluster import Placement, fat_tree_for_instance, place
from clustersim.network.flowsim.cost import SIM
from clustersim.network.flowsim.engine import independent, simulate
from clustersim.network.flowsim.results import simulate_collective
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTreeSpec, build
from clustersim.network.topology import fabric_for_instance

GIB = float(1 << 30)


def ring_step_20000_gpus() -> None:
    catalog = load_catalog(use_env=False)
    began = time.perf_counter()
    tree = fat_tree_for_instance(catalog, "p5.48xlarge", 2500)
    built = time.perf_counter() - began
    hosts = place(tree, 2500)
    for routing in Routing:
        result = simulate_collective(tree, hosts, Op.ALL_REDUCE, GIB, routing=routing, max_steps=1)
        print(
            f"ring all-reduce step, 2,500 x p5 (20,000 GPUs), {routing.value}: fabric {tree.num_links:,} links "
            f"built in {built:.2f} s; step {result.wall_s:.2f} s wall, {result.num_flows:,} flows, "
            f"{result.num_events} events ({result.events_per_s:,.1f} events/s), busbw "
            f"{result.busbw_bytes_per_s / 1e9:.1f} GB/s"
        )


def alltoall_256_hosts(*, ecmp: bool = True) -> None:
    hosts = 256
    spec = FatTreeSpec(
        num_hosts=hosts, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=12.5e9, scaleup_bytes_per_s=1e12, radix=32
    )
    tree = build(spec)
    src, dst = np.meshgrid(np.arange(hosts), np.arange(hosts))
    off = src != dst
    flows = independent(src[off], dst[off], np.full(int(off.sum()), 1e6))
    expected = (hosts - 1) * 1e6 / 12.5e9
    for routing in (Routing.SPRAY, Routing.ECMP):
        began = time.perf_counter()
        times = simulate(tree, flows, routing, seed=1)
        wall = time.perf_counter() - began
        print(
            f"all-to-all, {flows.num_flows:,} flows of 1 MB, 256-host 2-tier fat-tree (radix 32, 100 Gb/s), "
            f"{routing.value}: {wall:.3f} s wall, {times.num_events} events ({times.num_events / wall:,.0f} events/s), "
            f"{times.num_rounds:,} filling rounds, completion {times.makespan_s * 1e3:.3f} ms "
            f"(NIC bound {expected * 1e3:.3f} ms)"
        )
        if not ecmp:
            break


def analytic_vs_simulated(node_counts: tuple[int, ...]) -> None:
    print("\nanalytic vs simulated (p5, 1 GiB, Simple protocol, non-blocking, spraying; sim = analytic latency")
    print("and ramp + simulated bandwidth on links at the analytic efficiencies):")
    print(f"{'op':<14}{'algo':<10}{'nodes':>6}{'analytic ms':>13}{'sim ms':>10}{'diff':>8}")
    cases = [(Op.ALL_REDUCE, Algorithm.RING), (Op.ALL_REDUCE, Algorithm.TREE), (Op.ALLTOALL, Algorithm.PAIRWISE)]
    catalog = load_catalog(use_env=False)
    for op, algorithm in cases:
        for nodes in node_counts:
            if algorithm is Algorithm.TREE and nodes > 128:
                continue
            fabric = fabric_for_instance(catalog, "p5.48xlarge", nodes)
            size = np.array([GIB])
            kw = {"algorithm": algorithm, "protocol": Protocol.SIMPLE}
            a = ANALYTIC.table(op, size, fabric, **kw).time_s[0]  # type: ignore[arg-type]
            s = SIM.table(op, size, fabric, **kw).time_s[0]  # type: ignore[arg-type]
            print(f"{op.value:<14}{algorithm.value:<10}{nodes:>6}{a * 1e3:>13.3f}{s * 1e3:>10.3f}{s / a - 1:>+8.1%}")


def ecmp_vs_spray(node_counts: tuple[int, ...]) -> None:
    print("\nECMP vs spraying, p5 (1 GiB per rank, on the 2,500-host UltraCluster fat-tree, radix 64, rail-optimized;")
    print("packed: consecutive hosts; random: a seeded random set of hosts, seed 1):")
    head = f"{'op':<12}{'nodes':>6}{'spine':>7}{'placement':>10}{'ecmp busbw':>12}{'spray busbw':>13}{'ecmp/spray':>12}"
    print(head + "  binding (ecmp, spray)")
    catalog = load_catalog(use_env=False)
    for op in (Op.ALL_REDUCE, Op.ALLTOALL):
        for nodes in node_counts:
            for ratio in (1.0, 2.0):
                tree = fat_tree_for_instance(catalog, "p5.48xlarge", nodes, oversubscription=ratio)
                for where in (Placement.PACKED, Placement.RANDOM):
                    hosts = place(tree, nodes, where, seed=1)
                    steps = 2 if nodes > 1000 else 4
                    runs = {
                        r: simulate_collective(tree, hosts, op, GIB, routing=r, seed=1, max_steps=steps)
                        for r in Routing
                    }
                    e, s = runs[Routing.ECMP], runs[Routing.SPRAY]
                    print(
                        f"{op.value:<12}{nodes:>6}{f'{ratio:g}:1':>7}{where.value:>10}"
                        f"{e.busbw_bytes_per_s / 1e9:>12.1f}"
                        f"{s.busbw_bytes_per_s / 1e9:>13.1f}{e.busbw_bytes_per_s / s.busbw_bytes_per_s:>12.3f}"
                        f"  {e.binding_tier}, {s.binding_tier}",
                        flush=True,
                    )


def main() -> None:
    quick = "--quick" in sys.argv
    ring_step_20000_gpus()
    alltoall_256_hosts(ecmp="--no-ecmp-alltoall" not in sys.argv)
    analytic_vs_simulated((2, 16, 128) if quick else (2, 16, 128, 2048))
    ecmp_vs_spray((16, 128) if quick else (16, 128, 2048))


if __name__ == "__main__":
    main()
