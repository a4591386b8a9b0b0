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
  on the same cases, in-sample and left out (fitted without the case's source): its best case, a constant-MFU
  model fitted to the answers (``peer_cases.report``).

llm-analysis runs under its own interpreter (``--peer-python``; its pins, e.g. huggingface-hub 0.14, stay out of
clustersim's environment):

    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install llm-analysis==0.2.2
    .venv/bin/python benchmarks/peer_llm_analysis.py --peer-python /tmp/peers/bin/python

SwiGLU models are given to llm-analysis as its own Llama configs give them (its MLP has two matrices): an FFN
width of 1.5 times theirs, so that its parameter count and FLOPs are the model's.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from peer_cases import comparable_cases, report, run_peer

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


def spec_of(setup: Any) -> dict[str, Any]:
    """llm-analysis's input for a case (``validation.training.CaseSetup``)."""
    model, layout, job = setup.model, setup.layout, setup.job
    ffn = model.ffn_hidden * model.ffn_type.num_matrices / 2  # llm-analysis's MLP has two matrices
    return {
        "gpu": GPU_MAP[setup.system.accelerator.id],
        "dtype": "w8a8e16" if job.precision.value == "fp8" else "w16a16e16",
        "model": {
            "name": "case", "num_layers": model.layers, "n_head": model.heads, "hidden_dim": model.hidden,
            "vocab_size": model.vocab, "max_seq_len": job.seq_len, "num_key_value_heads": model.kv_heads,
            "ffn_embed_dim": ffn, "expansion_ratio": ffn / model.hidden,
        },
        "micro_batch": layout.micro_batch, "global_batch": job.global_batch, "seq_len": job.seq_len,
        "recompute": RECOMPUTE[layout.recompute.value], "zero": layout.zero, "dp": layout.dp, "tp": layout.tp,
        "pp": layout.pp, "gated": model.ffn_type.num_matrices == 3,
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-python", default="/tmp/peers/bin/python", help="an interpreter with llm-analysis")
    parser.add_argument("--worker", nargs=2, metavar=("SPECS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return
    rows, skipped = comparable_cases(GPU_MAP, spec_of)
    answers = run_peer(args.peer_python, __file__, rows)
    refused = [(r["id"], answers[r["id"]]["error"]) for r in rows if "error" in answers[r["id"]]]
    rows = [r | {"peer_step_s": answers[r["id"]]["step_s"]} for r in rows if "step_s" in answers[r["id"]]]
    report(rows, "llm-analysis", {"eff 1": 1.0, "eff 0.5": 1.0 / DOCUMENTED_EFFICIENCY})
    print(f"not expressible in llm-analysis: {', '.join(skipped)}")
    for case_id, why in refused:
        print(f"llm-analysis refused {case_id}: {why}")


if __name__ == "__main__":
    main()
