"""Start-up time of the command line: ``clustersim --help`` and ``clustersim train --help`` against a
bare ``python -c pass``, each in a fresh process; and what a fresh ``plan``, ``train`` or ``explain`` reads
before it computes anything (the catalog, the software profiles, the efficiencies and the interval residuals),
with the parsed TOML files read back from their cache (``catalog.toml_cache``) and parsed anew
(``CLUSTERSIM_CACHE_DIR`` empty).

Runs the three commands interleaved (so a busy moment of the machine hits all three alike), ``--runs``
times each (15 by default) after one warm-up round, and prints the median wall time of each and the
difference to ``python -c pass``. The target: each ``--help`` costs at most 0.25 s more than
``python -c pass`` (the data loads are reported, not held to it). Run: ``python benchmarks/bench_startup.py
[--runs N]``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

TARGET_S = 0.25
ENTRY = "import sys; from clustersim.cli.app import main; sys.argv[0] = 'clustersim'; main()"
LOAD = (
    "from clustersim.catalog.registry import load_catalog; from clustersim.compute.software import software_profiles; "
    "from clustersim.compute.efficiency import efficiency_table; from clustersim.intervals import load_residuals; "
    "load_catalog(); software_profiles(); efficiency_table(); load_residuals()"
)
COMMANDS: dict[str, list[str]] = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "clustersim --help": [sys.executable, "-c", ENTRY, "--help"],
    "clustersim train --help": [sys.executable, "-c", ENTRY, "train", "--help"],
    "data loaded (TOML cached)": [sys.executable, "-c", LOAD],
    "data loaded (TOML parsed)": ["env", "CLUSTERSIM_CACHE_DIR=", sys.executable, "-c", LOAD],
}
HELP = ("clustersim --help", "clustersim train --help")  # what the target holds


def wall_s(command: list[str]) -> float:
    """Seconds one run of ``command`` takes, start to exit."""
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def medians(runs: int) -> dict[str, float]:
    """The median wall time of each command over ``runs`` interleaved rounds (after one warm-up round)."""
    for command in COMMANDS.values():
        wall_s(command)
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(runs):
        for name, command in COMMANDS.items():
            times[name].append(wall_s(command))
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="Runs of each command (default 15).")
    args = parser.parse_args()
    found = medians(args.runs)
    bare = found["python -c pass"]
    print(f"median wall time over {args.runs} interleaved runs (target: at most {TARGET_S:.2f} s over python -c pass)")
    for name, seconds in found.items():
        extra = "" if name == "python -c pass" else f"  (+{seconds - bare:.3f} s)"
        print(f"  {name:<26} {seconds:.3f} s{extra}")
    worst = max(found[name] - bare for name in HELP)
    print(f"worst difference: {worst:.3f} s: {'within' if worst <= TARGET_S else 'OVER'} the target")


if __name__ == "__main__":
    main()
