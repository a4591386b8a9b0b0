"""Today's open models in the zoo (DeepSeek-V3, Qwen3 and Qwen3-Coder, Gemma 3, Llama 4, Mixtral 8x22B,
gpt-oss, Kimi K2, GLM-4.5): their parameter counts against the published ones, the shape features each
family relies on, and agreement with the Hugging Face config reader and with the shapes the validation
cases carry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.validation.cases import bundled_dir
from clustersim.workload.transformer import FfnType, Transformer
from clustersim.workload.zoo import load_model, read_hf_config
from tests.workload.hf_configs import DEEPSEEK_V3, GEMMA3_27B, QWEN3_8B, QWEN3_30B_A3B

OPEN_MODELS = [
    "deepseek-v3", "qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b",
    "gemma3-27b", "llama4-scout", "llama4-maverick", "mixtral-8x22b",
    "gpt-oss-120b", "gpt-oss-20b", "kimi-k2", "glm-4.5", "glm-4.5-air", "qwen3-coder-480b-a35b",
]  # fmt: skip

# Llama 4's vision encoder (not in the zoo entry): 34 blocks of width 1408 with a 5632-wide GELU MLP
# (NVIDIA/NeMo @ 0278f41e81fb21c65d0628a8f543d17df83ec129 nemo/collections/vlm/llama4/model/vision.py,
# Llama4VisionConfig); its matrices alone, 4 h^2 + 2 h f a block, are 808,845,312 parameters.
LLAMA4_VISION_BLOCKS = 34 * (4 * 1408**2 + 2 * 1408 * 5632)


# gpt-oss (huggingface/transformers modular_gpt_oss.py): per layer a learned attention sink per query head and
# a router bias per expert, which the zoo's fields do not hold.
GPT_OSS_UNCOUNTED = {"gpt-oss-120b": 36 * (64 + 128), "gpt-oss-20b": 24 * (64 + 32)}

# Kimi K2 with its one dense layer (layer 0) counted as a MoE layer: 1 shared + 384 routed SwiGLU experts of
# 2048 and a router, less the dense MLP of 18432 (all 7168 wide).
KIMI_LAYER0_AS_MOE = 385 * 3 * 7168 * 2048 + 7168 * 384 - 3 * 7168 * 18432


def _model(model_id: str) -> Transformer:
    return load_model(model_id, use_env=False)


def _embedding(model: Transformer) -> int:
    return model.vocab * model.hidden


def _glm_mtp_layer(model_id: str) -> int:
    """GLM-4.5's multi-token prediction layer (vLLM glm4_moe_mtp.py): a MoE block, a 2h -> h projection and
    three norms; its embedding and output head are the model's."""
    model = _model(model_id)
    return model.layer_params() + 2 * model.hidden**2 + 3 * model.hidden


# ---- total parameters -------------------------------------------------------------------------------------
# (model id, published total, relative tolerance, what the zoo's count adds to match the published figure)
TOTALS: list[tuple[str, float, float, int]] = [
    # DeepSeek-V3: 671B (DeepSeek-AI 2024, arXiv 2412.19437, abstract); the multi-token prediction module
    # (the Hub's 685B less 671B) is not counted, as the paper does not count it.
    ("deepseek-v3", 671e9, 0.001, 0),
    # Qwen3-8B: 8,190,735,360 (keras-team/keras-hub keras_hub/src/models/qwen3/qwen3_presets.py; card: 8.2B).
    ("qwen3-8b", 8_190_735_360, 0.0, 0),
    # Qwen3-32B: 32.8B (model card, https://huggingface.co/Qwen/Qwen3-32B; rounded).
    ("qwen3-32b", 32.8e9, 0.0016, 0),
    # Qwen3-30B-A3B: 30,532,122,624 (keras-hub keras_hub/src/models/qwen3_moe/qwen3_moe_presets.py).
    ("qwen3-30b-a3b", 30_532_122_624, 0.0, 0),
    # Qwen3-235B-A22B: 235B (model card, https://huggingface.co/Qwen/Qwen3-235B-A22B; rounded).
    ("qwen3-235b-a22b", 235e9, 0.0022, 0),
    # Gemma 3 27B text: 27,009,002,240 with a 262,144-token vocabulary (keras-hub
    # keras_hub/src/models/gemma3/gemma3_presets.py, gemma3_27b_text) + the checkpoint's 64 more rows.
    ("gemma3-27b", 27_009_002_240 + 64 * 5376, 0.0, 0),
    # Llama 4 Scout: 109B total with its vision encoder (meta-llama/llama-models @ 038acb9f
    # models/llama4/MODEL_CARD.md): the text model plus the encoder's block matrices.
    ("llama4-scout", 109e9, 0.005, LLAMA4_VISION_BLOCKS),
    # Llama 4 Maverick: 400B total with the same vision encoder (the model card): 400.71B text + 0.81B.
    ("llama4-maverick", 400e9, 0.004, LLAMA4_VISION_BLOCKS),
    # Mixtral 8x22B: 141B (Mistral AI, https://mistral.ai/news/mixtral-8x22b, 2024-04-17; rounded).
    ("mixtral-8x22b", 141e9, 0.0036, 0),
    # gpt-oss: 116.83B and 20.91B (OpenAI 2025, gpt-oss Model Card, arXiv 2508.10925, Table 1), held within the
    # rounding of the last digit, with the attention sinks and router biases the fields leave out.
    ("gpt-oss-120b", 116.83e9, 0.005 / 116.83, GPT_OSS_UNCOUNTED["gpt-oss-120b"]),
    ("gpt-oss-20b", 20.91e9, 0.005 / 20.91, GPT_OSS_UNCOUNTED["gpt-oss-20b"]),
    # Kimi K2: 1043B (GLM-4.5 report, arXiv 2508.06471, Table 1; Kimi's report: 1.04T) is 1,042.97B, the count
    # with layer 0 as a MoE layer; the checkpoint's layer 0 is dense (first_k_dense_replace 1), so the zoo's
    # count is 1,026.41B, 1.6% under.
    ("kimi-k2", 1043e9, 0.5 / 1043, KIMI_LAYER0_AS_MOE),
    # GLM-4.5: 355B (arXiv 2508.06471, Table 1, counting the MTP layer but neither the embedding nor the
    # output layer): 355.24B. GLM-4.5-Air's 106B is its count without the MTP layer, 105.61B; with it,
    # as the caption says, 107.99B, 1.9% over.
    ("glm-4.5", 355e9, 0.5 / 355, _glm_mtp_layer("glm-4.5") - 2 * 151552 * 5120),
    ("glm-4.5-air", 106e9, 0.5 / 106, -2 * 151552 * 4096),
    # Qwen3-Coder-480B-A35B: 480B (model card, https://huggingface.co/Qwen/Qwen3-Coder-480B-A35B-Instruct).
    ("qwen3-coder-480b-a35b", 480e9, 0.5 / 480, 0),
]


@pytest.mark.parametrize(("model_id", "published", "tolerance", "added"), TOTALS)
def test_published_total_parameters(model_id: str, published: float, tolerance: float, added: int) -> None:
    total = _model(model_id).num_params() + added
    if tolerance:
        assert total == pytest.approx(published, rel=tolerance)
    else:
        assert total == published


def test_every_open_model_is_within_one_percent_of_its_published_total() -> None:
    published = {model_id: total for model_id, total, _, _ in TOTALS}
    assert set(published) == set(OPEN_MODELS)
    for model_id in set(OPEN_MODELS) - {"llama4-scout", "kimi-k2"}:
        assert _model(model_id).num_params() == pytest.approx(published[model_id], rel=0.01), model_id
    # Kimi K2 as checkpointed (a dense layer 0) is 1.6% under the published 1043B; within the README's "1T".
    kimi = _model("kimi-k2").num_params()
    assert kimi == pytest.approx(1043e9, rel=0.017) and 0.5e12 <= kimi < 1.5e12
    # Scout's text model alone is 1.1% under 109B; with the vision encoder's block matrices it is
    # 108.58B, inside the rounding of the published 109B.
    scout = _model("llama4-scout").num_params()
    assert scout == pytest.approx(109e9, rel=0.012) and scout < 109e9
    assert 108.5e9 <= scout + LLAMA4_VISION_BLOCKS < 109.5e9


def test_non_embedding_parameters_of_the_model_cards() -> None:
    # Qwen3 model cards: non-embedding 6.95B (8B), 31.2B (32B), 29.9B (30B-A3B), 234B (235B-A22B);
    # Gemma 3 report (Gemma Team 2025, arXiv 2503.19786, Table 1): 27B non-embedding 25,600M.
    for model_id, published, tolerance in [
        ("qwen3-8b", 6.95e9, 0.001),
        ("qwen3-32b", 31.2e9, 0.001),
        ("qwen3-30b-a3b", 29.9e9, 0.002),
        ("qwen3-235b-a22b", 234e9, 0.002),
        ("gemma3-27b", 25_600e6, 5e-4),
    ]:
        model = _model(model_id)
        embeddings = _embedding(model) * (1 if model.tied_embeddings else 2)
        assert model.num_params() - embeddings == pytest.approx(published, rel=tolerance), model_id


# ---- active parameters ------------------------------------------------------------------------------------
def test_active_parameters_within_one_percent() -> None:
    # Mixtral 8x22B announcement: 39B active; Qwen3-235B-A22B model card: 22B activated.
    for model_id, published in [("mixtral-8x22b", 39e9), ("qwen3-235b-a22b", 22e9)]:
        assert _model(model_id).active_params() == pytest.approx(published, rel=0.01), model_id


def test_active_parameters_within_the_rounding_of_the_published_figure() -> None:
    # DeepSeek-V3, "37B activated" (arXiv 2412.19437, abstract), leaves out the input embedding (a table
    # lookup): 36.63B, 1.0% under 37B and inside its rounding [36.5B, 37.5B); with it, 37.55B.
    v3 = _model("deepseek-v3")
    assert 36.5e9 <= v3.active_params() - _embedding(v3) < 37.5e9
    assert v3.active_params() == 37_552_282_624
    # Qwen3-30B-A3B, "3.3B activated" (model card): 3.353B with both embeddings, the card's figure cut to
    # one decimal, not rounded.
    assert 3.3e9 <= _model("qwen3-30b-a3b").active_params() < 3.4e9
    # Llama 4 Scout, "17B (Activated)" (model card): 17.17B with both embeddings, 1.0% over and inside
    # the rounding [16.5B, 17.5B).
    assert 16.5e9 <= _model("llama4-scout").active_params() < 17.5e9
    # gpt-oss, "5.13B" and "3.61B" active (arXiv 2508.10925, Table 1), count the unembedding, not the
    # embedding table: 5.1328B and 3.6083B with the sinks and router biases.
    for model_id, low in [("gpt-oss-120b", 5.125e9), ("gpt-oss-20b", 3.605e9)]:
        model = _model(model_id)
        assert low <= model.active_params() - _embedding(model) + GPT_OSS_UNCOUNTED[model_id] < low + 0.01e9
    # Kimi K2, "32B activated" (README; GLM-4.5 report): 31.69B without the input embedding, as for
    # DeepSeek-V3. Its report's 32.6B is not reproduced: 32.86B with both embeddings, 0.8% over.
    kimi = _model("kimi-k2")
    assert 31.5e9 <= kimi.active_params() - _embedding(kimi) < 32.5e9
    # GLM-4.5 and -Air, "32B" and "12B" activated (arXiv 2508.06471, Table 1, without the embedding and the
    # output layer): 32.08B and 12.18B.
    for model_id, published in [("glm-4.5", 32e9), ("glm-4.5-air", 12e9)]:
        model = _model(model_id)
        assert published - 0.5e9 <= model.active_params() - 2 * _embedding(model) < published + 0.5e9
    # Qwen3-Coder-480B-A35B, "35B activated" (model card): 35.47B with both embeddings.
    assert 34.5e9 <= _model("qwen3-coder-480b-a35b").active_params() < 35.5e9
    # Llama 4 Maverick, "17B (Activated)": 17.18B (its dense blocks' MLPs, 16384 wide, are as wide as
    # the routed and shared expert a MoE block runs).
    assert 16.5e9 <= _model("llama4-maverick").active_params() < 17.5e9


def test_moe_counts_follow_from_the_experts() -> None:
    for model_id, routed_inactive in [
        ("llama4-scout", 15),
        ("llama4-maverick", 127),
        ("mixtral-8x22b", 6),
        ("qwen3-235b-a22b", 120),
        ("gpt-oss-120b", 124),
        ("gpt-oss-20b", 28),
        ("kimi-k2", 376),
        ("glm-4.5", 152),
        ("glm-4.5-air", 120),
        ("qwen3-coder-480b-a35b", 152),
    ]:
        model = _model(model_id)
        inactive = model.moe_layers * routed_inactive * model.mlp_params()
        assert model.num_params() - model.active_params() == inactive, model_id


# ---- shapes -----------------------------------------------------------------------------------------------
def test_deepseek_v3_latent_attention_and_leading_dense_layers() -> None:
    v3 = _model("deepseek-v3")
    assert v3.mla is not None and v3.moe is not None
    assert (v3.dense_layers, v3.moe_layers, v3.ffn_hidden, v3.expert_ffn) == (3, 58, 18432, 2048)
    assert (v3.moe.experts, v3.moe.top_k, v3.moe.shared_experts, v3.active_mlps) == (256, 8, 1, 9)
    assert (v3.kv_cache_elements, v3.kv_cache_heads, v3.context_width) == (512 + 64, 1, 128 * 128)


def test_gemma3_windows_five_layers_in_six() -> None:
    gemma = _model("gemma3-27b")
    assert (gemma.ffn_type, gemma.layer_norms, gemma.qk_norm, gemma.tied_embeddings) == (FfnType.GEGLU, 4, True, True)
    # Layers 6, 12, ..., 60 see the whole sequence: 10 of 62.
    assert gemma.layers - (gemma.window_layers or 0) == len(range(6, 63, 6)) == 10
    assert gemma.attended_keys(32768) == 10 * 32768 + 52 * 1024


def test_llama4_scout_chunked_layers_priced_as_a_window() -> None:
    scout = _model("llama4-scout")
    assert scout.moe is not None and (scout.moe.experts, scout.moe.top_k, scout.moe.shared_experts) == (16, 1, 1)
    # Up to the chunk (8192 tokens, the entry's seq_len) every layer sees every key, as with a window.
    assert scout.attended_keys(8192) == 48 * 8192
    # Beyond it, 12 global (NoPE) layers see the sequence, 36 see 8192 keys.
    assert scout.attended_keys(65536) == 12 * 65536 + 36 * 8192


def test_llama4_maverick_alternates_dense_and_moe_blocks() -> None:
    maverick, scout = _model("llama4-maverick"), _model("llama4-scout")
    assert (maverick.moe_layer_step, maverick.moe_layers, maverick.dense_mlp_layers) == (2, 24, 24)
    assert (maverick.ffn_hidden, maverick.expert_ffn, scout.expert_ffn) == (16384, 8192, 8192)
    # Same attention, embeddings and active MLP width per block: the same active parameters but for
    # Maverick's 128-expert routers on half the blocks.
    router_difference = 24 * 5120 * 128 - 48 * 5120 * 16
    assert maverick.active_params() - scout.active_params() == router_difference


def test_qwen3_query_key_norms_and_heads_wider_than_hidden() -> None:
    for model_id in ["qwen3-8b", "qwen3-32b", "qwen3-30b-a3b", "qwen3-235b-a22b"]:
        model = _model(model_id)
        assert model.qk_norm and not model.qkv_bias and model.head_dim == 128, model_id
    assert _model("qwen3-32b").q_width == 8192 > _model("qwen3-32b").hidden


def test_every_open_model_states_its_context() -> None:
    for model_id in OPEN_MODELS:
        model = _model(model_id)
        assert model.max_context_tokens is not None and model.seq_len <= model.max_context_tokens, model_id


# ---- the same models read from their config.json ----------------------------------------------------------
@pytest.mark.parametrize(
    ("model_id", "config"),
    [
        ("deepseek-v3", DEEPSEEK_V3),
        ("qwen3-8b", QWEN3_8B),
        ("qwen3-30b-a3b", QWEN3_30B_A3B),
        ("gemma3-27b", GEMMA3_27B),
    ],
)
def test_zoo_entry_counts_as_its_config_json(model_id: str, config: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    read = read_hf_config(path)
    zoo = _model(model_id)
    assert (read.num_params(), read.active_params()) == (zoo.num_params(), zoo.active_params())
    assert read.kv_cache_elements == zoo.kv_cache_elements
    assert read.model_flops_per_token(4096) == zoo.model_flops_per_token(4096)


def test_qwen3_moe_shapes_match_the_validation_cases() -> None:
    checked = 0
    for line in (bundled_dir() / "training.jsonl").read_text().splitlines():
        shape = (json.loads(line) if line.strip() else {}).get("model") or {}
        if shape.get("name") not in ("qwen3-30b-a3b", "qwen3-235b-a22b"):
            continue
        case = Transformer.model_validate({k: v for k, v in shape.items() if k in Transformer.model_fields})
        zoo = _model(shape["name"])
        # The cases leave out the query/key norms (qk_norm, 2 x 128 parameters a layer); the rest agrees.
        fields = ("layers", "hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn_type", "expert_ffn", "moe")
        assert [getattr(case, k) for k in fields] == [getattr(zoo, k) for k in fields], shape["name"]
        assert zoo.num_params() - case.num_params() == zoo.layers * 2 * zoo.head_dim
        checked += 1
    assert checked
