"""Fit the collective model's few parameters to measured busbw (../shared/validation/collectives.jsonl).

Coordinate descent from the values in the calibration file on the fitted entries (the network
efficiency, the ramp exponent, and the ramp time constant and its node-count growth per op family);
objective: mean absolute log error of busbw over the cases of at least 32 MiB (NCCL's small-message
regime is latency, not this ramp). Fitted once, never per case. Prints the values and the error;
with ``--write`` the fitted values (to ``--digits`` significant digits) go into the calibration file
(``src/clustersim/network/calibration.toml``, or ``--toml``) with a ``fitted`` note; every ``source``
stays as it was.

    .venv/bin/python benchmarks/calibrate_collectives.py [FILE] [--rounds 6] [--write] [--toml PATH]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog, load_catalog
from clustersim.catalog.tomlfiles import packaged_path, update_toml_file
from clustersim.network.analytic import CALIBRATION_FILE, CommCalibration, collective_calibration
from clustersim.validation.collective import predict_collective_case

DEFAULT_FILE = Path(__file__).resolve().parents[2] / "shared" / "validation" / "collectives.jsonl"
MIN_SIZE_BYTES = 32 * 2**20
FAMILIES = ("reduce", "gather", "alltoall")
FITTED = (
    "network_efficiency",
    "ramp_exponent",
    *(f"{entry}.{family}" for entry in ("ramp_s", "ramp_node_exponent") for family in FAMILIES),
)


def objective(cal: CommCalibration, cases: list[dict[str, Any]], catalog: Catalog) -> float:
    """Mean |log(predicted / measured)| of busbw."""
    errors = [
        abs(math.log(predict_collective_case(c, "busbw_GBps", catalog, cal) / c["measured"]["busbw_GBps"]))
        for c in cases
    ]
    return sum(errors) / len(errors)


def get(cal: CommCalibration, name: str) -> float:
    """The value of a fitted parameter (``entry`` or ``entry.family``)."""
    entry, _, family = name.partition(".")
    value = getattr(cal, entry)
    return float(value[family] if family else value)


def with_value(cal: CommCalibration, name: str, value: float) -> CommCalibration:
    """``cal`` with one fitted parameter changed (validated: ``ValueError`` when out of range)."""
    entry, _, family = name.partition(".")
    if family:
        return dataclasses.replace(cal, **{entry: dataclasses.replace(getattr(cal, entry), **{family: value})})
    return dataclasses.replace(cal, **{entry: value})


def fit(start: CommCalibration, cases: list[dict[str, Any]], catalog: Catalog, rounds: int = 6) -> CommCalibration:
    """Coordinate descent: each parameter in turn tries steps of 40%, 20%, 10%, 5% and 2.5% either way."""
    cal, best = start, objective(start, cases, catalog)
    for _ in range(rounds):
        for name in FITTED:
            value = get(cal, name)
            step = 0.1 * abs(value) if value else 0.05
            for scale in (4.0, 2.0, 1.0, 0.5, 0.25):
                for sign in (1, -1):
                    try:
                        trial = with_value(cal, name, value + sign * scale * step)
                    except ValueError:  # outside the entry's valid range
                        continue
                    score = objective(trial, cases, catalog)
                    if score < best:
                        cal, best, value = trial, score, get(trial, name)
    return cal


def rounded(cal: CommCalibration, digits: int) -> CommCalibration:
    """``cal`` with every fitted parameter rounded to ``digits`` significant digits."""
    for name in FITTED:
        cal = with_value(cal, name, float(f"{get(cal, name):.{digits}g}"))
    return cal


def updates(cal: CommCalibration) -> dict[str, dict[str, float]]:
    """The fitted entries as the calibration file holds them."""
    out: dict[str, dict[str, float]] = {}
    for name in FITTED:
        entry, _, family = name.partition(".")
        out.setdefault(entry, {})[family or "value"] = get(cal, name)
    return out


def main(argv: list[str] | None = None) -> CommCalibration:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("file", nargs="?", type=Path, default=DEFAULT_FILE, help="collectives.jsonl")
    parser.add_argument("--rounds", type=int, default=6, help="rounds of coordinate descent")
    parser.add_argument("--digits", type=int, default=3, help="significant digits written")
    parser.add_argument("--write", action="store_true", help="write the fitted values into the calibration file")
    parser.add_argument("--toml", type=Path, default=packaged_path("clustersim.network", CALIBRATION_FILE))
    args = parser.parse_args(argv)

    catalog = load_catalog(use_env=False)
    cases = [json.loads(line) for line in args.file.read_text().splitlines() if line.strip()]
    cases = [c for c in cases if c.get("kind") == "collective" and c["size_bytes"] >= MIN_SIZE_BYTES]
    start = collective_calibration([args.toml], use_env=False)
    before = objective(start, cases, catalog)
    print(f"{len(cases)} cases >= {MIN_SIZE_BYTES} bytes; mean |log error| before: {before:.4f}")
    cal = rounded(fit(start, cases, catalog, args.rounds), args.digits)
    after = objective(cal, cases, catalog)
    print(f"after: {after:.4f}")
    for entry, fields in updates(cal).items():
        print(f"  {entry}: {', '.join(f'{k} = {v:g}' for k, v in fields.items())}")
    if args.write:
        note = (
            f"{datetime.date.today().isoformat()} by benchmarks/calibrate_collectives.py ({args.rounds} rounds): "
            f"mean |log error| of busbw {before:.4f} -> {after:.4f} over the {len(cases)} cases of at least "
            f"32 MiB in {args.file.name}"
        )
        update_toml_file(args.toml, updates(cal), fitted=note)
        print(f"wrote {args.toml}")
    return cal


if __name__ == "__main__":
    main()
