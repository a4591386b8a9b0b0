"""Where a training prediction misses, per case: the measured and predicted step, and both per layer and micro-batch.

For each bundled (or given) training case whose id contains every ``--match`` substring, prints its gradient
accumulation (micro-batches per step), the measured step (a published rate turned into the step it implies, as
``validate`` converts it), the predicted step, the signed error, and both steps per decoder layer on a pipeline rank
and micro-batch beside the predicted forward, backward and recompute alone: a miss that is a floor per layer and
micro-batch (a host that cannot launch kernels as fast as the GPU runs them) shows as a measured time per layer that
stays put while the predicted compute moves. ``--terms`` adds each case's step terms (busy and exposed seconds).

With ``--efficiency FILE`` (a TOML file of family fractions, as ``clustersim validate`` reads from
``CLUSTERSIM_EFFICIENCY``), it also prints each case's error under that file and the mean absolute error of the
selected cases under both, split at a sequence length (``--long-from``): a constant changed by hand, scored on the
cases it moves most, before any refit.

    python benchmarks/training_residuals.py --match deepseek-v3 --match gb200
    python benchmarks/training_residuals.py --match h100 --efficiency my_fractions.toml --long-from 16384

Not a test: it reads the packaged constants and prints; nothing is written.
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clustersim.catalog import load_catalog
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_table
from clustersim.validation.cases import as_case, primary_field
from clustersim.validation.training import case_value, estimate_case

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "clustersim" / "validation"
DEFAULT_FILES = (PACKAGE / "data" / "training.jsonl", PACKAGE / "project" / "training.jsonl")
COMPUTE_TERMS = ("forward", "backward", "recompute")


def residual_row(raw: Mapping[str, Any], catalog: Any, table: Mapping[str, FamilyEfficiency] | None) -> dict[str, Any]:
    """One case's measured and predicted step, error and per-layer figures under the efficiency ``table``."""
    case = as_case(raw)
    field = primary_field(case)  # the field validate scores
    estimate = estimate_case(case, catalog, table)
    measured = case.measured[field]
    # a step is proportional to 1 / rate: the measured step is the predicted one times predicted / measured rate
    rate_ratio = 1.0 if field == "step_time_s" else case_value(case, estimate, field) / measured
    measured_step_s = measured if field == "step_time_s" else estimate.step_s * rate_ratio
    micro_batches = estimate.job.global_batch // (estimate.layout.dp * estimate.layout.micro_batch)
    layers_per_rank = raw["model"]["layers"] / estimate.layout.pp
    per_layer = micro_batches * layers_per_rank
    compute_s = sum(t.exposed_s for t in estimate.terms if t.name in COMPUTE_TERMS)
    return {
        "id": case.id,
        "field": field,
        "error": estimate.step_s / measured_step_s - 1.0,  # + : predicted slower than measured
        "micro_batches": micro_batches,
        "measured_step_s": measured_step_s,
        "predicted_step_s": estimate.step_s,
        "measured_layer_ms": measured_step_s / per_layer * 1e3,
        "predicted_layer_ms": estimate.step_s / per_layer * 1e3,
        "compute_layer_ms": compute_s / per_layer * 1e3,
        "seq_len": raw["model"].get("seq_len") or 0,
        "terms": [(t.name, t.link_s, t.exposed_s) for t in estimate.terms],
    }


def selected(files: Sequence[Path], matches: Sequence[str]) -> list[dict[str, Any]]:
    """The training cases of ``files`` whose id contains every one of ``matches``."""
    rows = []
    for path in files:
        for line in path.read_text(encoding="utf-8").splitlines():
            raw = json.loads(line) if line.strip() else None
            if raw and raw.get("kind") == "training" and all(m in raw["id"] for m in matches):
                rows.append(raw)
    return rows


def _mape(errors: Sequence[float]) -> str:
    return f"{statistics.mean(abs(e) for e in errors):.4f}" if errors else "-"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="*", type=Path, default=list(DEFAULT_FILES))
    parser.add_argument("--match", action="append", default=[], help="substring every selected id contains")
    parser.add_argument("--efficiency", type=Path, help="a TOML file of family fractions to score beside")
    parser.add_argument("--long-from", type=int, default=16384, help="sequence length from which a case is 'long'")
    parser.add_argument("--terms", action="store_true", help="print each case's step terms")
    args = parser.parse_args(argv)
    catalog = load_catalog()
    other = efficiency_table([args.efficiency], use_env=False) if args.efficiency else None
    before, after = [], []
    for raw in selected(args.files, args.match):
        row = residual_row(raw, catalog, None)
        line = (
            f"{row['id'][:78]:78s} GA {row['micro_batches']:5d}  step measured {row['measured_step_s']:9.3f} s "
            f"predicted {row['predicted_step_s']:9.3f} s ({row['error']:+.3f})  per layer and micro-batch: "
            f"measured {row['measured_layer_ms']:7.2f} ms, predicted {row['predicted_layer_ms']:7.2f} ms "
            f"(compute {row['compute_layer_ms']:7.2f} ms)"
        )
        before.append(row)
        if other is not None:
            changed = residual_row(raw, catalog, other)
            after.append(changed)
            line += f"  with {args.efficiency.name}: {changed['error']:+.3f}"
        print(line)
        if args.terms:
            for name, link_s, exposed_s in row["terms"]:
                print(f"    {name:22s} busy {link_s:10.4f} s  exposed {exposed_s:10.4f} s")
    long_ids = {r["id"] for r in before if r["seq_len"] >= args.long_from}
    for label, rows in (("packaged", before), (str(args.efficiency), after)):
        if rows:
            long = [r["error"] for r in rows if r["id"] in long_ids]
            short = [r["error"] for r in rows if r["id"] not in long_ids]
            print(
                f"{label}: {len(rows)} cases, mean |error| {_mape([r['error'] for r in rows])}; "
                f"seq >= {args.long_from}: {len(long)} at {_mape(long)}; shorter: {len(short)} at {_mape(short)}"
            )


if __name__ == "__main__":
    main()
