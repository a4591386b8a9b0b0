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
import sys
from pathlib import Path

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.tomlfiles import packaged_path
from clustersim.compute import software
from clustersim.validation.calibrate import calibrate, summary_lines, write_calibration
from clustersim.validation.cases import default_paths, read_all
from clustersim.validation.software_spec import SOFTWARE


def main(argv: list[str] | None = None) -> dict[str, dict[str, float]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "files",
        nargs="*",
        type=Path,
        default=default_paths("training.jsonl"),
        help="training.jsonl files (default: bundled + project)",
    )
    parser.add_argument("--rounds", type=int, default=SOFTWARE.max_iterations, help="compass sweeps per framework")
    parser.add_argument("--digits", type=int, default=3, help="significant digits written")
    parser.add_argument("--framework", action="append", help="fit only this framework (repeatable)")
    parser.add_argument("--write", action="store_true", help="write the fitted values into the software file")
    parser.add_argument("--toml", type=Path, default=packaged_path(software.PACKAGE, software.FILE_NAME))
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
    for skipped in result.skipped:
        print(f"skipped {skipped.id}: {skipped.reason}", file=sys.stderr)
    print("\n".join(summary_lines(result)))
    if args.write:
        write_calibration(
            result,
            args.toml,
            f"benchmarks/calibrate_software.py ({args.rounds} rounds)",
            " + ".join(f.name for f in args.files),
        )
        print(f"wrote {args.toml}")
    fitted = result.fit.calibration
    return {g.group: {c.key: SOFTWARE.get(fitted, c) for c in g.constants} for g in result.fit.groups}


if __name__ == "__main__":
    main()
