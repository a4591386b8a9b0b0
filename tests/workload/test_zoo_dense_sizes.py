"""The zoo's smaller and older dense models (Qwen3 0.6B-14B, Mistral 7B, Nemotron-4 15B and 340B): their counts
against the published ones, and the shapes the validation cases carry for them."""

from __future__ import annotations

import json

import pytest

from clustersim.validation.cases import bundled_dir
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model


def _model(model_id: str) -> Transformer:
    return load_model(model_id, use_env=False)


def _embedding(model: Transformer) -> int:
    return model.vocab * model.hidden * (1 if model.tied_embeddings else 2)


# (model id, published total, published without the embedding and output layer, the figures' rounding);
# a total of None: the source gives the two parts, not their sum
PUBLISHED = [
    ("qwen3-0.6b", 0.6e9, 0.44e9, 0.005e9),  # model cards, https://huggingface.co/Qwen/Qwen3-0.6B etc.
    ("qwen3-1.7b", 1.7e9, 1.4e9, 0.05e9),
    ("qwen3-4b", 4.0e9, 3.6e9, 0.05e9),
    ("qwen3-14b", 14.8e9, 13.2e9, 0.05e9),
    ("nemotron4-15b", None, 12.5e9, 0.05e9),  # arXiv 2402.16819: 3.2B embedding + 12.5B
    ("nemotron4-340b", None, 331.6e9, 0.05e9),  # arXiv 2406.11704: 9.4B embedding + 331.6B
]
# the embedding and output layer as published, and how far the count may be: 256,000 x 6,144 x 2 = 3.146B, which
# the 15B's report gives as 3.2B
EMBEDDINGS = {"nemotron4-15b": (3.2e9, 0.055e9), "nemotron4-340b": (9.4e9, 0.05e9)}


@pytest.mark.parametrize(("model_id", "total", "inner", "rounding"), PUBLISHED)
def test_published_counts(model_id: str, total: float | None, inner: float, rounding: float):
    model = _model(model_id)
    assert abs(model.num_params() - _embedding(model) - inner) <= rounding
    if total is not None:
        assert abs(model.num_params() - total) <= rounding
    else:
        published, within = EMBEDDINGS[model_id]
        assert abs(_embedding(model) - published) <= within


def test_mistral_7b_counts_as_its_checkpoint_and_v01_attends_a_window():
    v1, v2 = _model("mistral-7b-v0.1"), _model("mistral-7b-instruct-v0.2")
    assert v1.num_params() == v2.num_params() == 7_241_732_096  # the Hub's 7.24B; the paper's "7.3B"
    assert v1.attended_keys(8192) == 32 * 4096 < v2.attended_keys(8192) == 32 * 8192


def test_the_small_qwen3_sizes_tie_their_output_layer_and_the_14b_does_not():
    assert [_model(f"qwen3-{size}").tied_embeddings for size in ("0.6b", "1.7b", "4b", "14b")] == [
        True,
        True,
        True,
        False,
    ]


def test_nemotron_340b_heads_are_192_wide():
    model = _model("nemotron4-340b")
    assert model.head_dim == 192 and model.kv_cache_elements == 2 * 8 * 192


SHAPE = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn_type")


@pytest.mark.parametrize("model_id", ["qwen3-14b", "nemotron4-15b", "nemotron4-340b", "mistral-7b-instruct-v0.2"])
def test_shapes_match_the_validation_cases(model_id: str):
    zoo, checked = _model(model_id), 0
    for path in bundled_dir().parent.glob("*/*.jsonl"):
        for line in path.read_text().splitlines():
            shape = (json.loads(line) if line.strip() else {}).get("model") or {}
            if shape.get("name") != model_id:
                continue
            case = Transformer.model_validate({k: v for k, v in shape.items() if k in Transformer.model_fields})
            assert [getattr(case, k) for k in SHAPE] == [getattr(zoo, k) for k in SHAPE], path
            checked += 1
    assert checked
