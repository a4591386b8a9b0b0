"""Fit the per-family compute efficiencies to the training ground truth, once; print them, or write them.

Usage: ``python benchmarks/calibrate_training.py [../shared/validation/training.jsonl] [--rounds 4] [--write]``

For each accelerator family, coordinate descent on a log grid minimizes the mean over sources of the
mean |log(predicted / measured)| of that family's cases (each source weighs the same; never per case),
starting from the values in the efficiency file. With ``--write`` the fitted values (to ``--digits``
significant digits) go into ``src/clustersim/compute/efficiency.toml`` (or ``--toml``) with a
``fitted`` note per family; every ``source`` and every family not fitted stay as they were.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.catalog.tomlfiles import packaged_path, update_toml_file
from clustersim.compute import efficiency
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.errors import ClusterSimError
from clustersim.training.estimate import estimate_training
from clustersim.validation.training import case_inputs, predict_training_case

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "validation" / "training.jsonl"
PARAMETERS = {
    "gemm_max": (0.4, 0.95),
    "gemm_half_flop": (1e7, 1e11),
    "attention": (0.1, 1.0),
    "memory_efficiency": (0.3, 0.95),
    "fp8_efficiency_ratio": (0.3, 1.0),
}
Cases = list[tuple[dict[str, Any], float, str]]


def loss(cases: Cases, catalog: Catalog) -> float:
    """Mean over sources (the id's first word) of the mean |log error|: each source weighs the same."""
    per_source: dict[str, list[float]] = defaultdict(list)
    for case, measured, field in cases:
        error = abs(math.log(predict_training_case(case, field, catalog) / measured))
        per_source[str(case["id"]).split("_")[0]].append(error)
    return sum(sum(v) / len(v) for v in per_source.values()) / len(per_source)


def fit_family(
    family: str, cases: Cases, catalog: Catalog, table: dict[str, FamilyEfficiency], rounds: int, digits: int
) -> tuple[FamilyEfficiency, list[str], float, float]:
    """Fit one family in ``table`` (the cached table the estimates read, changed in place); returns the
    fitted entry, the parameters fitted, and the loss before and after (rounded values)."""
    current = table[family]
    before = best = loss(cases, catalog)
    fp8 = any(c.get("precision") == "fp8" for c, _, _ in cases)
    names = [name for name in PARAMETERS if name != "fp8_efficiency_ratio" or fp8]
    for _ in range(rounds):
        for name in names:
            low, high = PARAMETERS[name]
            value = getattr(current, name)
            for factor in (0.7, 0.85, 0.93, 0.97, 1.03, 1.07, 1.15, 1.4):
                trial = current.model_copy(update={name: min(max(value * factor, low), high)})
                table[family] = trial
                score = loss(cases, catalog)
                if score < best:
                    best, current = score, trial
            table[family] = current
    current = current.model_copy(update={n: float(f"{getattr(current, n):.{digits}g}") for n in names})
    table[family] = current
    return current, names, before, loss(cases, catalog)


def main(argv: list[str] | None = None) -> dict[str, FamilyEfficiency]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE, help="training.jsonl")
    parser.add_argument("--rounds", type=int, default=4, help="rounds of coordinate descent per family")
    parser.add_argument("--digits", type=int, default=3, help="significant digits written")
    parser.add_argument("--family", action="append", help="fit only this family (repeatable)")
    parser.add_argument("--write", action="store_true", help="write the fitted values into the efficiency file")
    parser.add_argument("--toml", type=Path, default=packaged_path(efficiency.PACKAGE, efficiency.FILE_NAME))
    args = parser.parse_args(argv)

    os.environ.pop(efficiency.ENV_VAR, None)  # the estimates read the table this script changes
    catalog = load_catalog(use_env=False)
    by_family: dict[str, Cases] = defaultdict(list)
    for line in args.file.read_text().splitlines():
        if not line.strip():
            continue
        case = json.loads(line)
        field = next(f for f in ("step_time_s", "tokens_per_s_per_device") if f in case["measured"])
        try:
            _, system, _, _ = case_inputs(case, catalog)
            predict_training_case(case, field, catalog)
        except ClusterSimError as exc:  # as clustersim validate does: skipped, and said so
            print(f"skipped {case['id']}: {exc}", file=sys.stderr)
            continue
        by_family[system.accelerator.family].append((case, case["measured"][field], field))

    table = efficiency.efficiency_table(use_env=False)  # the cached table the estimates read
    table.update({k: v for k, v in efficiency.efficiency_table([args.toml], use_env=False).items() if k in table})
    fitted: dict[str, FamilyEfficiency] = {}
    updates: dict[str, dict[str, float]] = {}
    notes: dict[str, str] = {}
    for family, cases in sorted(by_family.items()):
        if args.family and family not in args.family:
            continue
        entry, names, before, after = fit_family(family, cases, catalog, table, args.rounds, args.digits)
        fitted[family] = entry
        updates[family] = {name: getattr(entry, name) for name in names}
        notes[family] = (
            f"{datetime.date.today().isoformat()} by benchmarks/calibrate_training.py ({args.rounds} rounds): "
            f"mean over sources of the mean |log error| {before:.4f} -> {after:.4f} over {len(cases)} cases of "
            f"{args.file.name}"
        )
        print(f"{family}: {len(cases)} cases, mean |log error| {before:.4f} -> {after:.4f}")
        print("  " + ", ".join(f"{name} = {value:g}" for name, value in updates[family].items()))
    if by_family:  # one estimate, so the fit can be eyeballed
        first = next(iter(by_family.values()))[0][0]
        model, system, layout, job = case_inputs(first, catalog)
        print(f"example {first['id']}: {estimate_training(model, system, layout, job).step_s:.3f} s")
    if args.write:
        for family, values in updates.items():
            update_toml_file(args.toml, {family: values}, fitted=notes[family])
        print(f"wrote {args.toml}")
    return fitted


if __name__ == "__main__":
    main()
