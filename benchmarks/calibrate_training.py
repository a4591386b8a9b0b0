"""Fit the per-family compute efficiencies to the training ground truth, once; print them, or write them.

Usage: ``python benchmarks/calibrate_training.py [FILE.jsonl ...] [--rounds 40] [--write]`` (default files: the
bundled and the project training.jsonl)

A thin wrapper over ``clustersim.validation`` (spec ``specs.TRAINING``): for each accelerator family,
a compass search in log space (``--rounds``: its sweeps) within physical bounds minimizes the mean
over sources of the mean |log(predicted / measured)| of that family's cases (each source weighs the
same; never per case), starting from the values in the efficiency file and leaving the fields it
marks ``prior`` as they are. Prints the fit and the constants whose profile is flat. With
``--write`` the fitted values (to ``--digits`` significant digits) go into
``src/clustersim/compute/efficiency.toml`` (or ``--toml``) with, per family, a ``fitted`` note, the
case ids it was fitted on (``fitted_on``) and the residual; every ``source``, every ``prior`` and
every family not fitted stay as they were.
"""

from __future__ import annotations

import argparse

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.compute import efficiency
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.validation.calibrate import add_script_arguments, calibrate, report
from clustersim.validation.cases import read_all
from clustersim.validation.specs import TRAINING

TOML = packaged_path(efficiency.PACKAGE, efficiency.FILE_NAME)


def main(argv: list[str] | None = None) -> dict[str, FamilyEfficiency]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_script_arguments(parser, "training.jsonl", TOML)
    parser.add_argument("--rounds", type=int, default=TRAINING.max_iterations, help="compass sweeps per family")
    parser.add_argument(
        "--profile-iterations",
        type=int,
        default=0,
        help="refit the other constants at each profile point with this many iterations (finds ridges; slower)",
    )
    parser.add_argument("--family", action="append", help="fit only this family (repeatable)")
    args = parser.parse_args(argv)

    catalog = load_catalog(use_env=False)
    start = efficiency.efficiency_table([args.toml], use_env=False)
    result = calibrate(
        TRAINING,
        read_all(args.files),
        catalog,
        start,
        args.toml,
        max_iterations=args.rounds,
        digits=args.digits,
        only_groups=args.family,
        profile_iterations=args.profile_iterations,
    )
    report(
        result, args.files, args.toml, how=f"benchmarks/calibrate_training.py ({args.rounds} rounds)", write=args.write
    )
    return {g.group: result.fit.calibration[g.group] for g in result.fit.groups}


if __name__ == "__main__":
    main()
