"""The flow simulator's closing tables for issue 12, every cell simulated and timed.

1. ECMP against spraying: ring all-reduce and pairwise all-to-all of 1 GiB per rank on
   p5.48xlarge jobs of 16, 128 and 2,048 nodes, on the p5 UltraCluster fat-tree (2,500 hosts of 32
   EFA rails, radix 64, rail-optimized) with 1:1 and 2:1 leaf-to-spine, the job packed (consecutive
   hosts) or random (a seeded random set of hosts in random rank order): time and nccl-tests busbw
   for each routing, ECMP's busbw over spraying's, the tier that bound each, and the wall time of
   the cell. The first ``--max-steps`` ring steps or all-to-all rounds (evenly spread) are simulated
   and the rest extrapolated at their pace (``simulate_collective``'s sampling). Above
   ``FULL_SAMPLE_NODES`` nodes, a packed job simulates 2 (the all-to-all: shifts 1 and n/2, a
   neighbour and a cross-spine round) and a random one 1 (its steps are alike): with dependent
   steps, ECMP's thousands of distinct completion times each re-solve most flows (2,048 nodes,
   ECMP: a random all-to-all of 2 rounds ran over 6 minutes, of 1 round 0.8 s; a packed one of 4
   rounds over 4 minutes, of 2 rounds 0.6 s).
2. Analytic against simulated: the ``analytic`` and ``sim`` cost models (``CollectiveCost.table``)
   for ring and tree all-reduce and the all-to-all of 1 GiB at 2, 16, 128 and 2,048 nodes, Simple
   protocol; the simulator on a non-blocking fat-tree with spraying, its links at the analytic
   model's efficiencies and the analytic latency added (``network/flowsim/cost.py``), so the
   difference is the bandwidth the links deliver in the simulation against the analytic bound.

Run: ``.venv/bin/python benchmarks/fabric_tables.py [--quick] [--max-steps N] [--json PATH]``
(``--quick``: 16 and 128 nodes only; ``--json``: also write every row, wall times included, to PATH,
or to stdout for ``-``).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.network.collectives import Algorithm, Op, Protocol
from clustersim.network.cost import ANALYTIC
from clustersim.network.flowsim.cluster import Placement, fat_tree_for_instance, place
from clustersim.network.flowsim.cost import SIM
from clustersim.network.flowsim.results import CollectiveResult, simulate_collective
from clustersim.network.flowsim.routing import Routing
from clustersim.network.topology import fabric_for_instance

INSTANCE = "p5.48xlarge"
GIB = float(1 << 30)
SEED = 1
FULL_SAMPLE_NODES = 1000  # above this, packed jobs simulate 2 steps and random ones 1 (see the docstring)
ECMP_OPS = ((Op.ALL_REDUCE, Algorithm.RING), (Op.ALLTOALL, Algorithm.PAIRWISE))
ANALYTIC_CASES = (
    (Op.ALL_REDUCE, Algorithm.RING),
    (Op.ALL_REDUCE, Algorithm.TREE),
    (Op.ALL_REDUCE, Algorithm.HIERARCHICAL),
    (Op.ALL_REDUCE, Algorithm.NVLSTREE),
    (Op.ALLTOALL, Algorithm.PAIRWISE),
)


def _run(result: CollectiveResult) -> dict[str, Any]:
    return {
        "time_s": result.time_s,
        "busbw_bytes_per_s": result.busbw_bytes_per_s,
        "binding_tier": result.binding_tier,
        "max_link_utilization": result.max_link_utilization,
        "steps_simulated": result.steps_simulated,
        "steps_total": result.steps_total,
        "num_flows": result.num_flows,
        "num_events": result.num_events,
        "wall_s": result.wall_s,
    }


def ecmp_vs_spray(node_counts: tuple[int, ...], max_steps: int) -> list[dict[str, Any]]:
    print(f"ECMP vs spraying, {INSTANCE}, 1 GiB per rank, on the {INSTANCE} UltraCluster fat-tree (radix 64,")
    print(f"rail-optimized); packed: consecutive hosts; random: seed {SEED}; {max_steps} steps/rounds simulated")
    print(f"(over {FULL_SAMPLE_NODES} nodes: packed 2, random 1); 'steps': simulated/total.")
    head = (
        f"{'op':<11}{'nodes':>6}{'spine':>6}{'placement':>10}{'ecmp ms':>10}{'spray ms':>10}"
        f"{'ecmp GB/s':>11}{'spray GB/s':>11}{'ecmp/spray':>11}{'steps':>11}{'wall s':>8}  binding (ecmp, spray)"
    )
    print(head)
    catalog = load_catalog(use_env=False)
    rows: list[dict[str, Any]] = []
    for op, algorithm in ECMP_OPS:
        for nodes in node_counts:
            for ratio in (1.0, 2.0):
                tree = fat_tree_for_instance(catalog, INSTANCE, nodes, oversubscription=ratio)
                for where in (Placement.PACKED, Placement.RANDOM):
                    began = time.perf_counter()
                    hosts = place(tree, nodes, where, seed=SEED)
                    steps = max_steps
                    if nodes > FULL_SAMPLE_NODES:
                        steps = min(steps, 1 if where is Placement.RANDOM else 2)
                    runs = {
                        r: simulate_collective(
                            tree, hosts, op, GIB, routing=r, algorithm=algorithm, seed=SEED, max_steps=steps
                        )
                        for r in (Routing.ECMP, Routing.SPRAY)
                    }
                    wall = time.perf_counter() - began
                    e, s = runs[Routing.ECMP], runs[Routing.SPRAY]
                    ratio_bw = e.busbw_bytes_per_s / s.busbw_bytes_per_s
                    print(
                        f"{op.value:<11}{nodes:>6}{f'{ratio:g}:1':>6}{where.value:>10}{e.time_s * 1e3:>10.2f}"
                        f"{s.time_s * 1e3:>10.2f}{e.busbw_bytes_per_s / 1e9:>11.1f}{s.busbw_bytes_per_s / 1e9:>11.1f}"
                        f"{ratio_bw:>11.3f}{f'{e.steps_simulated}/{e.steps_total}':>11}{wall:>8.2f}"
                        f"  {e.binding_tier}, {s.binding_tier}",
                        flush=True,
                    )
                    rows.append(
                        {
                            "op": op.value,
                            "algorithm": algorithm.value,
                            "nodes": nodes,
                            "oversubscription": ratio,
                            "placement": where.value,
                            "ecmp": _run(e),
                            "spray": _run(s),
                            "ecmp_over_spray_busbw": ratio_bw,
                            "wall_s": wall,
                        }
                    )
    return rows


def analytic_vs_simulated(node_counts: tuple[int, ...]) -> list[dict[str, Any]]:
    print(f"\nanalytic vs simulated ({INSTANCE}, 1 GiB, Simple protocol; sim: non-blocking fat-tree, spraying,")
    print("links at the analytic efficiencies, analytic latency and ramp added):")
    print(f"{'op':<11}{'algo':<14}{'nodes':>6}{'analytic ms':>13}{'sim ms':>10}{'sim/analytic-1':>16}{'wall s':>8}")
    catalog = load_catalog(use_env=False)
    size = np.array([GIB])
    rows: list[dict[str, Any]] = []
    for op, algorithm in ANALYTIC_CASES:
        for nodes in node_counts:
            began = time.perf_counter()
            fabric = fabric_for_instance(catalog, INSTANCE, nodes)
            a = float(ANALYTIC.table(op, size, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE).time_s[0])
            s = float(SIM.table(op, size, fabric, algorithm=algorithm, protocol=Protocol.SIMPLE).time_s[0])
            wall = time.perf_counter() - began
            print(
                f"{op.value:<11}{algorithm.value:<14}{nodes:>6}{a * 1e3:>13.3f}{s * 1e3:>10.3f}{s / a - 1:>+16.2%}"
                f"{wall:>8.2f}",
                flush=True,
            )
            rows.append(
                {
                    "op": op.value,
                    "algorithm": algorithm.value,
                    "nodes": nodes,
                    "analytic_time_s": a,
                    "sim_time_s": s,
                    "relative_difference": s / a - 1,
                    "wall_s": wall,
                }
            )
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 and 128 nodes only (2 and 16 too for analytic)")
    parser.add_argument("--max-steps", type=int, default=4, help="ring steps / all-to-all rounds simulated")
    parser.add_argument("--json", metavar="PATH", help="also write the rows as JSON to PATH ('-': stdout)")
    args = parser.parse_args(argv)
    if args.max_steps < 1:
        parser.error(f"--max-steps must be at least 1, got {args.max_steps}")
    began = time.perf_counter()
    ecmp = ecmp_vs_spray((16, 128) if args.quick else (16, 128, 2048), args.max_steps)
    analytic = analytic_vs_simulated((2, 16, 128) if args.quick else (2, 16, 128, 2048))
    total = time.perf_counter() - began
    print(f"\ntotal wall time {total:.1f} s")
    if args.json:
        text = json.dumps({"ecmp_vs_spray": ecmp, "analytic_vs_simulated": analytic, "wall_s": total}, indent=2)
        if args.json == "-":
            sys.stdout.write(text + "\n")
        else:
            with open(args.json, "w", encoding="utf-8") as out:
                out.write(text + "\n")


if __name__ == "__main__":
    main()
