"""Fit the serving model's few constants once, on every case of the bundled (and project) inference.jsonl.

A thin wrapper over ``clustersim.validation`` (spec ``specs.INFERENCE``): fits the achieved GEMM and
attention fractions of the dense peak and the per-step, per-all-reduce and per-sequence overheads
(``InferenceCalibration``), minus those the calibration file marks ``prior``, by minimizing the mean
absolute percentage error with a Nelder-Mead search in log space within physical bounds (numpy only),
starting from the values in the calibration file; prints the constants, the MAPE and the constants
whose profile is flat. With ``--write`` the fitted values (to ``--digits`` significant digits) go into
the calibration file (``src/clustersim/serving/calibration.toml``, or ``--toml``) with a ``fitted``
note, the case ids they were fitted on (``fitted_on``) and the residual; every ``source`` and
``prior`` stays as it was.

    .venv/bin/python benchmarks/calibrate_inference.py [path/to/inference.jsonl] [--steps 300] [--write]
"""

from __future__ import annotations

import argparse

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.serving.engine import CALIBRATION_FILE, InferenceCalibration, serving_calibration
from clustersim.validation.calibrate import add_script_arguments, calibrate, report
from clustersim.validation.cases import read_all
from clustersim.validation.specs import INFERENCE

TOML = packaged_path("clustersim.serving", CALIBRATION_FILE)


def main(argv: list[str] | None = None) -> InferenceCalibration:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_script_arguments(parser, "inference.jsonl", TOML)
    parser.add_argument("--steps", type=int, default=INFERENCE.max_iterations, help="Nelder-Mead iterations")
    parser.add_argument(
        "--profile-iterations",
        type=int,
        default=0,
        help="refit the other constants at each profile point with this many iterations (finds ridges; slower)",
    )
    args = parser.parse_args(argv)

    catalog = load_catalog(use_env=False)
    start = serving_calibration([args.toml], use_env=False)
    result = calibrate(
        INFERENCE,
        read_all(args.files),
        catalog,
        start,
        args.toml,
        max_iterations=args.steps,
        digits=args.digits,
        profile_iterations=args.profile_iterations,
    )
    report(
        result,
        args.files,
        args.toml,
        how=f"benchmarks/calibrate_inference.py (Nelder-Mead, {args.steps} steps)",
        write=args.write,
    )
    for prepared in sorted(result.cases, key=lambda p: -abs(p.predict(result.fit.calibration) / p.measured - 1)):
        print(
            f"  {100 * (prepared.predict(result.fit.calibration) / prepared.measured - 1):+6.1f}%  {prepared.case.id}"
        )
    return result.fit.calibration


if __name__ == "__main__":
    main()
