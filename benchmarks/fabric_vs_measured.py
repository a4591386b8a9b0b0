"""The flow simulator and the analytic model side by side on every measured multi-node collective.

For each case of the bundled and project ``collectives.jsonl`` with more than one node, the busbw
that ``fabric simulate`` prints (calibrated links with NCCL's per-step latencies, the default), the
same run on ideal links (``--ideal``: datasheet links, no latency, what the command printed before),
and the analytic model's (``validate``'s prediction), each against the measured busbw. Every run is
what ``fabric simulate --instance I --nodes N --collective OP --size S`` does: the instance's
catalogued fabric, the job packed, sprayed (``--routing``), the algorithm the case forced or NCCL's
tuner's pick. Cases the simulator cannot run (no catalogued instance) are counted and named.

Prints the MAPE of busbw per source and per (source, instance, op, nodes) for the three, and for NCCL's
simulated structure alone (the calibrated run before the fitted ramp is set against it: the ramp from
first principles), how often the fitted ramp was the slower, and the wall time of the simulations.

Run: ``.venv/bin/python benchmarks/fabric_vs_measured.py [--routing spray] [--cases]``
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from dataclasses import dataclass

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Algorithm, parse_op
from clustersim.network.flowsim.cluster import fat_tree_for_instance, place
from clustersim.network.flowsim.collectives import default_algorithm
from clustersim.network.flowsim.results import CollectiveResult, simulate_collective
from clustersim.network.flowsim.routing import Routing
from clustersim.network.flowsim.topology import FatTree
from clustersim.system import system_for_instance
from clustersim.validation.cases import Case, bundled_dir, project_dir, read_cases, source_key
from clustersim.validation.collective import predict_collective_case

GB = 1e9
MODELS = ("analytic", "calibrated", "structure", "ideal")
TITLES = ("analytic", "simulated, calibrated", "simulated, NCCL's structure alone", "simulated, ideal (before)")


@dataclass(frozen=True)
class Scored:
    """One case: measured busbw and each model's, GB/s."""

    case: Case
    source: str
    nodes: int
    measured: float
    predicted: dict[str, float]
    ramp: str  # which bound the calibrated run: the simulated structure or the fitted ramp

    def error(self, model: str) -> float:
        return abs(self.predicted[model] / self.measured - 1)


def multi_node_cases() -> list[Case]:
    """Every collective case of more than one node, bundled and project."""
    cases = read_cases(bundled_dir() / "collectives.jsonl") + read_cases(project_dir() / "collectives.jsonl")
    return [c for c in cases if c.system is not None and (c.system.nodes or 1) > 1]


def simulate_case(
    case: Case, catalog: Catalog, trees: dict[tuple[str, int, int], FatTree], routing: Routing, *, ideal: bool
) -> CollectiveResult:
    """What ``fabric simulate`` runs for ``case`` (``ideal``: with ``--ideal``)."""
    system = case.system
    assert system is not None and system.nodes is not None
    if not system.instance:
        raise ClusterSimError(f"case {case.id}: no catalogued instance, so no fabric to simulate", field="instance")
    nodes, per_node = system.nodes, system.devices_per_node
    key = (system.instance, nodes, per_node or 0)
    if key not in trees:
        topology = system_for_instance(catalog, system.instance, nodes, devices_per_node=per_node).topology
        trees[key] = fat_tree_for_instance(catalog, system.instance, nodes, topology=topology)
    tree = trees[key]
    op, size = parse_op(str(case.op)), float(case.size_bytes or 0)
    if case.algorithm:
        algorithm = Algorithm(case.algorithm)
    else:
        topology = system_for_instance(catalog, system.instance, nodes, devices_per_node=per_node).topology
        algorithm = default_algorithm(op, topology.fabric(), size)
    return simulate_collective(tree, place(tree, nodes), op, size, routing=routing, algorithm=algorithm, ideal=ideal)


def score(routing: Routing = Routing.SPRAY) -> tuple[list[Scored], list[tuple[str, str]], dict[str, float]]:
    """Every multi-node case scored by the three models; the cases skipped with why; wall time per model."""
    catalog = load_catalog(use_env=False)
    trees: dict[tuple[str, int, int], FatTree] = {}
    scored, skipped = [], []
    wall = dict.fromkeys(("analytic", "calibrated", "ideal"), 0.0)
    for case in multi_node_cases():
        system = case.system
        assert system is not None
        try:
            began = time.perf_counter()
            analytic = predict_collective_case(case, "busbw_GBps", catalog)
            wall["analytic"] += time.perf_counter() - began
            runs = {}
            for model in ("calibrated", "ideal"):
                began = time.perf_counter()
                runs[model] = simulate_case(case, catalog, trees, routing, ideal=model == "ideal")
                wall[model] += time.perf_counter() - began
        except ClusterSimError as err:
            skipped.append((case.id, str(err)))
            continue
        calibrated = runs["calibrated"]
        predicted = {
            "analytic": analytic,
            "calibrated": calibrated.busbw_bytes_per_s / GB,
            "structure": calibrated.busbw_bytes_per_s / GB * calibrated.time_s / calibrated.structure_time_s,
            "ideal": runs["ideal"].busbw_bytes_per_s / GB,
        }
        measured = float(case.measured["busbw_GBps"])
        source = source_key(case.source)
        scored.append(Scored(case, source, int(system.nodes or 1), measured, predicted, calibrated.ramp))
    return scored, skipped, wall


def mape(rows: list[Scored], model: str) -> float:
    return 100 * sum(r.error(model) for r in rows) / len(rows)


def table(scored: list[Scored]) -> list[str]:
    """Markdown rows: per source, then per (source, instance, op, nodes), MAPE of each model."""
    lines = ["| source | cases | " + " | ".join(TITLES) + " |", "| --- | ---: |" + " ---: |" * len(MODELS)]
    groups: dict[str, list[Scored]] = defaultdict(list)
    detail: dict[tuple[str, str, str, int], list[Scored]] = defaultdict(list)
    for r in scored:
        groups[r.source].append(r)
        system = r.case.system
        assert system is not None
        detail[(r.source, str(system.instance), str(r.case.op), r.nodes)].append(r)
    for name, rows in sorted(groups.items()):
        lines.append(f"| {name} | {len(rows)} | " + " | ".join(f"{mape(rows, m):.1f}%" for m in MODELS) + " |")
    lines.append(f"| all | {len(scored)} | " + " | ".join(f"{mape(scored, m):.1f}%" for m in MODELS) + " |")
    lines.append("")
    lines.append("| source | instance | op | nodes | cases | " + " | ".join(TITLES) + " |")
    lines.append("| --- | --- | --- | ---: | ---: |" + " ---: |" * len(MODELS))
    for (name, instance, op, nodes), rows in sorted(detail.items()):
        errors = " | ".join(f"{mape(rows, m):.1f}%" for m in MODELS)
        lines.append(f"| {name} | {instance} | {op} | {nodes} | {len(rows)} | {errors} |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--routing", default="spray", choices=[r.value for r in Routing])
    parser.add_argument("--cases", action="store_true", help="also print every case's busbw")
    args = parser.parse_args()
    scored, skipped, wall = score(Routing(args.routing))
    print("\n".join(table(scored)))
    print()
    print(
        f"{len(scored)} cases; wall time: simulated calibrated {wall['calibrated']:.1f} s, "
        f"ideal {wall['ideal']:.1f} s, analytic {wall['analytic']:.2f} s"
    )
    fitted = sum(r.ramp == "fitted" for r in scored)
    print(f"the fitted ramp was the slower in {fitted} of {len(scored)} cases, NCCL's simulated structure in the rest")
    reasons: dict[str, int] = defaultdict(int)
    for _, why in skipped:
        reasons[why.split(": ", 1)[-1]] += 1
    for why, count in reasons.items():
        print(f"skipped {count} case(s): {why}")
    if args.cases:
        for r in scored:
            busbw = ", ".join(f"{m} {r.predicted[m]:.1f}" for m in MODELS)
            print(f"{r.case.id}: measured {r.measured:.1f}; {busbw} GB/s; ramp {r.ramp}")


if __name__ == "__main__":
    main()
