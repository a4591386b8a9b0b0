"""clustersim beside llm-analysis on the published training runs llm-analysis can express: step time, side by side.

llm-analysis (Cheng Li, https://github.com/cli99/llm-analysis; PyPI ``llm-analysis`` 0.2.2) is an analytic
training and inference model: its training step is the step's FLOPs (forward, backward, recompute) over the
GPUs' peak times a ``flops_efficiency`` the user gives (default 1; its constant.py says Megatron-LM reaches
about 0.5), with no communication, pipeline bubble or memory-bound work in the step. This script takes every
bundled training case it can express (dense transformers, no latent attention, A100 or H100 SXM, TP within a
node, no context parallelism, 16-bit or FP8) and predicts its step with both tools on the same layout, batch and
sequence:

* **clustersim**, in-sample (the packaged constants) and left out (each case's residual in the packaged
  ``intervals/residuals.toml``: predicted with constants fitted without its source);
* **llm-analysis** at its default efficiency (1), at its documented 0.5, and at one efficiency per GPU fitted
  on the same cases (the median ratio, which minimizes the mean absolute log error), in-sample and left out
  (fitted without the case's source): its best case, a constant-MFU model fitted to the answers.

The measured step of a case that publishes a rate (tokens/s, TFLOP/s, MFU) is the step that rate implies, by
clustersim's own conversion (the same for both tools). llm-analysis runs under its own interpreter
(``--peer-python``; its pins, e.g. huggingface-hub 0.14, stay out of clustersim's environment):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install llm-analysis==0.2.2
    .venv/bin/python benchmarks/peer_llm_analysis.py --peer-python /tmp/peers/bin/python

SwiGLU models are given to llm-analysis as its own Llama configs give them (its MLP has two matrices): an FFN
width of 1.5 times theirs, so that its parameter count and FLOPs are the model's.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path
from typing import Any

# clustersim accelerator id -> llm-analysis gpu config
GPU_MAP = {"a100-sxm4-80gb": "a100-sxm-80gb", "a100-sxm4-40gb": "a100-sxm-40gb", "h100-sxm": "h100-sxm-80gb"}
RECOMPUTE = {"none": 0, "selective": 1, "full": 2}  # llm-analysis ActivationRecomputation
DOCUMENTED_EFFICIENCY = 0.5  # llm-analysis constant.py: "FLOPS efficiency achieved by Megatron-LM is ~0.5"


def worker(specs_path: str, out_path: str) -> None:
    """Run llm-analysis on each spec (this runs under the peer's interpreter: llm_analysis only)."""
    import logging

    from llm_analysis.analysis import train

    logging.disable(logging.CRITICAL)
    results = {}
    folder = Path(tempfile.mkdtemp())
    for spec in json.loads(Path(specs_path).read_text()):
        config = folder / f"{spec['id']}.json"
        config.write_text(json.dumps(spec["model"]))
        try:
            summary = train(
                model_name=str(config), gpu_name=spec["gpu"], dtype_name=spec["dtype"], log_level="CRITICAL",
                batch_size_per_gpu=spec["micro_batch"], global_batch_size=spec["global_batch"],
                seq_len=spec["seq_len"], activation_recomputation=spec["recompute"], ds_zero=spec["zero"],
                dp_size=spec["dp"], tp_size=spec["tp"], pp_size=spec["pp"], flops_efficiency=1.0,
                hbm_memory_efficiency=1.0, flash_attn=True, mlp_gated_linear_units=spec["gated"],
            )  # fmt: skip
            results[spec["id"]] = {"step_s": float(summary["latency_per_iter"])}
        except Exception as exc:  # the peer refuses what it cannot express; say so per case
            results[spec["id"]] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    Path(out_path).write_text(json.dumps(results))


def cases_to_compare() -> tuple[list[dict[str, Any]], list[str]]:
    """Per expressible case: its llm-analysis spec and clustersim's figures; and the reasons others were left."""
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
            else f"GPU {accelerator}" if accelerator not in GPU_MAP else "tp above 8" if layout.tp > 8
            else "context parallelism" if layout.cp > 1 else f"precision {job.precision.value}"
            if job.precision.value not in ("bf16", "fp16", "fp8") else ""
        )  # fmt: skip
        if reason:
            skipped[reason] += 1
            continue
        field, measured = next(iter(case.measured.items()))
        estimate = estimate_case(case, catalog)
        r_in = log_residual(field, measured, training_value(estimate, field))
        ffn = model.ffn_hidden * model.ffn_type.num_matrices / 2  # llm-analysis's MLP has two matrices
        rows.append({
            "id": case.id, "source": source_key(case.source or ""), "gpu": GPU_MAP[accelerator],
            "measured_step_s": estimate.step_s * math.exp(r_in), "clustersim_step_s": estimate.step_s,
            "clustersim_left_out_r": left_out.get((case.id, field)),
            "spec": {
                "id": case.id, "gpu": GPU_MAP[accelerator],
                "dtype": "w8a8e16" if job.precision.value == "fp8" else "w16a16e16",
                "model": {
                    "name": case.id, "num_layers": model.layers, "n_head": model.heads, "hidden_dim": model.hidden,
                    "vocab_size": model.vocab, "max_seq_len": job.seq_len, "num_key_value_heads": model.kv_heads,
                    "ffn_embed_dim": ffn, "expansion_ratio": ffn / model.hidden,
                },
                "micro_batch": layout.micro_batch, "global_batch": job.global_batch, "seq_len": job.seq_len,
                "recompute": RECOMPUTE[layout.recompute.value], "zero": layout.zero, "dp": layout.dp,
                "tp": layout.tp, "pp": layout.pp, "gated": model.ffn_type.num_matrices == 3,
            },
        })  # fmt: skip
    return rows, [f"{n} {why}" for why, n in sorted(skipped.items(), key=lambda kv: -kv[1])]


def fitted_efficiency(rows: list[dict[str, Any]]) -> float:
    """The one efficiency that minimizes the mean |log error| of ``rows``: the median ratio."""
    return math.exp(statistics.median(math.log(r["peer_step_s"] / r["measured_step_s"]) for r in rows))


def error(predicted_s: float, measured_s: float) -> float:
    return abs(predicted_s / measured_s - 1.0)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-python", default="/tmp/peers/bin/python", help="an interpreter with llm-analysis")
    parser.add_argument("--worker", nargs=2, metavar=("SPECS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return
    rows, skipped = cases_to_compare()
    with tempfile.TemporaryDirectory() as folder:
        specs, out = Path(folder) / "specs.json", Path(folder) / "out.json"
        specs.write_text(json.dumps([r["spec"] for r in rows]))
        quiet = os.environ | {"TRANSFORMERS_VERBOSITY": "error"}  # the peer imports transformers, which warns
        subprocess.run([args.peer_python, __file__, "--worker", str(specs), str(out)], check=True, env=quiet)
        peer = json.loads(out.read_text())
    refused = [(r["id"], peer[r["id"]]["error"]) for r in rows if "error" in peer[r["id"]]]
    rows = [r | {"peer_step_s": peer[r["id"]]["step_s"]} for r in rows if "step_s" in peer[r["id"]]]
    for row in rows:
        same_gpu = [r for r in rows if r["gpu"] == row["gpu"]]
        row["fit_in"] = fitted_efficiency(same_gpu)
        others = [r for r in same_gpu if r["source"] != row["source"]]
        row["fit_out"] = fitted_efficiency(others) if others else math.nan

    def figures(group: list[dict[str, Any]]) -> list[str]:
        lefts = [r for r in group if r["clustersim_left_out_r"] is not None]
        outs = [r for r in group if not math.isnan(r["fit_out"])]
        mean = statistics.fmean
        return [
            f"{len(group):5d}",
            f"{100 * mean(error(r['clustersim_step_s'], r['measured_step_s']) for r in group):6.1f}",
            f"{100 * mean(abs(math.exp(-r['clustersim_left_out_r']) - 1) for r in lefts):6.1f}" if lefts else "     -",
            f"{100 * mean(error(r['peer_step_s'], r['measured_step_s']) for r in group):6.1f}",
            f"{100 * mean(error(r['peer_step_s'] / DOCUMENTED_EFFICIENCY, r['measured_step_s']) for r in group):6.1f}",
            f"{100 * mean(error(r['peer_step_s'] / r['fit_in'], r['measured_step_s']) for r in group):6.1f}",
            f"{100 * mean(error(r['peer_step_s'] / r['fit_out'], r['measured_step_s']) for r in outs):6.1f}"
            if outs else "     -",
        ]  # fmt: skip

    header = ["cases", "cs in", "cs out", "la 1.0", "la 0.5", "la fit", "la out"]
    print("mean |predicted / measured - 1| of the step, %: clustersim (cs) in-sample and left out; llm-analysis (la)")
    print("at efficiency 1 (its default), 0.5 (its documented Megatron figure), fitted per GPU in-sample and left out")
    print(f"{'source':28s} {'gpu':14s} " + " ".join(f"{h:>6s}" for h in header))
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["source"], row["gpu"])].append(row)
    for (source, gpu), group in sorted(groups.items()):
        print(f"{source[:28]:28s} {gpu:14s} " + " ".join(figures(group)))
    for gpu in sorted({r["gpu"] for r in rows}):
        print(f"{'all':28s} {gpu:14s} " + " ".join(figures([r for r in rows if r["gpu"] == gpu])))
    print(f"{'all':28s} {'':14s} " + " ".join(figures(rows)))
    fits = {gpu: fitted_efficiency([r for r in rows if r["gpu"] == gpu]) for gpu in sorted({r["gpu"] for r in rows})}
    print("fitted llm-analysis efficiency per GPU: " + ", ".join(f"{g} {e:.3f}" for g, e in fits.items()))
    print(f"not expressible in llm-analysis: {', '.join(skipped)}")
    for case_id, why in refused:
        print(f"llm-analysis refused {case_id}: {why}")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
