"""Small ground-truth rows and fake predictors shared by the validation tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.validation.cases import Case
from clustersim.validation.run import Predictor

SYSTEM = {"accelerator": "h100-sxm", "devices": 16, "devices_per_node": 8, "nodes": 2}
MODEL = {"name": "tiny", "layers": 2, "hidden": 64, "ffn_hidden": 256, "heads": 4, "vocab": 1000, "seq_len": 128}


def collective(case_id: str, busbw: float, size_bytes: int = 1 << 26, op: str = "all_reduce") -> dict[str, Any]:
    return {
        "id": case_id,
        "kind": "collective",
        "source": "test",
        "system": SYSTEM,
        "op": op,
        "size_bytes": size_bytes,
        "measured": {"busbw_GBps": busbw, "algbw_GBps": busbw / 2},
    }


def training(case_id: str, step_time_s: float) -> dict[str, Any]:
    return {"id": case_id, "kind": "training", "source": "test", "model": MODEL, "system": SYSTEM,
            "measured": {"step_time_s": step_time_s}}  # fmt: skip


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def times(factor: float) -> Predictor:
    """A predictor that returns the measured value times ``factor``."""

    def predict(case: Case, field: str, catalog: Catalog) -> float:
        return case.measured[field] * factor

    return predict
