"""A serving deployment's step against its batch: what its published runs imply beside what the model gives.

For each selected inference case (ids containing every ``--match``) that measures a throughput and, for a server or
concurrency run, its mean TPOT, the run's batch and step follow from Little's law: a server run decodes
``tokens/s x TPOT`` sequences at a step of its TPOT; an offline run at its stated batch cap (``engine_settings``'
``max_batch_sequences`` per attention-DP rank, times the ranks) takes ``batch / tokens/s`` a step (both per replica:
the throughput over ``parallel.dp``). Beside each,
the closed form's step at the same batch on the same deployment (``estimate_offline`` at that batch), and its parts
(GEMMs, decode attention, communication, overhead). A gap that shrinks as the batch grows is a cost the model lacks
at small batches (a per-step floor); one that grows is a cost per sequence.

    python benchmarks/serving_step_curve.py --match mlperf60_deepseek-r1 --match 8xb300
    python benchmarks/serving_step_curve.py --match mlperf60_deepseek-r1_8xb200

Not a test: it reads the packaged constants and the bundled cases and prints; nothing is written.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clustersim.catalog import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.estimate import estimate_offline
from clustersim.validation.cases import as_case
from clustersim.validation.inference import case_deployment

PROJECT = Path(__file__).resolve().parents[1] / "src" / "clustersim" / "validation" / "project" / "inference.jsonl"


def measured_point(raw: dict[str, Any]) -> tuple[float, float] | None:
    """(batch, step seconds) of one replica the run implies, or None where it measures too little to say."""
    workload, measured, parallel = raw.get("workload") or {}, raw["measured"], raw.get("parallel") or {}
    rate = measured.get("output_tokens_per_s")
    if not rate:
        return None
    rate = rate / (parallel.get("dp") or 1)  # one replica's share
    if workload.get("scenario") in ("server", "concurrency") and measured.get("tpot_s"):
        return rate * measured["tpot_s"], measured["tpot_s"]
    cap = (workload.get("engine_settings") or {}).get("max_batch_sequences")
    if workload.get("scenario") == "offline" and cap:
        batch = cap * (parallel.get("attention_dp") or 1)
        return float(batch), batch / rate
    return None


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--file", type=Path, default=PROJECT)
    parser.add_argument("--match", action="append", default=[], help="substring every selected id contains")
    args = parser.parse_args(argv)
    catalog = load_catalog()
    print(f"{'case':64s} {'batch':>7s} {'measured':>9s} {'model':>9s} {'gap':>8s}   model's parts (ms)")
    for line in args.file.read_text(encoding="utf-8").splitlines():
        raw = json.loads(line) if line.strip() else None
        if not raw or not all(m in raw["id"] for m in args.match):
            continue
        point = measured_point(raw)
        if point is None:
            continue
        batch, step_s = point
        deployment = case_deployment(as_case(raw, "inference"), catalog)
        try:
            est = estimate_offline(
                deployment.model, deployment.serving, deployment.request, batch=max(round(batch), 1),
                engine=deployment.engine,
            )  # fmt: skip
        except ClusterSimError as exc:
            print(f"{raw['id'][:64]:64s} {batch:7.0f} {step_s * 1e3:7.1f}ms {'-':>9s}   ({exc})")
            continue
        parts = (
            f"gemm {est.gemm_compute_s * 1e3:.1f}, attention {est.decode_attention_s * 1e3:.1f}, "
            f"comm {est.communication_s * 1e3:.1f}, overhead {est.overhead_s * 1e3:.1f}"
        )
        gap = (step_s - est.step_s) * 1e3
        print(
            f"{raw['id'][:64]:64s} {batch:7.0f} {step_s * 1e3:8.1f}ms {est.step_s * 1e3:7.1f}ms {gap:+7.1f}ms   {parts}"
        )


if __name__ == "__main__":
    main()
