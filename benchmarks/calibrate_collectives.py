"""Fit the collective model's few parameters to measured busbw (../shared/validation/collectives.jsonl).

Prints the fitted CommCalibration and its error; the values are then written into
``clustersim/comm/model.py`` by hand (fitted once, never per case). Objective: mean absolute log
error over cases of at least 32 MiB (NCCL's small-message regime is latency, not this ramp).
Run: ``python benchmarks/calibrate_collectives.py [FILE]``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from pathlib import Path

from clustersim.catalog.registry import load_catalog
from clustersim.network.analytic import DEFAULT_CALIBRATION, CommCalibration
from clustersim.validation.collective import predict_collective_case

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "validation" / "collectives.jsonl"
MIN_SIZE_BYTES = 32 * 2**20


def objective(cal: CommCalibration, cases: list[dict], catalog) -> float:
    errors = [
        abs(math.log(predict_collective_case(c, "busbw_GBps", catalog, cal) / c["measured"]["busbw_GBps"]))
        for c in cases
    ]
    return sum(errors) / len(errors)


def _with(cal: CommCalibration, name: str, value: float) -> CommCalibration:
    if "." in name:
        attr, key = name.split(".")
        table = dict(getattr(cal, attr))
        table[key] = value
        return dataclasses.replace(cal, **{attr: table})
    return dataclasses.replace(cal, **{name: value})


def _get(cal: CommCalibration, name: str) -> float:
    if "." in name:
        attr, key = name.split(".")
        return float(getattr(cal, attr)[key])
    return float(getattr(cal, name))


def fit(cases: list[dict], catalog, rounds: int = 6) -> CommCalibration:
    names = ["network_efficiency", "ramp_exponent"] + [
        f"{attr}.{family}" for attr in ("ramp_s", "ramp_node_exponent") for family in ("reduce", "gather", "alltoall")
    ]
    cal, best = DEFAULT_CALIBRATION, objective(DEFAULT_CALIBRATION, cases, catalog)
    for _ in range(rounds):
        for name in names:
            value = _get(cal, name)
            step = 0.1 * abs(value) if value else 0.05
            for scale in (4.0, 2.0, 1.0, 0.5, 0.25):
                for sign in (1, -1):
                    trial_value = value + sign * scale * step
                    if trial_value < 0 or (name == "network_efficiency" and trial_value > 1):
                        continue
                    trial = _with(cal, name, trial_value)
                    score = objective(trial, cases, catalog)
                    if score < best:
                        cal, best, value = trial, score, trial_value
    return cal


def main() -> None:
    path = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_FILE
    catalog = load_catalog()
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("kind") == "collective" and c["size_bytes"] >= MIN_SIZE_BYTES]
    print(f"{len(cases)} cases >= {MIN_SIZE_BYTES} bytes; before: {objective(DEFAULT_CALIBRATION, cases, catalog):.4f}")
    cal = fit(cases, catalog)
    print(f"after: {objective(cal, cases, catalog):.4f}")
    print(cal)


if __name__ == "__main__":
    main()
