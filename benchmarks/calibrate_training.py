"""Fit the per-family compute efficiencies to the training ground truth, once; print the values.

Usage: ``python benchmarks/calibrate_training.py [../shared/validation/training.jsonl]``

For each accelerator family, coordinate descent on a log grid minimizes the mean over sources of the mean
|log(predicted / measured)| of that family's cases (each source weighs the same; never per case). The printed values
go into ``src/clustersim/compute/efficiency.toml`` by hand.
"""

from __future__ import annotations

import json
import math
import sys
from collections import defaultdict
from pathlib import Path

from clustersim.catalog.registry import load_catalog
from clustersim.compute import efficiency
from clustersim.training.estimate import estimate_training
from clustersim.validation.training import case_inputs, predict_training_case

PARAMETERS = {
    "gemm_max": (0.4, 0.95),
    "gemm_half_flop": (1e7, 1e11),
    "attention": (0.1, 1.0),
    "memory_efficiency": (0.3, 0.95),
    "fp8_efficiency_ratio": (0.3, 1.0),
}


def main() -> None:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else "../shared/validation/training.jsonl")
    catalog = load_catalog(use_env=False)
    by_family: dict[str, list[tuple[dict[str, object], float, str]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        case = json.loads(line)
        field = next(f for f in ("step_time_s", "tokens_per_s_per_device") if f in case["measured"])
        _, system, _, _ = case_inputs(case, catalog)
        by_family[system.accelerator.family].append((case, case["measured"][field], field))

    def loss(cases: list[tuple[dict[str, object], float, str]]) -> float:
        """Mean over sources (the id's first word) of the mean |log error|: each source weighs the same."""
        per_source: dict[str, list[float]] = defaultdict(list)
        for c, m, f in cases:
            per_source[str(c["id"]).split("_")[0]].append(abs(math.log(predict_training_case(c, f, catalog) / m)))
        return sum(sum(v) / len(v) for v in per_source.values()) / len(per_source)

    for family, cases in sorted(by_family.items()):
        table = efficiency.efficiency_table(use_env=False)  # the cached table the estimates read
        current = table[family]
        best = loss(cases)
        fp8 = any(c.get("precision") == "fp8" for c, _, _ in cases)
        for _ in range(4):
            for name, (low, high) in PARAMETERS.items():
                if name == "fp8_efficiency_ratio" and not fp8:
                    continue
                value = getattr(current, name)
                for factor in (0.7, 0.85, 0.93, 0.97, 1.03, 1.07, 1.15, 1.4):
                    trial = current.model_copy(update={name: min(max(value * factor, low), high)})
                    table[family] = trial
                    score = loss(cases)
                    if score < best:
                        best, current = score, trial
                table[family] = current
        print(f"{family}: {len(cases)} cases, mean |log error| {best:.4f}")
        print(f"  {current}")
    # Show one estimate so the fit can be eyeballed.
    first = next(iter(by_family.values()))[0][0]
    model, system, layout, job = case_inputs(first, catalog)
    print(f"example {first['id']}: {estimate_training(model, system, layout, job).step_s:.3f} s")


if __name__ == "__main__":
    main()
