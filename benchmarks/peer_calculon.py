"""clustersim beside Calculon on the published training runs Calculon can express: step time, side by side.

Calculon (Isaev et al., SC'23, https://github.com/calculon-ai/calculon) is an analytic model of Megatron-style
training: per block the GEMMs and vector work at its system file's size-dependent efficiencies, memory traffic, the
tensor-, pipeline- and data-parallel communication over its networks with their overlaps, recompute and the
pipeline bubble. Its systems are an A100 80 GB and an H100 80 GB NVLink-8 node (``systems/a100_80g.json``,
``systems/h100_80g_nvl8.json``: 300 and 450 GB/s NVLink, 25 and 50 GB/s of network a GPU); its model has
multi-head or multi-query attention and a two-matrix MLP. This script takes every bundled training case it can
express (dense transformers, no latent attention, A100 80 GB or H100 SXM, TP within a node, no context
parallelism, 16-bit or FP8) and predicts its step with both tools on the same layout, batch and sequence
(``peer_cases.report``: clustersim in-sample and left out; Calculon as it answers and scaled by one factor per GPU
fitted on the same runs, in-sample and left out).

The mapping, a Megatron user's: a grouped-query model as multi-head attention (Calculon has no GQA: its K and V
projections are the query's width), a SwiGLU MLP as a two-matrix one 1.5 times as wide (the model's FLOPs), heads x
head_dim as ``attn_size``; TP over NVLink (network 0), PP and DP over the network where they leave a node;
sequence parallelism as ``rs_ag``, the software profile's TP overlap as ``ring``, Megatron's gradient-reduce overlap
(``data_par_overlap``) with DP, the distributed optimizer (ZeRO 1 or more) as ``optimizer_sharding``; selective
recompute as ``attn_only``; FP8 as ``float8``, 16-bit as ``float16``. Calculon refuses what does not divide (layers
over pipeline stages and chunks, heads over TP); those cases are counted.

Calculon needs pandas and psutil and runs under its own interpreter from a checkout (``--calculon``):

    git clone https://github.com/calculon-ai/calculon /tmp/calculon
    python3 -m venv /tmp/peers && /tmp/peers/bin/pip install pandas psutil
    .venv/bin/python benchmarks/peer_calculon.py --peer-python /tmp/peers/bin/python --calculon /tmp/calculon
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from peer_cases import comparable_cases, report, run_peer

GPU_MAP = {"a100-sxm4-80gb": "a100_80g", "h100-sxm": "h100_80g_nvl8"}  # clustersim id -> Calculon system file
RECOMPUTE = {"none": "none", "selective": "attn_only", "full": "full"}


def worker(specs_path: str, out_path: str, calculon: str) -> None:
    """Run Calculon on each spec (this runs under the peer's interpreter, with the checkout on the path)."""
    import logging

    sys.path.insert(0, calculon)
    from calculon import System
    from calculon.llm import Llm

    log = logging.getLogger("calculon")
    log.disabled = True
    results = {}
    for spec in json.loads(Path(specs_path).read_text()):
        try:
            system = System(json.loads((Path(calculon) / "systems" / f"{spec['system']}.json").read_text()))
            model = Llm(Llm.Application(spec["application"]), log)
            model.compile(system, Llm.Execution.from_json(spec["execution"]))
            model.run(system)
            results[spec["id"]] = {"step_s": float(model.get_total_time())}
        except (Exception, AssertionError) as exc:  # Calculon refuses what it cannot express; said per case
            results[spec["id"]] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
    Path(out_path).write_text(json.dumps(results))


def spec_of(setup: Any) -> dict[str, Any]:
    """Calculon's application, execution and system for a case (``validation.training.CaseSetup``)."""
    model, layout, job, software = setup.model, setup.layout, setup.job, setup.software
    per_node = setup.system.devices_per_node
    devices = layout.tp * layout.pp * layout.dp
    overlap = layout.tp_overlap if layout.tp_overlap is not None else software.tp_overlap
    return {
        "system": GPU_MAP[setup.system.accelerator.id],
        "application": {
            "hidden": model.hidden, "feedforward": round(model.ffn_hidden * model.ffn_type.num_matrices / 2),
            "seq_size": job.seq_len, "attn_heads": model.heads, "attn_size": model.head_dim, "num_blocks": model.layers,
        },
        "execution": {
            "num_procs": devices, "tensor_par": layout.tp, "pipeline_par": layout.pp, "data_par": layout.dp,
            "tensor_par_net": 0, "pipeline_par_net": int(layout.tp * layout.pp > per_node),
            "data_par_net": int(devices > per_node), "batch_size": job.global_batch,
            "microbatch_size": layout.micro_batch, "datatype": "float8" if job.precision.value == "fp8" else "float16",
            "fused_activation": True, "attention_type": "multihead",
            "activation_recompute": RECOMPUTE[layout.recompute.value], "pipeline_interleaving": layout.vp,
            "optimizer_sharding": layout.zero >= 1 and layout.dp > 1,
            "tensor_par_comm_type": "rs_ag" if layout.sequence_parallel and layout.tp > 1 else "ar",
            "tensor_par_overlap": "ring" if overlap and layout.tp > 1 else "none", "seq_par_ag_redo": False,
            "data_par_overlap": layout.dp > 1, "weight_offload": False, "activations_offload": False,
            "optimizer_offload": False, "training": True,
        },
    }  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--peer-python", default="/tmp/peers/bin/python", help="an interpreter with pandas, psutil")
    parser.add_argument("--calculon", default="/tmp/calculon", help="a checkout of calculon-ai/calculon")
    parser.add_argument("--worker", nargs=2, metavar=("SPECS", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker, args.calculon)
        return
    rows, skipped = comparable_cases(GPU_MAP, spec_of)
    answers = run_peer(args.peer_python, __file__, rows, ["--calculon", args.calculon])
    refused = [(r["id"], answers[r["id"]]["error"]) for r in rows if "error" in answers[r["id"]]]
    rows = [r | {"peer_step_s": answers[r["id"]]["step_s"]} for r in rows if "step_s" in answers[r["id"]]]
    report(rows, "Calculon", {"calculon": 1.0})
    print(f"not expressible in Calculon: {', '.join(skipped)}; refused by it: {len(refused)}")
    for case_id, why in refused:
        print(f"  {case_id}: {why}")


if __name__ == "__main__":
    main()
