"""The KV cache one token adds per layer, by hand: key and value per kv head, or a latent (MLA)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import MLA, Transformer
from tests.workload.hf_configs import DEEPSEEK_V2_LITE, DEEPSEEK_V3, LLAMA3_8B

GQA = Transformer(name="gqa", layers=2, hidden=64, ffn_hidden=160, heads=8, kv_heads=2, vocab=1000, ffn_type="swiglu")


def test_key_and_value_of_every_kv_head():
    assert (GQA.kv_cache_elements, GQA.kv_cache_heads) == (2 * 2 * 8, 2)
    mha = GQA.model_copy(update={"kv_heads": 8})
    assert (mha.kv_cache_elements, mha.kv_cache_heads) == (2 * 8 * 8, 8)


def test_a_latent_is_one_head_of_its_rank_and_rotary_key():
    latent = Transformer(
        name="latent",
        layers=2,
        hidden=64,
        ffn_hidden=160,
        heads=4,
        head_dim=24,
        vocab=1000,
        ffn_type="swiglu",
        mla=MLA(kv_lora_rank=32, rope_head_dim=8, v_head_dim=16),
    )
    assert (latent.kv_cache_elements, latent.kv_cache_heads) == (32 + 8, 1)


@pytest.mark.parametrize(
    ("config", "elements", "heads"),
    [(LLAMA3_8B, 2 * 8 * 128, 8), (DEEPSEEK_V2_LITE, 512 + 64, 1), (DEEPSEEK_V3, 512 + 64, 1)],
)
def test_published_configs(tmp_path: Path, config: dict[str, object], elements: int, heads: int):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    model = read_hf_config(path)
    assert (model.kv_cache_elements, model.kv_cache_heads) == (elements, heads)
