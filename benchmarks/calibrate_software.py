"""Fit the software profiles' fitted constants to the training ground truth, once; print them, or write them.

Usage: ``python benchmarks/calibrate_software.py [FILE.jsonl ...] [--rounds 20]
[--framework fsdp] [--write]``

A thin wrapper over ``clustersim.validation`` (spec ``software_spec.SOFTWARE``): for each profile of
``src/clustersim/compute/software.toml`` that says it was fitted (or each ``--framework``), a compass
search in log space within physical bounds fits ``kernel_efficiency``, ``layer_overhead_s`` and
``step_overhead_s`` (less those the profile marks ``prior``) to its framework's cases, the
hardware's fractions held as ``compute/efficiency.toml`` gives them. Prints the fit and the flat
constants; with ``--write`` the values go into the software file with their manifest (``fitted_on``,
``residual``) and a ``fitted`` note; every ``source``, ``prior`` and other profile stays as it was.
"""

from __future__ import annotations

import argparse

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.compute import software
from clustersim.validation.calibrate import add_script_arguments, calibrate, report
from clustersim.validation.cases import read_all
from clustersim.validation.software_spec import SOFTWARE

TOML = packaged_path(software.PACKAGE, software.FILE_NAME)


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_script_arguments(parser, "training.jsonl", TOML)
    parser.add_argument("--rounds", type=int, default=SOFTWARE.max_iterations, help="compass sweeps per framework")
    parser.add_argument("--framework", action="append", help="fit only this framework (repeatable)")
    args = parser.parse_args(argv)

    catalog = load_catalog(use_env=False)
    start = software.software_profiles([args.toml], use_env=False)
    result = calibrate(
        SOFTWARE,
        read_all(args.files),
        catalog,
        start,
        args.toml,
        max_iterations=args.rounds,
        digits=args.digits,
        only_groups=args.framework,
    )
    report(
        result, args.files, args.toml, how=f"benchmarks/calibrate_software.py ({args.rounds} rounds)", write=args.write
    )
    fitted = result.fit.calibration
    return {g.group: {c.key: SOFTWARE.get(fitted, c) for c in g.constants} for g in result.fit.groups}


if __name__ == "__main__":
    main()
