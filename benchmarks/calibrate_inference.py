"""Fit the serving model's few constants once, on every case of ../shared/validation/inference.jsonl.

Fits the achieved GEMM and attention fractions of the dense peak, the achieved HBM fraction and the
per-step and per-layer overheads (``InferenceCalibration``) by minimizing the mean absolute
percentage error with a Nelder-Mead search in log space (numpy only), then prints the constants,
the MAPE and the error per case. The fitted values are copied by hand into
``src/clustersim/job/inference.py``; nothing reads this script's output.

    .venv/bin/python benchmarks/calibrate_inference.py [path/to/inference.jsonl]
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engine import DEFAULT_CALIBRATION, InferenceCalibration
from clustersim.validation.inference import predict_inference_case
from clustersim.validation.run import primary_field, read_cases

GROUND_TRUTH = Path(__file__).resolve().parents[2] / "shared" / "validation" / "inference.jsonl"
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


def calibration(log_values: np.ndarray) -> InferenceCalibration:
    """The calibration with the fitted fields set from log values (clipped to their bounds)."""
    values = {name: float(np.clip(np.exp(v), *BOUNDS[name])) for name, v in zip(FITTED, log_values, strict=True)}
    return dataclasses.replace(DEFAULT_CALIBRATION, **values)  # type: ignore[arg-type]


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


def main(path: Path) -> None:
    catalog = load_catalog(use_env=False)
    cases = [(c.model_dump(), primary_field(c), c.measured[primary_field(c)]) for c in read_cases(path)]

    def errors(cal: InferenceCalibration) -> list[tuple[str, float]]:
        out = []
        for case, name, measured in cases:
            try:
                out.append((str(case["id"]), predict_inference_case(case, name, catalog, cal) / measured - 1))
            except ClusterSimError as exc:
                out.append((str(case["id"]), float("nan")))
                print(f"skipped {case['id']}: {exc}", file=sys.stderr)
        return out

    def mape(log_values: np.ndarray) -> float:
        errs = [abs(e) for _, e in errors(calibration(log_values))]
        return float(np.mean(errs)) if all(np.isfinite(errs)) else 1e9

    x0 = np.log([getattr(DEFAULT_CALIBRATION, name) for name in FITTED])
    print(f"MAPE with the current constants: {100 * mape(x0):.2f}%")
    best = nelder_mead(mape, x0)
    fitted = calibration(best)
    for name in FITTED:
        print(f"{name} = {getattr(fitted, name):.4g}")
    result = errors(fitted)
    print(f"MAPE fitted: {100 * np.mean([abs(e) for _, e in result]):.2f}% over {len(result)} cases")
    for case_id, err in sorted(result, key=lambda r: -abs(r[1])):
        print(f"  {100 * err:+6.1f}%  {case_id}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else GROUND_TRUTH)
