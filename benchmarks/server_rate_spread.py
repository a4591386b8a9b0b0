"""How far apart submitters of the same server benchmark chose their rates, beside the model's highest rate.

A server row (MLPerf Inference's Server scenario) measures the rate its submitter chose to run at, the highest that
passed with whatever margin the submitter kept, not the system's capacity; ``validate`` scores it against the model's
highest rate meeting the row's latency targets (``clustersim.serving.latency.max_rate``). Where several submitters
ran the same model on the same accelerator, the spread of their rates bounds how closely any capacity model can
score them. For each group of server rows sharing model, accelerator and benchmark round (the id's first field), this
prints the measured rates per device (requests/s: output tokens/s over output tokens over devices), their least and
greatest, and the model's highest rate per device on the settings of the row that ran fastest, against that row's (a
positive ratio: above every submitter).

    python benchmarks/server_rate_spread.py
    python benchmarks/server_rate_spread.py --match deepseek-r1 --json

Not a test: it reads the bundled cases and prints; nothing is written.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clustersim.catalog import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.validation.cases import Case, default_paths, read_all
from clustersim.validation.inference import case_deployment, deployment_estimate

DEFAULT_FILES = tuple(default_paths("inference.jsonl"))


def server_rows(files: tuple[Path, ...], match: list[str]) -> Iterator[Case]:
    """The server rows at a chosen rate (no stated Poisson rate, not disaggregated) whose id holds every ``match``."""
    for case in read_all(files):
        workload, parallel = case.workload, case.parallel
        if workload is None or workload.scenario != "server" or workload.request_rate_per_s is not None:
            continue
        if (parallel is not None and parallel.disaggregate) or not all(m in case.id for m in match):
            continue
        yield case


def spread(files: tuple[Path, ...], match: list[str]) -> list[dict[str, Any]]:
    """Per group (model, accelerator, round): each row's measured rate per device and the model's highest."""
    catalog = load_catalog()
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in server_rows(files, match):
        deployment = case_deployment(case, catalog)
        system = case.system
        assert system is not None and system.devices is not None  # case_deployment refuses a case without them
        devices = system.devices
        output_tokens = deployment.request.output_tokens
        measured = case.measured["output_tokens_per_s"] / output_tokens / devices
        try:
            predicted: float | None = deployment_estimate(deployment).output_tokens_per_s / output_tokens / devices
        except ClusterSimError:
            predicted = None
        key = (deployment.model.name, str(system.accelerator), case.id.split("_")[0])
        groups[key].append({"id": case.id, "measured_per_device": measured, "model_per_device": predicted})
    rows = []
    for (model, accelerator, round_), members in sorted(groups.items()):
        rates = [m["measured_per_device"] for m in members]
        greatest = max(members, key=lambda m: m["measured_per_device"])
        model_rate = greatest["model_per_device"]  # on the settings of the row that ran fastest
        rows.append(
            {
                "model": model,
                "accelerator": accelerator,
                "round": round_,
                "rows": members,
                "least_per_device": min(rates),
                "greatest_per_device": max(rates),
                "spread": max(rates) / min(rates),
                "model_per_device": model_rate,
                "model_over_greatest": None if model_rate is None else model_rate / max(rates) - 1.0,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, help="case files (default: the bundled inference cases)")
    parser.add_argument("--match", action="append", default=[], help="keep rows whose id holds this (repeatable)")
    parser.add_argument("--json", action="store_true", help="print the groups as JSON")
    args = parser.parse_args()
    rows = spread(tuple(args.files) or DEFAULT_FILES, args.match)
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"{'model':28s} {'accelerator':12s} {'round':9s} {'rows':>4s} {'least':>7s} {'greatest':>8s} "
          f"{'spread':>6s} {'model':>7s} {'vs greatest':>11s}  (requests/s per device)")  # fmt: skip
    for row in rows:
        model = row["model_per_device"]
        versus = row["model_over_greatest"]
        print(
            f"{row['model'][:28]:28s} {row['accelerator'][:12]:12s} {row['round'][:9]:9s} {len(row['rows']):4d} "
            f"{row['least_per_device']:7.3f} {row['greatest_per_device']:8.3f} {row['spread']:6.2f} "
            f"{'-' if model is None else f'{model:7.3f}':>7s} {'-' if versus is None else f'{versus:+11.1%}':>11s}"
        )


if __name__ == "__main__":
    main()
