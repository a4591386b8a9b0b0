"""Fit the serving model's few constants once, on every case of ../shared/validation/inference.jsonl.

Fits the achieved GEMM and attention fractions of the dense peak and the per-step, per-all-reduce
and per-sequence overheads (``InferenceCalibration``) by minimizing the mean absolute percentage
error with a Nelder-Mead search in log space (numpy only), starting from the values in the
calibration file; prints the constants, the MAPE and the error per case. With ``--write`` the fitted
values (to ``--digits`` significant digits) go into the calibration file
(``src/clustersim/serving/calibration.toml``, or ``--toml``) with a ``fitted`` note; every ``source``
stays as it was.

    .venv/bin/python benchmarks/calibrate_inference.py [path/to/inference.jsonl] [--steps 600] [--write]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path, update_toml_file
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import CALIBRATION_FILE, InferenceCalibration, serving_calibration
from clustersim.validation.inference import predict_inference_case

GROUND_TRUTH = Path(__file__).resolve().parents[2] / "shared" / "validation" / "inference.jsonl"
FIELD = "output_tokens_per_s"
FITTED = (
    "flop_efficiency",
    "attention_flop_efficiency",
    "step_overhead_s",
    "sync_overhead_s",
    "sequence_overhead_s",
)
BOUNDS = {
    "flop_efficiency": (0.2, 0.95),
    "attention_flop_efficiency": (0.1, 0.9),
    "step_overhead_s": (1e-5, 2e-2),
    "sync_overhead_s": (1e-7, 5e-4),
    "sequence_overhead_s": (1e-8, 1e-4),
}


def calibration(start: InferenceCalibration, log_values: np.ndarray) -> InferenceCalibration:
    """``start`` with the fitted fields set from log values (clipped to their bounds)."""
    values = {name: float(np.clip(np.exp(v), *BOUNDS[name])) for name, v in zip(FITTED, log_values, strict=True)}
    return dataclasses.replace(start, **values)


def nelder_mead(f: Callable[[np.ndarray], float], x0: np.ndarray, steps: int = 600) -> np.ndarray:
    """Minimize ``f`` from ``x0`` (standard coefficients, initial simplex of 0.2 per coordinate)."""
    simplex = [x0] + [x0 + 0.2 * np.eye(len(x0))[i] for i in range(len(x0))]
    scores = [f(x) for x in simplex]
    for _ in range(steps):
        order = np.argsort(scores)
        simplex = [simplex[i] for i in order]
        scores = [scores[i] for i in order]
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        r = f(reflected)
        if r < scores[0]:
            expanded = centroid + 2.0 * (centroid - simplex[-1])
            e = f(expanded)
            simplex[-1], scores[-1] = (expanded, e) if e < r else (reflected, r)
        elif r < scores[-2]:
            simplex[-1], scores[-1] = reflected, r
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            c = f(contracted)
            if c < scores[-1]:
                simplex[-1], scores[-1] = contracted, c
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                scores = [f(x) for x in simplex]
    return simplex[int(np.argmin(scores))]


def main(argv: list[str] | None = None) -> InferenceCalibration:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=GROUND_TRUTH, help="inference.jsonl")
    parser.add_argument("--steps", type=int, default=600, help="Nelder-Mead iterations")
    parser.add_argument("--digits", type=int, default=3, help="significant digits written")
    parser.add_argument("--write", action="store_true", help="write the fitted values into the calibration file")
    parser.add_argument("--toml", type=Path, default=packaged_path("clustersim.serving", CALIBRATION_FILE))
    args = parser.parse_args(argv)

    catalog = load_catalog(use_env=False)
    lines = args.file.read_text().splitlines()
    cases: list[dict[str, Any]] = [c for c in map(json.loads, filter(str.strip, lines)) if c.get("kind") == "inference"]
    start = serving_calibration([args.toml], use_env=False)

    def errors(cal: InferenceCalibration) -> list[tuple[str, float]]:
        out = []
        for case in cases:
            try:
                predicted = predict_inference_case(case, FIELD, catalog, cal)
                out.append((str(case["id"]), predicted / case["measured"][FIELD] - 1))
            except ClusterSimError as exc:
                out.append((str(case["id"]), float("nan")))
                print(f"skipped {case['id']}: {exc}", file=sys.stderr)
        return out

    def mape(cal: InferenceCalibration) -> float:
        errs = [abs(e) for _, e in errors(cal)]
        return float(np.mean(errs)) if all(np.isfinite(errs)) else 1e9

    x0 = np.log([getattr(start, name) for name in FITTED])
    before = mape(start)
    print(f"MAPE with the current constants: {100 * before:.2f}%")
    best = calibration(start, nelder_mead(lambda x: mape(calibration(start, x)), x0, args.steps))
    fitted = dataclasses.replace(best, **{name: float(f"{getattr(best, name):.{args.digits}g}") for name in FITTED})
    for name in FITTED:
        print(f"{name} = {getattr(fitted, name):g}")
    result = errors(fitted)
    after = float(np.mean([abs(e) for _, e in result]))
    print(f"MAPE fitted: {100 * after:.2f}% over {len(result)} cases")
    for case_id, err in sorted(result, key=lambda r: -abs(r[1])):
        print(f"  {100 * err:+6.1f}%  {case_id}")
    if args.write:
        note = (
            f"{datetime.date.today().isoformat()} by benchmarks/calibrate_inference.py (Nelder-Mead, {args.steps} "
            f"steps): MAPE {100 * before:.2f}% -> {100 * after:.2f}% over the {len(result)} cases of {args.file.name}"
        )
        update_toml_file(args.toml, {name: {"value": getattr(fitted, name)} for name in FITTED}, fitted=note)
        print(f"wrote {args.toml}")
    return fitted


if __name__ == "__main__":
    main()
