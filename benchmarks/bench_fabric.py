"""Speed of the flow-level fabric simulator (``clustersim.network.flowsim``).

Prints, in one run:

1. wall time and solver events/s of one ring all-reduce step across 2,500 p5 nodes (20,000 GPUs,
   32 EFA rails each) on the UltraCluster fat-tree, for every routing (target: under 10 s), on ideal
   links (one run; calibrated, ``fabric simulate``'s default, runs the flows twice);
2. wall time and events/s of a 65,280-flow all-to-all of 1 MB flows on a 256-host fat-tree
   (target: under 0.2 s sprayed; SimGrid 4.1's flow model took 2.1 s on this machine), sprayed and
   with ECMP, each against the plain method (every active flow re-solved at every event:
   ``warm_fraction=0``) on the same flows: its wall time and the largest difference in any flow's
   completion time. The plain ECMP run takes about 3 minutes at 256 hosts, so by default it is
   checked at 128 hosts (16,256 flows); ``--full-check`` checks it at 256.

The issue's ECMP-vs-spray and analytic-vs-simulated tables are ``benchmarks/fabric_tables.py``; the
simulator against measured busbw is ``benchmarks/fabric_vs_measured.py``.

Run: ``.venv/bin/python benchmarks/bench_fabric.py [--full-check]``
"""

from __future__ import annotations

import sys
import time

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.network.collectives import Algorithm, Op
from clustersim.network.flowsim.cluster import fat_tree_for_instance, place
from clustersim.network.flowsim.engine import Flows, independent, simulate
from clustersim.network.flowsim.results import simulate_collective
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTree, FatTreeSpec, build

GIB = float(1 << 30)


def ring_step_20000_gpus() -> None:
    catalog = load_catalog(use_env=False)
    began = time.perf_counter()
    tree = fat_tree_for_instance(catalog, "p5.48xlarge", 2500)
    built = time.perf_counter() - began
    hosts = place(tree, 2500)
    for routing in Routing:
        result = simulate_collective(  # the solver's speed: one run on the datasheet links
            tree, hosts, Op.ALL_REDUCE, GIB, routing=routing, algorithm=Algorithm.RING, max_steps=1, ideal=True
        )
        print(
            f"ring all-reduce step, 2,500 x p5 (20,000 GPUs), {routing.value}: fabric {tree.num_links:,} links "
            f"built in {built:.2f} s; step {result.wall_s:.2f} s wall, {result.num_flows:,} flows, "
            f"{result.num_events} events ({result.events_per_s:,.1f} events/s), busbw "
            f"{result.busbw_bytes_per_s / 1e9:.1f} GB/s"
        )


def _alltoall(hosts: int) -> tuple[FatTree, Flows]:
    spec = FatTreeSpec(
        num_hosts=hosts, gpus_per_host=1, nics_per_host=1, nic_bytes_per_s=12.5e9, scaleup_bytes_per_s=1e12, radix=32
    )
    src, dst = np.meshgrid(np.arange(hosts), np.arange(hosts))
    off = src != dst
    return build(spec), independent(src[off], dst[off], np.full(int(off.sum()), 1e6))


def alltoall_256_hosts(*, full_check: bool) -> None:
    tree, flows = _alltoall(256)
    small_tree, small_flows = _alltoall(128)
    expected = 255 * 1e6 / 12.5e9
    for routing in (Routing.SPRAY, Routing.ECMP):
        began = time.perf_counter()
        times = simulate(tree, flows, routing, seed=1)
        wall = time.perf_counter() - began
        print(
            f"all-to-all, {flows.num_flows:,} flows of 1 MB, 256-host 2-tier fat-tree (radix 32, 100 Gb/s), "
            f"{routing.value}: {wall:.3f} s wall, {times.num_events} events ({times.num_events / wall:,.0f} events/s), "
            f"{times.num_rounds:,} filling rounds, completion {times.makespan_s * 1e3:.3f} ms "
            f"(NIC bound {expected * 1e3:.3f} ms)",
            flush=True,
        )
        check_tree, check_flows, fast = (
            (tree, flows, times) if full_check or routing is Routing.SPRAY else (small_tree, small_flows, None)
        )
        if fast is None:
            began = time.perf_counter()
            fast = simulate(check_tree, check_flows, routing, seed=1)
            fast_wall = time.perf_counter() - began
        else:
            fast_wall = wall
        began = time.perf_counter()
        plain = simulate(check_tree, check_flows, routing, seed=1, warm_fraction=0.0)
        plain_wall = time.perf_counter() - began
        diff = float(np.abs(fast.end_s - plain.end_s).max() / plain.makespan_s)
        print(
            f"  against the plain method ({check_flows.num_flows:,} flows): {plain_wall:.3f} s wall (incremental "
            f"{fast_wall:.3f} s), completion {plain.makespan_s * 1e3:.6f} ms, largest flow end-time difference "
            f"{diff:.1e} of it",
            flush=True,
        )


def main() -> None:
    ring_step_20000_gpus()
    alltoall_256_hosts(full_check="--full-check" in sys.argv)


if __name__ == "__main__":
    main()
