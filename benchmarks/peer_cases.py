"""The bundled training runs a peer tool can express, with clustersim's figures for them, and the side-by-side table.

Shared by the peer benchmarks (``peer_llm_analysis.py``, ``peer_calculon.py``): each names the accelerators its
tool has a configuration for and builds its own input from a case's resolved model, layout and job; the peer runs
under its own interpreter (``run_peer``), and ``report`` prints the mean |predicted / measured - 1| of the step per
source and GPU: clustersim in-sample (the packaged constants) and left out (the case's residual in the packaged
``intervals/residuals.toml``, predicted with constants fitted without its source), and the peer as it answers and
scaled by one factor per GPU fitted on the same runs (the median ratio, which minimizes the mean absolute log
error; in-sample, and fitted without the run's source). The measured step of a case that publishes a rate
(tokens/s, TFLOP/s, MFU) is the step that rate implies, by clustersim's own conversion, the same for every tool.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

Row = dict[str, Any]


def comparable_cases(gpus: Mapping[str, str], spec_of: Callable[[Any], Row]) -> tuple[list[Row], list[str]]:
    """Per dense training case on an accelerator of ``gpus`` (clustersim id -> the peer's), with TP inside a node
    and no context parallelism: its figures and ``spec_of(setup)`` (a ``validation.training.CaseSetup``); and the
    counts of the cases left out, by reason."""
    from clustersim.catalog.registry import load_catalog
    from clustersim.intervals import load_residuals
    from clustersim.validation.cases import bundled_case_files, project_case_files, read_all, source_key
    from clustersim.validation.intervals import log_residual
    from clustersim.validation.training import case_setup, estimate_case, training_value

    catalog = load_catalog(use_env=False)
    left_out = {(r.id, r.field): r.r for r in load_residuals().residuals}
    rows, skipped = [], defaultdict(int)
    for case in read_all([*bundled_case_files(), *project_case_files()]):
        if case.kind != "training" or not case.measured:
            continue
        setup = case_setup(case, catalog)
        model, layout, job, accelerator = setup.model, setup.layout, setup.job, setup.system.accelerator.id
        reason = (
            "mixture of experts" if model.moe is not None else "latent attention" if model.mla is not None
            else "a chip it has no configuration for" if accelerator not in gpus else "tp above a node"
            if layout.tp > setup.system.devices_per_node else "context parallelism" if layout.cp > 1
            else f"precision {job.precision.value}" if job.precision.value not in ("bf16", "fp16", "fp8") else ""
        )  # fmt: skip
        if reason:
            skipped[reason] += 1
            continue
        field, measured = next(iter(case.measured.items()))
        estimate = estimate_case(case, catalog)
        r_in = log_residual(field, measured, training_value(estimate, field))
        rows.append({
            "id": case.id, "source": source_key(case.source or ""), "gpu": gpus[accelerator],
            "measured_step_s": estimate.step_s * math.exp(r_in), "clustersim_step_s": estimate.step_s,
            "clustersim_left_out_r": left_out.get((case.id, field)), "spec": {"id": case.id, **spec_of(setup)},
        })  # fmt: skip
    return rows, [f"{n} {why}" for why, n in sorted(skipped.items(), key=lambda kv: -kv[1])]


def run_peer(python: str, script: str, rows: list[Row], extra: list[str] | None = None) -> dict[str, Row]:
    """The peer's answer per case id (``{"step_s": ...}`` or ``{"error": ...}``): ``script --worker SPECS OUT``
    (and ``extra`` arguments) under ``python``."""
    with tempfile.TemporaryDirectory() as folder:
        specs, out = Path(folder) / "specs.json", Path(folder) / "out.json"
        specs.write_text(json.dumps([r["spec"] for r in rows]))
        quiet = os.environ | {"TRANSFORMERS_VERBOSITY": "error"}  # a peer importing transformers warns
        subprocess.run([python, script, "--worker", str(specs), str(out), *(extra or [])], check=True, env=quiet)
        answers: dict[str, Row] = json.loads(out.read_text())
    return answers


def fitted_scale(rows: list[Row]) -> float:
    """The one factor on the peer's step that minimizes the mean |log error| of ``rows``: the median ratio."""
    return math.exp(statistics.median(math.log(r["measured_step_s"] / r["peer_step_s"]) for r in rows))


def _error(predicted_s: float, measured_s: float) -> float:
    return abs(predicted_s / measured_s - 1.0)


def report(rows: list[Row], peer: str, variants: Mapping[str, float]) -> None:
    """Print the table: clustersim in-sample and left out, the peer at each fixed factor of ``variants`` (label ->
    factor on its step) and with one factor per GPU fitted in-sample and without the run's source."""
    for row in rows:
        same_gpu = [r for r in rows if r["gpu"] == row["gpu"]]
        row["fit_in"] = fitted_scale(same_gpu)
        others = [r for r in same_gpu if r["source"] != row["source"]]
        row["fit_out"] = fitted_scale(others) if others else math.nan

    def mean(values: list[float]) -> str:
        return f"{100 * statistics.fmean(values):7.1f}" if values else "      -"

    def figures(group: list[Row]) -> str:
        cells = [
            f"{len(group):5d}",
            mean([_error(r["clustersim_step_s"], r["measured_step_s"]) for r in group]),
            mean([abs(math.exp(-r["clustersim_left_out_r"]) - 1) for r in group
                  if r["clustersim_left_out_r"] is not None]),
            *(mean([_error(r["peer_step_s"] * f, r["measured_step_s"]) for r in group]) for f in variants.values()),
            mean([_error(r["peer_step_s"] * r["fit_in"], r["measured_step_s"]) for r in group]),
            mean([_error(r["peer_step_s"] * r["fit_out"], r["measured_step_s"]) for r in group
                  if not math.isnan(r["fit_out"])]),
        ]  # fmt: skip
        return " ".join(cells)

    labels = ["cases", "cs in", "cs out", *variants, "fit in", "fit out"]
    print(f"mean |predicted / measured - 1| of the step, %: clustersim (cs) in-sample and left out; {peer}")
    print(f"as it answers ({', '.join(variants)}), and scaled by one factor per GPU fitted in-sample and left out")
    print(f"{'source':28s} {'gpu':15s} " + " ".join(f"{h:>7s}" if i else f"{h:>5s}" for i, h in enumerate(labels)))
    groups: dict[tuple[str, str], list[Row]] = defaultdict(list)
    for row in rows:
        groups[(row["source"], row["gpu"])].append(row)
    for (source, gpu), group in sorted(groups.items()):
        print(f"{source[:28]:28s} {gpu[:15]:15s} {figures(group)}")
    for gpu in sorted({r["gpu"] for r in rows}):
        print(f"{'all':28s} {gpu[:15]:15s} {figures([r for r in rows if r['gpu'] == gpu])}")
    print(f"{'all':28s} {'':15s} {figures(rows)}")
    fits = {gpu: fitted_scale([r for r in rows if r["gpu"] == gpu]) for gpu in sorted({r["gpu"] for r in rows})}
    print("fitted factor on the peer's step per GPU: " + ", ".join(f"{g} {f:.3f}" for g, f in fits.items()))
