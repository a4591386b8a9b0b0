"""Hugging Face config.json files: each family's published parameter counts, and every refusal.

The configs (``hf_configs.py``) are the published ``config.json`` files. Each published total comes with
its source: where it is an exact count (a KerasHub preset's ``params``, a model's safetensors total, the
Pythia and Gemma papers' tables) the test asks for it exactly or says what the count leaves out; where
it is rounded ("7B") the tolerance says so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.errors import ClusterSimError
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import FfnType, Norm, Position
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs import (
    DEEPSEEK_V2,
    DEEPSEEK_V2_LITE,
    DEEPSEEK_V3,
    FALCON_7B,
    FALCON_40B,
    GEMMA2_9B,
    GEMMA3_1B,
    GEMMA3_4B,
    GEMMA3_27B,
    GEMMA_7B,
    GPT2,
    LLAMA3_8B,
    MISTRAL_7B,
    MIXTRAL_8X7B,
    PHI_2,
    PHI_3_MINI,
    PYTHIA_1_4B,
    QWEN2_7B,
    QWEN3_8B,
    QWEN3_30B_A3B,
    QWEN15_MOE,
)


def _read(tmp_path: Path, config: dict[str, Any], name: str = "config.json") -> Any:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    return read_hf_config(path)


# ---- published parameter counts -------------------------------------------------------------------------
# (config, published total, relative tolerance). Exact figures are asked for exactly (tolerance 0) or
# within what the count leaves out; rounded ones within their rounding.
KERAS = "keras-hub keras_hub/src/models"  # KerasHub presets carry the exact parameter count of each checkpoint
PUBLISHED = {
    # Meta-Llama-3-8B: 8,030,261,248 (the model's safetensors total on the Hub; KerasHub llama3_8b_en).
    "llama3-8b": (LLAMA3_8B, 8_030_261_248, 0.0),
    # Mistral-7B-v0.1: 7,241,732,096 (KERAS/mistral/mistral_presets.py, mistral_7b_en).
    "mistral-7b": (MISTRAL_7B, 7_241_732_096, 0.0),
    # Mixtral-8x7B: 46,702,792,704 (KERAS/mixtral/mixtral_presets.py, mixtral_8_7b_en).
    "mixtral-8x7b": (MIXTRAL_8X7B, 46_702_792_704, 0.0),
    # Qwen2-7B: 7,615,616,512 (KERAS/qwen/qwen_presets.py, qwen2.5_math_7b_en: the same 28-layer 3584-wide
    # shape, vocabulary 152,064; the Qwen2.5-7B model card: 7.61B, 6.53B without embeddings).
    "qwen2-7b": (QWEN2_7B, 7_615_616_512, 0.0),
    # Qwen1.5-MoE-A2.7B: 14.3B (model card, rounded); the shared expert's gate (h per layer) is not counted.
    "qwen1.5-moe-a2.7b": (QWEN15_MOE, 14.3e9, 0.005),
    # Qwen3-8B: 8,190,735,360 (KERAS/qwen3/qwen3_presets.py, qwen3_8b_en; model card: 8.2B).
    "qwen3-8b": (QWEN3_8B, 8_190_735_360, 0.0),
    # Qwen3-30B-A3B: 30,532,122,624 (KERAS/qwen3_moe/qwen3_moe_presets.py; model card: 30.5B).
    "qwen3-30b-a3b": (QWEN3_30B_A3B, 30_532_122_624, 0.0),
    # Gemma-7B: 8,537,680,896 (KERAS/gemma/gemma_presets.py, gemma_7b_en; Gemma report Table 2:
    # 786,432,000 embedding + 7,751,248,896 non-embedding).
    "gemma-7b": (GEMMA_7B, 8_537_680_896, 0.0),
    # Gemma-2-9B: 9,241,705,984 (KERAS/gemma/gemma_presets.py, gemma2_9b_en).
    "gemma-2-9b": (GEMMA2_9B, 9_241_705_984, 0.0),
    # Gemma-3-1B: 999,885,952 (KERAS/gemma3/gemma3_presets.py, gemma3_1b).
    "gemma-3-1b": (GEMMA3_1B, 999_885_952, 0.0),
    # Gemma-3-27B text: 27,009,002,240 (KERAS gemma3_27b_text, a 262,144-token vocabulary) + the 64 more
    # tokens of the Hub's 262,208 x 5,376 (the SigLIP vision tower, 417M, is not counted).
    "gemma-3-27b": (GEMMA3_27B, 27_009_002_240 + 64 * 5376, 0.0),
    # DeepSeek-V2-Lite: 15.7B (Liu et al. 2024, arXiv 2405.04434, appendix B; rounded).
    "deepseek-v2-lite": (DEEPSEEK_V2_LITE, 15.7e9, 0.005),
    # DeepSeek-V2: 236B (arXiv 2405.04434, abstract; rounded).
    "deepseek-v2": (DEEPSEEK_V2, 236e9, 0.005),
    # DeepSeek-V3: 671B (arXiv 2412.19437, abstract; the Hub's 685B adds the 14B MTP module, not counted).
    "deepseek-v3": (DEEPSEEK_V3, 671e9, 0.005),
    # GPT-2 small: 124,439,808 (KERAS/gpt2/gpt2_presets.py, gpt2_base_en).
    "gpt2": (GPT2, 124_439_808, 0.0),
    # Pythia-1.4B: 1,414,647,808 (Biderman et al. 2023, arXiv 2304.01373, Table 1 / the Pythia README).
    "pythia-1.4b": (PYTHIA_1_4B, 1_414_647_808, 0.0),
    # Falcon-7B: "7B" (model card; rounded): 6.92B with the output layer tied to the embedding, as
    # transformers' FalconForCausalLM builds it (tie_word_embeddings defaults to true).
    "falcon-7b": (FALCON_7B, 7e9, 0.02),
    # Falcon-40B: "40B" (model card; rounded): 41.3B tied.
    "falcon-40b": (FALCON_40B, 40e9, 0.04),
    # Phi-2: 2,779,683,840 (the Hub's safetensors total); the output layer's bias, 51,200, is not counted.
    "phi-2": (PHI_2, 2_779_683_840, 2e-5),
    # Phi-3-mini: 3,821,079,552 (KERAS/phi3/phi3_presets.py, phi3_mini_4k_instruct_en; model card: 3.8B).
    "phi-3-mini": (PHI_3_MINI, 3_821_079_552, 0.0),
}


@pytest.mark.parametrize("model_id", list(PUBLISHED))
def test_published_total_parameters(model_id: str, tmp_path: Path) -> None:
    config, published, tolerance = PUBLISHED[model_id]
    model = _read(tmp_path, config)
    if tolerance:
        assert model.num_params() == pytest.approx(published, rel=tolerance)
    else:
        assert model.num_params() == published


# Active parameters of the MoE models: (config, published, tolerance, leave out the input embedding).
# DeepSeek's activated counts leave out the input embedding (a table lookup): with it they would be
# 2.66B, 21.4B and 37.6B; without, 2.45B, 20.9B and 36.6B against 2.4B, 21B and 37B.
ACTIVE = {
    # Mixtral-8x7B: 12.9B per token (Mistral AI, "Mixtral of experts", 2023-12-11; rounded).
    "mixtral-8x7b": (MIXTRAL_8X7B, 12.9e9, 0.005, False),
    # Qwen1.5-MoE-A2.7B: 2.7B activated (model card; rounded).
    "qwen1.5-moe-a2.7b": (QWEN15_MOE, 2.7e9, 0.01, False),
    # Qwen3-30B-A3B: 3.3B activated (model card; rounded).
    "qwen3-30b-a3b": (QWEN3_30B_A3B, 3.3e9, 0.02, False),
    # DeepSeek-V2-Lite: 2.4B activated (arXiv 2405.04434, appendix B; rounded down from 2.45B).
    "deepseek-v2-lite": (DEEPSEEK_V2_LITE, 2.4e9, 0.025, True),
    # DeepSeek-V2: 21B activated (arXiv 2405.04434, abstract; rounded).
    "deepseek-v2": (DEEPSEEK_V2, 21e9, 0.025, True),
    # DeepSeek-V3: 37B activated (arXiv 2412.19437, abstract; rounded).
    "deepseek-v3": (DEEPSEEK_V3, 37e9, 0.025, True),
}


@pytest.mark.parametrize("model_id", list(ACTIVE))
def test_published_active_parameters(model_id: str, tmp_path: Path) -> None:
    config, published, tolerance, no_input_embedding = ACTIVE[model_id]
    model = _read(tmp_path, config)
    active = model.active_params() - (model.vocab * model.hidden if no_input_embedding else 0)
    assert active == pytest.approx(published, rel=tolerance)


def test_published_non_embedding_parameters(tmp_path: Path) -> None:
    # Gemma 3 report (Gemma Team 2025, arXiv 2503.19786, Table 1): non-embedding 3,209M (4B) and
    # 25,600M (27B), rounded to 1M; Qwen3-8B and Qwen3-30B-A3B model cards: 6.95B and 29.9B.
    for config, published, tolerance in [
        (GEMMA3_4B, 3_209e6, 5e-4),
        (GEMMA3_27B, 25_600e6, 5e-4),
        (QWEN3_8B, 6.95e9, 1e-3),
        (QWEN3_30B_A3B, 29.9e9, 2e-3),
    ]:
        model = _read(tmp_path, config)
        embeddings = model.vocab * model.hidden * (1 if model.tied_embeddings else 2)
        assert model.num_params() - embeddings == pytest.approx(published, rel=tolerance)


def test_llama3_config_matches_the_zoo(tmp_path: Path) -> None:
    model = _read(tmp_path, LLAMA3_8B)
    zoo = load_model("llama3-8b", use_env=False)
    assert model.name == "meta-llama/Meta-Llama-3-8B"
    assert model.num_params() == zoo.num_params() and model.model_flops_per_token() == zoo.model_flops_per_token()


# ---- what each family reads ---------------------------------------------------------------------------------
def test_gemma_reads_geglu_its_head_dim_and_tied_embeddings(tmp_path: Path) -> None:
    model = _read(tmp_path, GEMMA_7B)
    assert (model.ffn_type, model.head_dim, model.q_width, model.tied_embeddings) == (FfnType.GEGLU, 256, 4096, True)
    assert (model.norm, model.position, model.linear_bias, model.layer_norms) == (
        Norm.RMSNORM,
        Position.ROTARY,
        False,
        2,
    )
    assert _read(tmp_path, {k: v for k, v in GEMMA_7B.items() if k != "head_dim"}).head_dim == 256  # Gemma's default


def test_gemma2_and_3_norms_and_windows(tmp_path: Path) -> None:
    two = _read(tmp_path, GEMMA2_9B)
    assert (two.layer_norms, two.qk_norm, two.sliding_window, two.window_layers) == (4, False, 4096, 21)
    three = _read(tmp_path, GEMMA3_27B)
    # Five layers in six windowed: 62 layers hold 10 global ones (layers 6, 12, ..., 60).
    assert (three.layer_norms, three.qk_norm, three.sliding_window, three.window_layers) == (4, True, 1024, 52)
    assert (three.heads, three.kv_heads, three.head_dim, three.vocab) == (32, 16, 128, 262_208)
    four = _read(tmp_path, GEMMA3_4B)  # Gemma3TextConfig's defaults: 8 heads, 4 KV heads of 256
    assert (four.heads, four.kv_heads, four.head_dim, four.vocab, four.window_layers) == (8, 4, 256, 262_208, 29)
    listed = {**GEMMA3_1B, "layer_types": ["sliding_attention"] * 20 + ["full_attention"] * 6}
    assert _read(tmp_path, listed).window_layers == 20  # layer_types, when given, decides


def test_qwen_biases_norms_and_experts(tmp_path: Path) -> None:
    qwen2 = _read(tmp_path, QWEN2_7B)
    assert (qwen2.qkv_bias, qwen2.linear_bias, qwen2.qk_norm, qwen2.window_layers) == (True, False, False, 0)
    qwen3 = _read(tmp_path, QWEN3_30B_A3B)
    assert (qwen3.qkv_bias, qwen3.qk_norm, qwen3.expert_ffn, qwen3.total_mlps, qwen3.active_mlps) == (
        False,
        True,
        768,
        128,
        8,
    )
    moe = _read(tmp_path, QWEN15_MOE)
    assert moe.moe is not None and (moe.moe.shared_experts, moe.active_mlps) == (4, 8)  # 5632 = 4 x 1408
    windowed = _read(
        tmp_path, {**QWEN2_7B, "use_sliding_window": True, "max_window_layers": 20, "sliding_window": 4096}
    )
    assert (windowed.sliding_window, windowed.window_layers) == (4096, 8)  # layers 20 to 27
    leading = _read(tmp_path, {**QWEN3_30B_A3B, "mlp_only_layers": [0, 1]})
    assert (leading.dense_layers, leading.ffn_hidden, leading.expert_ffn) == (2, 6144, 768)
    sparse = _read(tmp_path, {**QWEN3_30B_A3B, "decoder_sparse_step": 2})  # layers 1, 3, ...: experts
    assert (sparse.moe_layer_step, sparse.ffn_hidden, sparse.expert_ffn, sparse.dense_layers) == (2, 6144, 768, 0)
    every = _read(tmp_path, QWEN3_30B_A3B)
    assert sparse.num_params() < every.num_params()  # half the layers hold a 6144-wide MLP, not 128 experts


def test_deepseek_latent_attention_and_dense_layers(tmp_path: Path) -> None:
    v3 = _read(tmp_path, DEEPSEEK_V3)
    assert v3.mla is not None and v3.moe is not None
    assert (v3.mla.q_lora_rank, v3.mla.kv_lora_rank, v3.mla.rope_head_dim, v3.mla.v_head_dim) == (1536, 512, 64, 128)
    assert (v3.head_dim, v3.kv_heads, v3.dense_layers, v3.ffn_hidden, v3.expert_ffn) == (192, 128, 3, 18432, 2048)
    assert (v3.moe.experts, v3.moe.shared_experts, v3.moe.top_k) == (256, 1, 8)
    assert (v3.moe.groups, v3.moe.group_top_k) == (8, 4)  # node-limited routing: n_group, topk_group
    # Attention of one layer: q 7168x1536 + 1536x(128x192), kv 7168x576 + 512x(128x256), out 16384x7168.
    assert v3.attention_matmul_params() == 7168 * 1536 + 1536 * 24576 + 7168 * 576 + 512 * 32768 + 16384 * 7168
    lite = _read(tmp_path, DEEPSEEK_V2_LITE)
    assert lite.mla is not None and lite.mla.q_lora_rank == 0  # q_lora_rank null: a full-rank query
    assert lite.qkv_matmul_params() == 2048 * 16 * 192 + 2048 * 576 + 512 * 16 * 256


def test_falcon_phi_gpt2_and_neox_blocks(tmp_path: Path) -> None:
    falcon = _read(tmp_path, FALCON_7B)
    assert (falcon.kv_heads, falcon.head_dim, falcon.ffn_hidden, falcon.layer_norms) == (1, 64, 4 * 4544, 1)
    assert (falcon.norm, falcon.position, falcon.linear_bias, falcon.tied_embeddings) == (
        Norm.LAYERNORM,
        Position.ROTARY,
        False,
        True,
    )
    # The module tree of FalconForCausalLM: QKV 4544 -> 4672, dense, 4h MLP, one LayerNorm, ln_f, tied head.
    assert falcon.num_params() == 65024 * 4544 + 32 * (4544 * 4672 + 4544**2 + 2 * 4544 * 18176 + 2 * 4544) + 2 * 4544
    big = _read(tmp_path, FALCON_40B)
    assert (big.kv_heads, big.layer_norms) == (8, 2)  # ln_attn and ln_mlp
    old = {k: v for k, v in FALCON_7B.items() if not k.startswith("num_")} | {"n_head": 71, "n_layer": 32}
    assert _read(tmp_path, {**old, "model_type": "RefinedWebModel"}).num_params() == falcon.num_params()
    phi = _read(tmp_path, PHI_2)
    assert (phi.layer_norms, phi.linear_bias, phi.norm, phi.ffn_type) == (1, True, Norm.LAYERNORM, FfnType.GELU)
    gpt2 = _read(tmp_path, GPT2)
    assert (gpt2.position, gpt2.seq_len, gpt2.ffn_hidden, gpt2.tied_embeddings) == (Position.LEARNED, 1024, 3072, True)
    neox = _read(tmp_path, PYTHIA_1_4B)
    assert (neox.linear_bias, neox.tied_embeddings, neox.layer_norms, neox.position) == (
        True,
        False,
        2,
        Position.ROTARY,
    )


def test_windows_of_mistral_and_phi3(tmp_path: Path) -> None:
    mistral = _read(tmp_path, MISTRAL_7B)
    assert (mistral.sliding_window, mistral.window_layers, mistral.seq_len) == (4096, 32, 8192)
    # At 8,192 tokens every layer's queries meet 4,096 keys.
    assert mistral.attention_flops_per_token(8192) == 2 * 2 * 4096 * 32 * 4096
    assert _read(tmp_path, MIXTRAL_8X7B).window_layers == 0  # sliding_window null
    phi3 = _read(tmp_path, PHI_3_MINI)
    assert (phi3.sliding_window, phi3.window_layers, phi3.seq_len) == (2047, 32, 4096)


def test_seq_len_is_capped_for_rotary_models(tmp_path: Path) -> None:
    assert _read(tmp_path, QWEN2_7B).seq_len == 8192
    assert _read(tmp_path, {**LLAMA3_8B, "max_position_embeddings": 2048}).seq_len == 2048


# ---- the name ---------------------------------------------------------------------------------------------------
def test_name_rule(tmp_path: Path) -> None:
    bare = {k: v for k, v in LLAMA3_8B.items() if k != "_name_or_path"}
    assert _read(tmp_path, LLAMA3_8B).name == "meta-llama/Meta-Llama-3-8B"  # _name_or_path
    assert _read(tmp_path, bare, "llama-3-8b.json").name == "llama-3-8b"  # the file's stem
    assert _read(tmp_path, bare, "Meta-Llama-3-8B/config.json").name == "Meta-Llama-3-8B"  # the folder
    assert _read(tmp_path, {**bare, "_name_or_path": " "}, "x/config.json").name == "x"


def test_a_folder_is_read_through_its_config(tmp_path: Path) -> None:
    _read(tmp_path, MIXTRAL_8X7B, "Mixtral-8x7B-v0.1/config.json")
    model = load_model(str(tmp_path / "Mixtral-8x7B-v0.1"))
    assert (model.name, model.seq_len, model.num_params()) == ("Mixtral-8x7B-v0.1", 8192, 46_702_792_704)


# ---- refusals: one error naming the file, the field, the value and what is valid -----------------------------------
def _refused(tmp_path: Path, config: Any, *parts: str) -> str:
    path = tmp_path / "bad" / "config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config))
    with pytest.raises(ClusterSimError) as info:
        read_hf_config(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    for part in parts:
        assert part in message, message
    return message


def _without(config: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k != key}


REFUSALS = {
    "unknown model_type": ({**LLAMA3_8B, "model_type": "mamba"}, ["'model_type'", "'mamba'", "known:", "llama"]),
    "no model_type": (_without(LLAMA3_8B, "model_type"), ["'model_type'", "known:"]),
    "unknown hidden_act": ({**LLAMA3_8B, "hidden_act": "relu2"}, ["'hidden_act'", "'relu2'", "silu, swish"]),
    "gated family with gelu": ({**LLAMA3_8B, "hidden_act": "gelu"}, ["'hidden_act'", "'gelu'", "silu"]),
    "gemma with silu": ({**GEMMA_7B, "hidden_act": "silu"}, ["'hidden_act'", "gelu_pytorch_tanh"]),
    "falcon activation": ({**FALCON_7B, "activation": "swiglu"}, ["'activation'", "'swiglu'"]),
    "missing field": (_without(LLAMA3_8B, "vocab_size"), ["'vocab_size'", "required field missing"]),
    "null field": ({**LLAMA3_8B, "num_hidden_layers": None}, ["'num_hidden_layers'", "required"]),
    "zero kv heads": ({**LLAMA3_8B, "num_key_value_heads": 0}, ["'num_key_value_heads'", "value 0", "at least 1"]),
    "negative layers": ({**LLAMA3_8B, "num_hidden_layers": -2}, ["'num_hidden_layers'", "value -2", "at least 1"]),
    "boolean hidden": ({**LLAMA3_8B, "hidden_size": True}, ["'hidden_size'", "value True", "not a boolean"]),
    "string hidden": ({**LLAMA3_8B, "hidden_size": "4096"}, ["'hidden_size'", "value '4096'", "whole number"]),
    "fractional hidden": ({**LLAMA3_8B, "hidden_size": 4096.5}, ["'hidden_size'", "value 4096.5", "whole number"]),
    "zero head_dim": ({**LLAMA3_8B, "head_dim": 0}, ["'head_dim'", "value 0"]),
    "boolean flag": ({**LLAMA3_8B, "tie_word_embeddings": "no"}, ["'tie_word_embeddings'", "true or false"]),
    "shape rule": ({**LLAMA3_8B, "num_key_value_heads": 5}, ["kv_heads 5", "not a multiple"]),
    "classifier": (
        {**LLAMA3_8B, "architectures": ["LlamaForSequenceClassification"]},
        ["'architectures'", "LlamaForSequenceClassification", "ForCausalLM"],
    ),
    "experts on a dense family": ({**LLAMA3_8B, "num_local_experts": 8}, ["'num_local_experts'", "no experts"]),
    "llama attention bias": ({**LLAMA3_8B, "attention_bias": True}, ["'attention_bias'", "not modelled"]),
    "llama mlp bias": ({**LLAMA3_8B, "mlp_bias": True}, ["'mlp_bias'", "not modelled"]),
    "phi qk layernorm": ({**PHI_2, "qk_layernorm": True}, ["'qk_layernorm'", "not modelled"]),
    "falcon alibi": ({**FALCON_7B, "alibi": True}, ["'alibi'", "ALiBi"]),
    "neox without attention bias": ({**PYTHIA_1_4B, "attention_bias": False}, ["'attention_bias'", "not modelled"]),
    "gpt2 cross-attention": ({**GPT2, "add_cross_attention": True}, ["'add_cross_attention'", "not modelled"]),
    "sparse step with mlp-only layers": (
        {**QWEN3_30B_A3B, "decoder_sparse_step": 2, "mlp_only_layers": [0]},
        ["'decoder_sparse_step'", "value 2", "mlp_only_layers"],
    ),
    "sparse step beyond the layers": (
        {**QWEN3_30B_A3B, "decoder_sparse_step": 49},
        ["'decoder_sparse_step'", "value 49", "beyond the 48 layers"],
    ),
    "mlp-only layers not leading": ({**QWEN3_30B_A3B, "mlp_only_layers": [3]}, ["'mlp_only_layers'", "[3]"]),
    "shared expert width": (
        {**QWEN15_MOE, "shared_expert_intermediate_size": 2000},
        ["'shared_expert_intermediate_size'", "value 2000", "multiple of moe_intermediate_size 1408"],
    ),
    "moe layer frequency": ({**DEEPSEEK_V3, "moe_layer_freq": 2}, ["'moe_layer_freq'", "value 2"]),
    "deepseek kv heads": ({**DEEPSEEK_V3, "num_key_value_heads": 8}, ["'num_key_value_heads'", "value 8"]),
    "all layers dense": ({**DEEPSEEK_V3, "first_k_dense_replace": 61}, ["'first_k_dense_replace'", "value 61"]),
    "gemma3 without text_config": (_without(GEMMA3_27B, "text_config"), ["'text_config'", "JSON object"]),
    "gemma3 text field": (
        {**GEMMA3_27B, "text_config": {**GEMMA3_27B["text_config"], "num_hidden_layers": 0}},
        ["'text_config.num_hidden_layers'", "value 0"],
    ),
    "layer_types": (
        {**GEMMA3_1B, "layer_types": ["sliding_attention"] * 3},
        ["'layer_types'", "a list of 26 entries"],
    ),
    "not an object": ([1, 2], ["one JSON object"]),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_name_the_file_field_value_and_rule(case: str, tmp_path: Path) -> None:
    config, parts = REFUSALS[case]
    _refused(tmp_path, config, *parts)


def test_unreadable_files(tmp_path: Path) -> None:
    bad = tmp_path / "a" / "config.json"
    bad.parent.mkdir()
    bad.write_text("{not json")
    with pytest.raises(ClusterSimError, match=r"a/config\.json.*cannot read the JSON config"):
        load_model(str(bad))
    latin = tmp_path / "b" / "config.json"
    latin.parent.mkdir()
    latin.write_bytes(b'{"model_type": "caf\xe9"}')
    with pytest.raises(ClusterSimError, match=r"b/config\.json.*not UTF-8 text"):
        load_model(str(latin))
    with pytest.raises(ClusterSimError, match=r"a folder without a config\.json"):
        load_model(str(tmp_path / "a" / ".."))
    with pytest.raises(ClusterSimError, match="no such model file"):
        load_model(str(tmp_path / "missing" / "config.json"))
