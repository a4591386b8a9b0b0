"""The 2025 open models in the zoo (gpt-oss, Kimi K2, GLM-4.5, Qwen3-Coder): the shape features each relies
on, and agreement with the Hugging Face config reader on their published configs (``hf_configs_2025.py``).
Their parameter counts against the published ones are in test_zoo_open_models.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model, read_hf_config
from tests.workload.hf_configs_2025 import KIMI_K2_INSTRUCT, QWEN3_CODER_480B


def _model(model_id: str) -> Transformer:
    return load_model(model_id, use_env=False)


@pytest.mark.parametrize(("model_id", "layers", "experts"), [("gpt-oss-120b", 36, 128), ("gpt-oss-20b", 24, 32)])
def test_gpt_oss_biases_and_alternating_windows(model_id: str, layers: int, experts: int) -> None:
    model = _model(model_id)
    assert model.moe is not None and (model.moe.experts, model.moe.top_k, model.moe.shared_experts) == (experts, 4, 0)
    # Biases on q (64 x 64), k and v (8 x 64 each) and o (2880); on each expert's gate/up (2 x 2880) and down.
    assert model.attention_params() - model.attention_matmul_params() == 4096 + 2 * 512 + 2880
    assert model.mlp_params() - model.mlp_matmul_params() == 2 * 2880 + 2880
    assert model.q_width == 4096 > model.hidden and model.kv_cache_elements == 2 * 8 * 64
    # Half the layers see the whole sequence, half a band of 128 tokens.
    assert model.attended_keys(4096) == layers // 2 * 4096 + layers // 2 * 128
    assert model.attended_keys(64) == layers * 64


def test_gpt_oss_sizes_differ_only_in_depth_and_experts() -> None:
    big, small = _model("gpt-oss-120b"), _model("gpt-oss-20b")
    # Per layer the 120b holds 96 more experts and a router 96 rows wider; the rest is the same.
    per_layer = 96 * big.mlp_params() + 96 * big.hidden
    assert big.layer_params() - small.layer_params() == per_layer
    assert big.num_params() - small.num_params() == 12 * big.layer_params() + 24 * per_layer


def test_glm45_has_qkv_biases_and_no_output_bias() -> None:
    glm, air = _model("glm-4.5"), _model("glm-4.5-air")
    for model in (glm, air):
        assert model.qkv_bias and not model.linear_bias
        assert model.q_width == 96 * 128 > model.hidden and model.kv_width == 8 * 128
    # Biases q + k + v, no output bias; GLM-4.5 adds an RMSNorm of 128 on the queries and one on the keys.
    assert glm.attention_params() - glm.attention_matmul_params() == 12288 + 2 * 1024 + 2 * 128
    assert air.attention_params() - air.attention_matmul_params() == 12288 + 2 * 1024
    assert (glm.dense_layers, glm.moe_layers, air.dense_layers, air.moe_layers) == (3, 89, 1, 45)


def test_kimi_k2_is_deepseek_v3_with_more_experts_and_fewer_heads() -> None:
    kimi, v3 = _model("kimi-k2"), _model("deepseek-v3")
    assert kimi.mla == v3.mla and (kimi.hidden, kimi.expert_ffn, kimi.ffn_hidden) == (v3.hidden, 2048, 18432)
    assert kimi.moe is not None and (kimi.moe.experts, kimi.moe.top_k, kimi.moe.shared_experts) == (384, 8, 1)
    assert (kimi.dense_layers, kimi.moe_layers, kimi.heads) == (1, 60, 64)
    # The same latent cache per token and layer; half the heads, so half the attention output width.
    assert kimi.kv_cache_elements == v3.kv_cache_elements == 512 + 64
    assert kimi.context_width * 2 == v3.context_width
    # Same expert width and top-k: the same active MLP per MoE block, so fewer heads make K2 lighter per token.
    assert kimi.active_mlps * kimi.mlp_params() == v3.active_mlps * v3.mlp_params()
    assert kimi.matmul_params_per_token() < v3.matmul_params_per_token()


def test_every_2025_entry_states_its_pretraining_length_and_context() -> None:
    expected = {
        "gpt-oss-120b": (4096, 131072),
        "gpt-oss-20b": (4096, 131072),
        "kimi-k2": (4096, 131072),
        "glm-4.5": (4096, 131072),
        "glm-4.5-air": (4096, 131072),
        "qwen3-coder-480b-a35b": (4096, 262144),
    }
    assert {k: (_model(k).seq_len, _model(k).max_context_tokens) for k in expected} == expected


@pytest.mark.parametrize(
    ("model_id", "config"),
    [("qwen3-coder-480b-a35b", QWEN3_CODER_480B), ("kimi-k2", KIMI_K2_INSTRUCT)],
)
def test_zoo_entry_counts_as_its_config_json(model_id: str, config: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    read, zoo = read_hf_config(path), _model(model_id)
    assert (read.num_params(), read.active_params()) == (zoo.num_params(), zoo.active_params())
    assert read.kv_cache_elements == zoo.kv_cache_elements
    assert read.max_context_tokens == zoo.max_context_tokens
    assert read.model_flops_per_token(4096) == zoo.model_flops_per_token(4096)
