"""Fit the Neuron serving engines' two shared constants on Trainium runs, and score each source left out.

The serving calibration (``calibration.toml``) is fitted on GPU runs of the reference engine; the Neuron
engines (``accelerator_families = ["trainium"]`` in ``engines.toml``) compile through neuronx-cc and run
on the Neuron runtime, so their share of the reference's compute efficiency (``kernel_efficiency``) and
their fixed cost per step (``step_overhead_s``: launching a compiled graph, on-device sampling, the host
round trip) come from Trainium runs only. One pair serves all four Neuron profiles (the same compiler and
runtime), fitted over every source of Trainium serving cases at once, so that each constant is informed
by at least two sources; the script prints the in-sample mean absolute percentage error of the output
token rate per source and, for each source, the error on it when the pair is fitted on the others only.

A grid search in (kernel_efficiency, step_overhead_s), refined twice around the best point (numpy only).
It prints the values to write into ``engines.toml`` by hand (each Neuron profile's ``fitted`` note).

    .venv/bin/python benchmarks/calibrate_neuron_serving.py [FILES...]   # default: the bundled and project files
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.engines import engine_for_software
from clustersim.validation.cases import Case, default_paths, read_all
from clustersim.validation.inference import case_estimate


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


def predictor(case: Case) -> Callable[[float, float], float]:
    """The case's predicted output tokens/s as a function of (kernel_efficiency, step_overhead_s)."""
    catalog = load_catalog(use_env=False)
    software = case.software
    base = engine_for_software(software.framework if software else None, software.version if software else None)

    def predict(kernel_efficiency: float, step_overhead_s: float) -> float:
        profile = base.model_copy(update={"kernel_efficiency": kernel_efficiency, "step_overhead_s": step_overhead_s})
        return case_estimate(case, catalog, engine_override=profile).output_tokens_per_s

    return predict


def engine_of(case: Case) -> str:
    """The name of the profile that serves the case."""
    framework, version = (case.software.framework, case.software.version) if case.software else (None, None)
    return engine_for_software(framework, version).name


def source_of(case: Case) -> str:
    """The source key: the first word of ``source``."""
    return case.source.split()[0]


def mape(cases: Sequence[Case], predictors: dict[str, Callable[[float, float], float]], k: float, s: float) -> float:
    """Mean absolute percentage error of the output token rate over ``cases`` at (k, s)."""
    return float(np.mean([abs(predictors[c.id](k, s) / c.measured["output_tokens_per_s"] - 1.0) for c in cases]))


def fit(cases: Sequence[Case], predictors: dict[str, Callable[[float, float], float]]) -> tuple[float, float, float]:
    """(kernel_efficiency, step_overhead_s, MAPE) minimizing the MAPE over ``cases``: a grid, refined twice."""
    k_lo, k_hi, s_lo, s_hi = 0.2, 1.0, 0.0, 0.02
    best = (1.0, 0.0, np.inf)
    for _ in range(3):
        for k in np.linspace(k_lo, k_hi, 9):
            for s in np.linspace(s_lo, s_hi, 9):
                err = mape(cases, predictors, float(k), float(s))
                if err < best[2]:
                    best = (float(k), float(s), err)
        k_step, s_step = (k_hi - k_lo) / 8, (s_hi - s_lo) / 8
        k_lo, k_hi = max(0.05, best[0] - k_step), min(1.0, best[0] + k_step)
        s_lo, s_hi = max(0.0, best[1] - s_step), best[1] + s_step
    return best


def main(argv: list[str] | None = None) -> tuple[float, float]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", help="inference case files (default: the bundled and project ones)")
    args = parser.parse_args(argv)
    files = [Path(f) for f in args.files] or default_paths("inference.jsonl")
    cases = neuron_cases(read_all(files))
    predictors = {c.id: predictor(c) for c in cases}
    sources = sorted({source_of(c) for c in cases})
    k, s, err = fit(cases, predictors)
    print(f"{len(cases)} Trainium serving cases from {len(sources)} sources: {', '.join(sources)}")
    print(f"fitted on all: kernel_efficiency = {k:.3g}, step_overhead_s = {s:.3g}; MAPE {100 * err:.1f}%")
    for source in sources:
        own = [c for c in cases if source_of(c) == source]
        others = [c for c in cases if source_of(c) != source]
        inside = mape(own, predictors, k, s)
        line = f"  {source}: {len(own)} cases, in sample {100 * inside:.1f}%"
        if others:
            ko, so, _ = fit(others, predictors)
            left = mape(own, predictors, ko, so)
            line += f"; left out {100 * left:.1f}% (fitted on the others: {ko:.3g}, {so:.3g} s)"
        print(line)
    left_out = {source: fit([c for c in cases if source_of(c) != source], predictors)[:2] for source in sources}
    groups: dict[tuple[str, str], list[Case]] = {}
    for case in cases:
        groups.setdefault((engine_of(case), case.system.accelerator if case.system else "?"), []).append(case)
    for (engine, chip), own in sorted(groups.items()):
        inside = mape(own, predictors, k, s)
        outside = float(np.mean([mape([c], predictors, *left_out[source_of(c)]) for c in own]))
        where = f"{engine} on {chip}: {len(own)} cases"
        print(f"  {where}, in sample {100 * inside:.1f}%, its source left out {100 * outside:.1f}%")
    for case in cases:
        print(f"  {100 * (predictors[case.id](k, s) / case.measured['output_tokens_per_s'] - 1):+6.1f}%  {case.id}")
    return k, s


if __name__ == "__main__":
    main()
