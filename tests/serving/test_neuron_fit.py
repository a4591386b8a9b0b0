"""The Neuron constants in engines.toml are the optimum of benchmarks/calibrate_neuron_serving.py's objective (the
mean over sources of the mean |log error| of the output token rate and the TTFT), the same in every Neuron profile,
and the objective their fitted note records."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

import pytest

from clustersim.serving.engines import engine_profiles
from clustersim.validation.cases import default_paths, read_all


def _script() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "calibrate_neuron_serving.py"
    spec = importlib.util.spec_from_file_location("calibrate_neuron_serving", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


FIT = _script()
CASES = FIT.neuron_cases(read_all(default_paths("inference.jsonl")))
PREDICTORS = {c.id: FIT.predictor(c) for c in CASES}
PACKAGED = FIT.packaged_values(CASES[0])


def test_every_neuron_profile_carries_the_same_constants() -> None:
    neuron = [p for p in engine_profiles(use_env=False).values() if "trainium" in p.accelerator_families]
    assert len(neuron) >= 5 and {FIT.packaged_values(c) for c in CASES} == {PACKAGED}
    assert len({(p.kernel_efficiency, tuple(p.kernel_efficiency_on.items()), p.gemm_half_tokens) for p in neuron}) == 1
    # one fit: its record is vllm-neuron's `fitted`, each other profile's points there
    notes = {p.name: p.fitted or "" for p in neuron}
    assert "calibrate_neuron_serving.py" in notes["vllm-neuron"]
    assert all(note == notes["vllm-neuron"] or "the vllm-neuron profile's fitted" in note for note in notes.values())


def test_the_recorded_objective_is_the_packaged_ones() -> None:
    fitted = next(p.fitted for p in engine_profiles(use_env=False).values() if p.name == "vllm-neuron") or ""
    recorded = float(re.search(r"-> ([\d.]+)\. MAPE", fitted).group(1))  # type: ignore[union-attr]
    assert FIT.objective(CASES, PREDICTORS, PACKAGED) == pytest.approx(recorded, abs=6e-4)


def test_the_packaged_constants_are_the_objectives_optimum_along_each_axis() -> None:
    best = FIT.objective(CASES, PREDICTORS, PACKAGED)
    for axis, (_, low, high) in enumerate(FIT.CONSTANTS):
        for factor in (0.9, 1.1):
            moved = list(PACKAGED)
            moved[axis] = min(max(PACKAGED[axis] * factor, low), high)
            assert FIT.objective(CASES, PREDICTORS, tuple(moved)) >= best - 1e-9
    # and better than one kernel efficiency for both chips at the GPUs' small-batch cost (the pair before)
    assert FIT.objective(CASES, PREDICTORS, (0.531, 0.531, 118.0)) > best + 0.05
