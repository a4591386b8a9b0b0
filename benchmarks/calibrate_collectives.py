"""Fit the collective model's few parameters to measured busbw (the bundled and project collectives.jsonl).

A thin wrapper over ``clustersim.validation`` (spec ``specs.COLLECTIVE``): a compass search in log
space (``--rounds``: its sweeps) within physical bounds, from the values in the calibration file, on
the fitted entries (the network efficiency, the ramp exponent, and the ramp's half size and its
node-count growth per op family) minus those the file marks ``prior``; objective: the mean over
sources of the mean absolute log error of busbw over the cases of at least 1 MiB (below, NCCL's
small messages are latency, not this ramp). Fitted once, never per case. Prints the values, the
error and the constants whose profile is flat; with ``--write`` the fitted values (to ``--digits``
significant digits) go into the calibration file (``src/clustersim/network/calibration.toml``, or
``--toml``) with a ``fitted`` note, the case ids they were fitted on (``fitted_on``) and the
residual; every ``source`` and ``prior`` stays as it was. The sources in ``--hold-out`` (default:
CoreWeave's GB200 NVL72 runs, which judge the NVL72 model of ``clustersim.network.nvls`` out of sample)
are left out of the fit.

    .venv/bin/python benchmarks/calibrate_collectives.py [FILE] [--rounds 40] [--write] [--toml PATH]
"""

from __future__ import annotations

import argparse

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.network.analytic import CALIBRATION_FILE, CommCalibration, collective_calibration
from clustersim.validation.calibrate import add_script_arguments, calibrate, report
from clustersim.validation.cases import read_all, source_key
from clustersim.validation.specs import COLLECTIVE

TOML = packaged_path("clustersim.network", CALIBRATION_FILE)
# Sources no refit uses: CoreWeave's GB200 NVL72 sweeps judge the NVLS / NVLS-tree model out of sample.
HELD_OUT = ("coreweave/nccl-tests",)


def main(argv: list[str] | None = None) -> CommCalibration:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_script_arguments(parser, "collectives.jsonl", TOML)
    parser.add_argument("--rounds", type=int, default=COLLECTIVE.max_iterations, help="compass sweeps")
    parser.add_argument(
        "--profile-iterations",
        type=int,
        default=0,
        help="refit the other constants at each profile point with this many iterations (finds ridges; slower)",
    )
    parser.add_argument(
        "--hold-out",
        action="append",
        metavar="SOURCE",
        help=f"a source key left out of the fit (repeatable; default: {', '.join(HELD_OUT)}; 'none' for none)",
    )
    args = parser.parse_args(argv)
    held = set(HELD_OUT if args.hold_out is None else args.hold_out) - {"none"}

    catalog = load_catalog(use_env=False)
    start = collective_calibration([args.toml], use_env=False)
    result = calibrate(
        COLLECTIVE,
        [case for case in read_all(args.files) if source_key(case.source) not in held],
        catalog,
        start,
        args.toml,
        max_iterations=args.rounds,
        digits=args.digits,
        profile_iterations=args.profile_iterations,
    )
    report(
        result,
        args.files,
        args.toml,
        how=f"benchmarks/calibrate_collectives.py ({args.rounds} rounds)",
        write=args.write,
    )
    return result.fit.calibration


if __name__ == "__main__":
    main()
