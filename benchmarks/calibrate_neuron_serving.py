"""Fit the Neuron serving engines' shared constants on Trainium runs, and score each source left out.

The serving calibration (``calibration.toml``) is fitted on GPU runs of the reference engine; the Neuron
engines (``accelerator_families = ["trainium"]`` in ``engines.toml``) compile through neuronx-cc and run
on the Neuron runtime, so their constants come from Trainium runs only: their share of the reference's
compute efficiency (``kernel_efficiency``) and their fixed cost per step (``step_overhead_s``: launching a
compiled graph, on-device sampling, the host round trip). One set serves every Neuron profile (the same
compiler and runtime), fitted over every source of Trainium serving cases at once, so that each constant
is informed by at least two sources; the script prints the in-sample mean absolute percentage error of the
output token rate per source and per engine and chip, and for each source the error on it when the
constants are fitted on the other sources only; beside it, the TTFT and TPOT MAPE of each source's cases that
measure them, in sample and left out (scored, not fitted).

A grid search over ``CONSTANTS`` (9 points per axis), refined twice around the best point (numpy only).
It prints the values to write into ``engines.toml`` by hand (each Neuron profile's ``fitted`` note).

    .venv/bin/python benchmarks/calibrate_neuron_serving.py [FILES...]   # default: the bundled and project files
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engines import engine_for_software
from clustersim.validation.cases import Case, default_paths, read_all
from clustersim.validation.inference import case_estimate

CONSTANTS = (("kernel_efficiency", 0.2, 1.0), ("step_overhead_s", 0.0, 0.02))
"""The fitted constants of the Neuron profiles and the ranges searched. A third, the cost each all-reduce adds
beyond the collectives model (a Neuron ``sync_overhead_s``), went to zero in a three-constant fit (MAPE 10.3%
-> 9.8%, 2026-12-01): not identified by these cases, so the calibration's applies."""
POINTS = 9
FITTED_FIELD = "output_tokens_per_s"  # the fit's objective; TTFT and TPOT are scored beside it, never fitted
LATENCIES = ("ttft_s", "tpot_s")

Values = tuple[float, ...]
Predictor = Callable[[Values], float]


def neuron_cases(cases: Sequence[Case]) -> list[Case]:
    """The inference cases whose engine runs on Trainium and that state an output token rate."""
    out = []
    for case in cases:
        if case.kind != "inference" or not case.measured.get("output_tokens_per_s"):
            continue
        framework, version = (case.software.framework, case.software.version) if case.software else (None, None)
        try:
            engine = engine_for_software(framework, version)
        except ClusterSimError:  # a framework no profile serves is validate's to report
            continue
        if "trainium" in engine.accelerator_families:
            out.append(case)
    return out


def predictor(case: Case, field: str = FITTED_FIELD) -> Predictor:
    """The case's predicted ``field`` (output tokens/s, TTFT or TPOT) as a function of the ``CONSTANTS`` values."""
    catalog = load_catalog(use_env=False)
    base = engine_for_software(*((case.software.framework, case.software.version) if case.software else (None, None)))

    def predict(values: Values) -> float:
        profile = base.model_copy(update={name: v for (name, _, _), v in zip(CONSTANTS, values, strict=True)})
        return float(getattr(case_estimate(case, catalog, engine_override=profile), field))

    return predict


def engine_of(case: Case) -> str:
    """The name of the profile that serves the case."""
    framework, version = (case.software.framework, case.software.version) if case.software else (None, None)
    return engine_for_software(framework, version).name


def source_of(case: Case) -> str:
    """The source key: the first word of ``source``."""
    return case.source.split()[0]


def mape(cases: Sequence[Case], predictors: dict[str, Predictor], values: Values, field: str = FITTED_FIELD) -> float:
    """Mean absolute percentage error of ``field`` (the output token rate) over ``cases`` at ``values``."""
    return float(np.mean([abs(predictors[c.id](values) / c.measured[field] - 1.0) for c in cases]))


def latency_lines(own: Sequence[Case], values: Values, left_out: Values | None) -> list[str]:
    """Per latency field the cases measure: its MAPE at the fitted ``values`` and at ``left_out`` (the
    constants fitted without these cases' source)."""
    lines = []
    for field in LATENCIES:
        measured = [c for c in own if c.measured.get(field)]
        if not measured:
            continue
        predictors = {c.id: predictor(c, field) for c in measured}
        line = f"    {field}: {len(measured)} cases, in sample {100 * mape(measured, predictors, values, field):.1f}%"
        if left_out is not None:
            line += f"; left out {100 * mape(measured, predictors, left_out, field):.1f}%"
        lines.append(line)
    return lines


def fit(cases: Sequence[Case], predictors: dict[str, Predictor]) -> tuple[Values, float]:
    """(values, MAPE) minimizing the MAPE over ``cases``: a grid, refined twice around the best point."""
    ranges = [(low, high) for _, low, high in CONSTANTS]
    best: tuple[Values, float] = (tuple(low for low, _ in ranges), np.inf)
    for _ in range(3):
        for values in itertools.product(*(np.linspace(low, high, POINTS) for low, high in ranges)):
            point = tuple(float(v) for v in values)
            err = mape(cases, predictors, point)
            if err < best[1]:
                best = (point, err)
        steps = [(high - low) / (POINTS - 1) for low, high in ranges]
        ranges = [
            (max(low0, v - step), min(high0, v + step))
            for v, step, (_, low0, high0) in zip(best[0], steps, CONSTANTS, strict=True)
        ]
    return best


def held_out_rates(cases: Sequence[Case]) -> dict[str, float]:
    """Each case's output token rate predicted by the constants fitted on the other sources' cases only
    (none for a source with no other beside it): the Neuron fit's leave-one-source-out predictions."""
    predictors = {c.id: predictor(c) for c in cases}
    out: dict[str, float] = {}
    for source in sorted({source_of(c) for c in cases}):
        others = [c for c in cases if source_of(c) != source]
        if not others:
            continue
        values = fit(others, predictors)[0]
        out.update({c.id: predictors[c.id](values) for c in cases if source_of(c) == source})
    return out


def show(values: Values) -> str:
    return ", ".join(f"{name} {v:.3g}" for (name, _, _), v in zip(CONSTANTS, values, strict=True))


def main(argv: list[str] | None = None) -> Values:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="inference case files (default: the bundled and project ones)")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files] or default_paths("inference.jsonl")
    cases = neuron_cases(read_all(files))
    predictors = {c.id: predictor(c) for c in cases}
    sources = sorted({source_of(c) for c in cases})
    values, err = fit(cases, predictors)
    print(f"{len(cases)} Trainium serving cases from {len(sources)} sources: {', '.join(sources)}")
    print(f"fitted on all: {show(values)}; MAPE {100 * err:.1f}%")
    left_out: dict[str, Values] = {}
    for source in sources:
        own = [c for c in cases if source_of(c) == source]
        others = [c for c in cases if source_of(c) != source]
        line = f"  {source}: {len(own)} cases, in sample {100 * mape(own, predictors, values):.1f}%"
        if others:
            left_out[source] = fit(others, predictors)[0]
            line += f"; left out {100 * mape(own, predictors, left_out[source]):.1f}% (fitted on the others: "
            line += f"{show(left_out[source])})"
        print(line)
        print("\n".join(latency_lines(own, values, left_out.get(source))))
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((engine_of(case), (case.system.accelerator if case.system else None) or "?"), []).append(case)
    for (engine, chip), own in sorted(groups.items()):
        inside = mape(own, predictors, values)
        outside = float(np.mean([mape([c], predictors, left_out.get(source_of(c), values)) for c in own]))
        where = f"{engine} on {chip}: {len(own)} cases"
        print(f"  {where}, in sample {100 * inside:.1f}%, its source left out {100 * outside:.1f}%")
    for case in cases:
        print(f"  {100 * (predictors[case.id](values) / case.measured['output_tokens_per_s'] - 1):+6.1f}%  {case.id}")
    return values


if __name__ == "__main__":
    main()
