"""Every field a bundled case states is one the reader takes: a field it drops is a silent wrong answer.

The format lets readers ignore unknown fields, and clustersim's case models do (``extra="ignore"``); so the
Llama 4 rows' ``sliding_window`` was dropped for two days (2026-12-02 to 12-04) while their notes said it was
priced. This walks every case of the shared and the project files through the case models and fails on a key no
model field holds, unless it is listed here with why dropping it changes nothing.
"""

from __future__ import annotations

import json
import typing
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel

import clustersim.validation
from clustersim.validation.cases import Case, project_dir

DATA = Path(clustersim.validation.__file__).with_name("data")

DROPPED_ON_PURPOSE = {
    "model.moe_layer_step": (
        "Llama 4 Maverick's rows state its every-other-layer MoE beside dense_layers 24: the reader prices 24 dense "
        "and 24 MoE blocks from dense_layers alone, the same FLOPs, parameters and per-layer average; read as well, "
        "the step would leave 12 MoE blocks"
    ),
}


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The case model a field's annotation holds (through Optional and Annotated), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for argument in typing.get_args(annotation):
        found = _model_in(argument)
        if found is not None:
            return found
    return None


def _dropped(value: dict[str, Any], model: type[BaseModel], path: str, found: Counter[str]) -> None:
    for key, item in value.items():
        field = model.model_fields.get(key)
        if field is None:
            found[f"{path}{key}"] += 1
            continue
        inner = _model_in(field.annotation)
        if inner is not None and isinstance(item, dict):
            _dropped(item, inner, f"{path}{key}.", found)


def test_every_field_a_bundled_case_states_is_read_or_dropped_on_purpose():
    found: Counter[str] = Counter()
    files = sorted(DATA.glob("*.jsonl")) + sorted(project_dir().glob("*.jsonl"))
    assert len(files) == 7
    for path in files:
        for line in path.read_text().splitlines():
            _dropped(json.loads(line), Case, "", found)
    assert set(found) <= set(DROPPED_ON_PURPOSE), {k: n for k, n in found.items() if k not in DROPPED_ON_PURPOSE}
    assert found["model.moe_layer_step"] == 25  # the Maverick rows, each also stating dense_layers 24


def test_the_walk_finds_a_dropped_field():
    found: Counter[str] = Counter()
    _dropped(
        {"id": "x", "model": {"layers": 2, "windw": 4}, "parallel": {"tp": 1, "ep_overlapp": True}}, Case, "", found
    )
    assert found == Counter({"model.windw": 1, "parallel.ep_overlapp": 1})
