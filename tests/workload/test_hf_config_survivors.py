"""What mutation testing of the Hugging Face config readers (``workload.hf``, ``hf_fields``, ``hf_limits``,
``hf_moe``) found unpinned: the defaults a family takes for a field its config leaves out (transformers' own), the
field names it reads, window rules on odd layer counts, expert layouts at their edges, YaRN's attention factor, the
context a config covers at its edges, quantized checkpoints' groups and zero points (compressed-tensors' strategy,
group size, symmetry and mixed widths among them), and each refusal's field, value and whole rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.errors import CatalogFileError
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import Transformer
from tests.workload.hf_configs import (
    AWQ_4BIT,
    DEEPSEEK_V3,
    FALCON_7B,
    FALCON_40B,
    FP8_BLOCK,
    GEMMA2_9B,
    GEMMA3_1B,
    GEMMA_7B,
    GPT2,
    GPTQ_4BIT,
    LLAMA3_8B,
    PHI_2,
    PYTHIA_1_4B,
    QWEN2_7B,
    QWEN3_8B,
    QWEN3_30B_A3B,
    QWEN15_MOE,
)
from tests.workload.hf_configs_2025 import GLM_45, GPT_OSS_20B


def _read(tmp_path: Path, config: dict[str, Any]) -> Transformer:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return read_hf_config(path)


def _refusal(tmp_path: Path, config: Any) -> CatalogFileError:
    with pytest.raises(CatalogFileError) as caught:
        _read(tmp_path, config)
    return caught.value


def _without(config: dict[str, Any], *keys: str) -> dict[str, Any]:
    return {k: v for k, v in config.items() if k not in keys}


# ---- defaults and field names of GPT-2 and GPT-NeoX -------------------------------------------------------------
def test_gpt2_reads_its_own_mlp_width_and_activation_field_and_defaults_to_gelu_new(tmp_path: Path) -> None:
    assert _read(tmp_path, {**GPT2, "n_inner": 1000}).ffn_hidden == 1000  # n_inner null: 4 x 768
    assert _read(tmp_path, _without(GPT2, "activation_function")).ffn_hidden == 3072  # GPT-2's default, gelu_new
    error = _refusal(tmp_path, {**GPT2, "activation_function": "silu"})  # a gated activation on a plain MLP
    assert (error.field, error.value) == ("activation_function", "silu")
    assert error.rule == "this family's MLP takes gelu, gelu_new, gelu_fast, gelu_pytorch_tanh, gelu_accurate, " + (
        "quick_gelu, relu"
    )


def test_gpt_neox_defaults_to_gelu_and_untied_embeddings(tmp_path: Path) -> None:
    neox = _read(tmp_path, _without(PYTHIA_1_4B, "hidden_act", "tie_word_embeddings"))
    assert (neox.tied_embeddings, neox.linear_bias) == (False, True)
    error = _refusal(tmp_path, {**PYTHIA_1_4B, "hidden_act": "silu"})
    assert (error.field, error.value) == ("hidden_act", "silu")


def test_phi_defaults_to_gelu_new_and_untied_embeddings(tmp_path: Path) -> None:
    phi = _read(tmp_path, _without(PHI_2, "hidden_act", "tie_word_embeddings"))
    assert (phi.tied_embeddings, phi.layer_norms) == (False, 1)
    assert phi.num_params() == _read(tmp_path, PHI_2).num_params()
    error = _refusal(tmp_path, {**PHI_2, "hidden_act": "silu"})
    assert (error.field, error.value) == ("hidden_act", "silu")


# ---- Falcon's two decoder architectures, Llama's and DeepSeek's defaults ------------------------------------------
def test_falcon_reads_transformers_defaults_for_what_its_config_leaves_out(tmp_path: Path) -> None:
    """FalconConfig's defaults: the old decoder (one KV head, attention and MLP in parallel after one LayerNorm),
    no biases, tied embeddings, a 4h MLP and 2,048 positions."""
    bare = _without(FALCON_7B, "multi_query", "parallel_attn", "new_decoder_architecture", "bias")
    falcon = _read(tmp_path, bare)
    assert (falcon.kv_heads, falcon.layer_norms, falcon.linear_bias, falcon.tied_embeddings) == (1, 1, False, True)
    assert (falcon.ffn_hidden, falcon.seq_len, falcon.max_context_tokens) == (4 * 4544, 2048, 2048)


def test_falcon_reads_each_field_it_is_given(tmp_path: Path) -> None:
    stated = {**FALCON_7B, "multi_query": False, "parallel_attn": False, "bias": True, "tie_word_embeddings": False}
    falcon = _read(tmp_path, {**stated, "ffn_hidden_size": 10000, "max_position_embeddings": 4096})
    assert (falcon.kv_heads, falcon.layer_norms, falcon.linear_bias, falcon.tied_embeddings) == (71, 2, True, False)
    assert (falcon.ffn_hidden, falcon.seq_len) == (10000, 4096)


def test_falcon_new_decoder_reads_its_kv_heads_under_either_name_and_its_norms(tmp_path: Path) -> None:
    old_name = {**_without(FALCON_40B, "num_kv_heads"), "n_head_kv": 16}
    assert _read(tmp_path, old_name).kv_heads == 16  # the name before transformers 4.33
    assert _read(tmp_path, _without(FALCON_40B, "num_kv_heads")).kv_heads == 128  # absent: one a query head
    assert _read(tmp_path, {**FALCON_40B, "num_ln_in_parallel_attn": 1}).layer_norms == 1
    assert _read(tmp_path, FALCON_40B).layer_norms == 2


def test_llama_and_deepseek_default_to_silu_and_untied_embeddings(tmp_path: Path) -> None:
    llama = _read(tmp_path, _without(LLAMA3_8B, "hidden_act", "tie_word_embeddings"))
    assert llama.tied_embeddings is False and llama.num_params() == _read(tmp_path, LLAMA3_8B).num_params()
    bare = _without(DEEPSEEK_V3, "hidden_act", "tie_word_embeddings", "num_key_value_heads", "max_position_embeddings")
    deepseek = _read(tmp_path, bare)
    assert (deepseek.tied_embeddings, deepseek.kv_heads, deepseek.seq_len) == (False, 128, 2048)
    error = _refusal(tmp_path, {**DEEPSEEK_V3, "hidden_act": "gelu"})
    assert (error.field, error.value) == ("hidden_act", "gelu")


# ---- Gemma's windows, Qwen's windows, head size and experts ----------------------------------------------------
def test_gemma_windows_follow_transformers_layer_rules_on_any_layer_count(tmp_path: Path) -> None:
    """Gemma 2 slides on even layers from layer 0 (``not layer_idx % 2``): 2 of 3 layers. Gemma 3 attends globally
    on every sixth layer (``(i + 1) % 6 == 0``): none of 5 layers, one of 7."""
    assert _read(tmp_path, {**GEMMA2_9B, "num_hidden_layers": 3}).window_layers == 2
    assert _read(tmp_path, {**GEMMA3_1B, "num_hidden_layers": 5}).window_layers == 5
    assert _read(tmp_path, {**GEMMA3_1B, "num_hidden_layers": 7}).window_layers == 6


def test_gemma_reads_hidden_activation_before_hidden_act_and_defaults_to_the_tanh_gelu(tmp_path: Path) -> None:
    error = _refusal(tmp_path, {**GEMMA_7B, "hidden_activation": "silu"})
    assert (error.field, error.value) == ("hidden_activation", "silu")
    assert _read(tmp_path, _without(GEMMA_7B, "hidden_act")).num_params() == _read(tmp_path, GEMMA_7B).num_params()


def test_qwen_defaults_no_window_untied_embeddings_and_qwen3s_head_of_128(tmp_path: Path) -> None:
    bare = _without(QWEN2_7B, "use_sliding_window", "tie_word_embeddings", "hidden_act")
    qwen2 = _read(tmp_path, {**bare, "max_window_layers": 10, "sliding_window": 4096})  # a window stated, not used
    assert (qwen2.window_layers, qwen2.tied_embeddings) == (0, False)
    assert _read(tmp_path, _without(QWEN3_30B_A3B, "head_dim")).head_dim == 128  # not hidden / heads = 64


def test_qwen_windows_the_layers_from_max_window_layers_all_of_them_from_zero(tmp_path: Path) -> None:
    windowed = {**QWEN2_7B, "use_sliding_window": True, "sliding_window": 4096}
    assert _read(tmp_path, {**windowed, "max_window_layers": 0}).window_layers == 28
    assert _read(tmp_path, {**windowed, "max_window_layers": 20}).window_layers == 8
    assert _read(tmp_path, _without(windowed, "max_window_layers")).window_layers == 0  # from the last: none


def test_qwen_moe_steps_and_leading_dense_layers_at_their_edges(tmp_path: Path) -> None:
    every = _read(tmp_path, QWEN3_30B_A3B)
    assert _read(tmp_path, _without(QWEN3_30B_A3B, "decoder_sparse_step")).num_params() == every.num_params()
    last_only = _read(tmp_path, {**QWEN3_30B_A3B, "decoder_sparse_step": 48})  # only layer 47 holds experts
    assert last_only.moe_layers == 1
    error = _refusal(tmp_path, {**QWEN3_30B_A3B, "mlp_only_layers": list(range(48))})
    assert (error.field, error.rule) == (
        "mlp_only_layers",
        "not modelled unless the leading layers 0, 1, ... (or none)",
    )
    no_shared = _read(tmp_path, {**QWEN15_MOE, "shared_expert_intermediate_size": 0})
    assert no_shared.moe is not None and no_shared.moe.shared_experts == 0


# ---- DeepSeek-style experts (DeepSeek, Kimi, GLM) -------------------------------------------------------------
def test_glm_and_deepseek_experts_default_to_one_group_no_shared_expert_no_dense_layer_and_no_mtp(
    tmp_path: Path,
) -> None:
    unstated = ("attention_bias", "use_qk_norm", "tie_word_embeddings", "hidden_act", "n_group", "topk_group")
    bare = _without(GLM_45, *unstated, "n_shared_experts", "first_k_dense_replace", "num_nextn_predict_layers")
    glm = _read(tmp_path, bare)
    assert glm.moe is not None
    assert (glm.qkv_bias, glm.qk_norm, glm.tied_embeddings) == (False, False, False)
    assert (glm.moe.groups, glm.moe.group_top_k, glm.moe.shared_experts) == (1, None, 0)
    assert (glm.dense_layers, glm.mtp_layers, glm.ffn_hidden) == (0, 0, 1536)  # every layer's MLP is the experts
    no_shared = _read(tmp_path, {**GLM_45, "n_shared_experts": 0})
    assert no_shared.moe is not None and no_shared.moe.shared_experts == 0


def test_two_expert_groups_keep_their_top_groups(tmp_path: Path) -> None:
    two = _read(tmp_path, {**DEEPSEEK_V3, "n_group": 2, "topk_group": 1})
    assert two.moe is not None and (two.moe.groups, two.moe.group_top_k) == (2, 1)


@pytest.mark.parametrize("factor", [0, True, 1.5, "half"])
def test_glm_refuses_a_rotary_share_outside_zero_to_one(tmp_path: Path, factor: object) -> None:
    error = _refusal(tmp_path, {**GLM_45, "partial_rotary_factor": factor})
    assert (error.field, error.value) == ("partial_rotary_factor", factor)
    assert error.rule == "a number above 0 and at most 1 (the rotary share of a head)"


# ---- YaRN's attention factor and gpt-oss ------------------------------------------------------------------------
def _yarn(**scaling: object) -> dict[str, Any]:
    return {**LLAMA3_8B, "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 8192, **scaling}}


@pytest.mark.parametrize(
    ("scaling", "concentration"),
    [
        ({"factor": 2.0}, 1.0693),  # 0.1 ln 2 + 1, to four digits
        ({"factor": 1.0}, 1.0),  # no stretch, no factor
        ({"factor": 32.0, "mscale": 2.0}, 1.3466),  # one mscale alone: as none
        ({"factor": 32.0, "mscale": 1.0, "mscale_all_dim": 0.5}, 1.1477),  # (0.1 ln 32 + 1) / (0.05 ln 32 + 1)
        ({"factor": 32.0, "mscale": 0.0, "mscale_all_dim": 1.0}, 1.3466),  # a zero mscale: as none
        ({"factor": 4.0, "attention_factor": 1.0}, 1.0),  # given: taken as it is, from just above 0
        ({"factor": 4.0, "attention_factor": 10}, 10.0),  # to 10
    ],
)
def test_yarns_cos_and_sin_factor_is_transformers_own(tmp_path: Path, scaling: dict[str, Any], concentration: float):
    assert _read(tmp_path, _yarn(**scaling)).rope_concentration == concentration
    old_key = {**LLAMA3_8B, "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 8192, **scaling}}
    assert _read(tmp_path, old_key).rope_concentration == concentration  # the name before rope_type


def test_gpt_oss_defaults_and_edges(tmp_path: Path) -> None:
    bare = _without(GPT_OSS_20B, "hidden_act", "tie_word_embeddings", "initial_context_length", "layer_types")
    oss = _read(tmp_path, {**bare, "num_hidden_layers": 3})
    assert (oss.tied_embeddings, oss.seq_len, oss.window_layers) == (False, 8192, 2)  # layers 0 and 2 slide
    at_context = _read(tmp_path, {**GPT_OSS_20B, "initial_context_length": 131072, "swiglu_limit": 0.5})
    assert at_context.seq_len == 131072  # trained on the whole context it covers
    assert _read(tmp_path, _without(GPT_OSS_20B, "quantization_config")).quantization is None


# ---- the context a config's positions cover, quantized checkpoints, the file's own checks ----------------------
@pytest.mark.parametrize(
    ("config", "context"),
    [
        (_without(LLAMA3_8B, "max_position_embeddings"), 2048),  # transformers' default
        ({**LLAMA3_8B, "rope_scaling": {"factor": 4.0}}, 8192),  # no type: the default rope, the stated window
        ({**LLAMA3_8B, "rope_scaling": {"type": "yarn", "factor": 1}}, 8192),  # factors from 1
        (
            {**LLAMA3_8B, "rope_scaling": {"type": "linear", "factor": 1024, "original_max_position_embeddings": 1}},
            8192,
        ),
        (
            {**LLAMA3_8B, "rope_scaling": {"type": "linear", "factor": 2, "original_max_position_embeddings": 8192}},
            16384,
        ),
    ],
)
def test_the_context_a_config_covers_at_its_edges(tmp_path: Path, config: dict[str, Any], context: int) -> None:
    assert _read(tmp_path, config).max_context_tokens == context


@pytest.mark.parametrize(
    ("quantization", "group_size", "zero_point"),
    [
        ({**GPTQ_4BIT, "group_size": 64}, 64, True),  # GPTQ stores a zero point per group whatever sym says
        (_without(GPTQ_4BIT, "group_size"), 128, True),  # AutoGPTQ's default group
        ({**GPTQ_4BIT, "group_size": 1}, 1, True),
        ({**AWQ_4BIT, "zero_point": False}, 128, False),
        (_without(AWQ_4BIT, "zero_point"), 128, True),
        ({**FP8_BLOCK, "weight_block_size": [128, 64]}, 128 * 64, False),
        ({**FP8_BLOCK, "weight_block_size": [1, 1]}, 1, False),
        (_without(FP8_BLOCK, "weight_block_size"), 0, False),  # per tensor
    ],
)
def test_quantized_checkpoints_read_their_group_and_zero_point(
    tmp_path: Path, quantization: dict[str, Any], group_size: int, zero_point: bool
) -> None:
    found = _read(tmp_path, {**LLAMA3_8B, "quantization_config": quantization}).quantization
    assert found is not None and (found.group_size, found.zero_point) == (group_size, zero_point)


def test_gemma2_takes_its_own_defaults_not_gemma3s(tmp_path: Path) -> None:
    assert _read(tmp_path, _without(GEMMA2_9B, "sliding_window")).sliding_window == 4096
    error = _refusal(tmp_path, _without(GEMMA2_9B, "vocab_size"))  # Gemma 3's text defaults would fill it
    assert (error.field, error.rule) == ("vocab_size", "required field missing from the config")
    gemma3 = _read(tmp_path, {"model_type": "gemma3_text", "architectures": ["Gemma3ForCausalLM"]})
    assert (gemma3.hidden, gemma3.layers, gemma3.vocab) == (2304, 26, 262_208)  # Gemma3TextConfig's


def test_the_file_level_refusals_name_what_clustersim_reads(tmp_path: Path) -> None:
    error = _refusal(tmp_path, {**LLAMA3_8B, "model_type": "mamba"})
    assert "gemma3" in error.rule and "refinedweb" not in error.rule and "gemma2, gemma3, gemma3_text" in error.rule
    error = _refusal(tmp_path, {**LLAMA3_8B, "architectures": ["LlamaForConditionalGeneration"]})
    assert (error.field, error.value) == ("architectures", ["LlamaForConditionalGeneration"])
    assert error.rule == "a causal language model (a class ending in ForCausalLM, LMHeadModel)"
    assert _refusal(tmp_path, [1, 2]).rule == "a config.json holds one JSON object"


OPTION_REFUSALS = [  # (config, field, value, rule)
    ({**LLAMA3_8B, "model_type": 5}, "model_type", 5, "must be a string"),
    ({**LLAMA3_8B, "tie_word_embeddings": "no"}, "tie_word_embeddings", "no", "must be true or false"),
    (
        {**LLAMA3_8B, "num_local_experts": 8},
        "num_local_experts",
        8,
        "model_type 'llama' has no experts: write a MoE model_type",
    ),
    ({**LLAMA3_8B, "rope_scaling": 4}, "rope_scaling", 4, "a JSON object with rope_type (or type) and factor, or null"),
    *(
        (
            {**LLAMA3_8B, "rope_scaling": {"type": "yarn", "factor": factor}},
            "rope_scaling.factor",
            factor,
            "a number from 1 to 1024",
        )
        for factor in (0.5, 1025, True, "2")
    ),
    *(
        (
            {**LLAMA3_8B, "rope_scaling": {"type": "yarn", "factor": 2, "original_max_position_embeddings": original}},
            "rope_scaling.original_max_position_embeddings",
            original,
            "a whole number of at least 1",
        )
        for original in (0, True, 4096.0)
    ),
    (
        {**LLAMA3_8B, "quantization_config": {**FP8_BLOCK, "weight_block_size": [0, 128]}},
        "quantization_config.weight_block_size",
        [0, 128],
        "two whole numbers of at least 1, e.g. [128, 128], or null",
    ),
    (
        {**GEMMA3_1B, "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"], "text_config": 3},
        "text_config",
        3,
        "a JSON object holding the language model's fields",
    ),
    (_yarn(factor=4.0, attention_factor=0), "rope_scaling.attention_factor", 0, "a number above 0, at most 10"),
    (_yarn(factor=4.0, attention_factor=10.5), "rope_scaling.attention_factor", 10.5, "a number above 0, at most 10"),
    (_yarn(factor=4.0, mscale=-1), "rope_scaling.mscale", -1, "a number of at least 0, or null"),
    (_yarn(factor=4.0, mscale_all_dim=True), "rope_scaling.mscale_all_dim", True, "a number of at least 0, or null"),
    *(
        (
            {**GPT_OSS_20B, "swiglu_limit": limit},
            "swiglu_limit",
            limit,
            "a positive number (the clamp on the SwiGLU's inputs), or null",
        )
        for limit in (0, -1.0, True, "7")
    ),
    (
        {**GPT_OSS_20B, "attention_bias": False},
        "attention_bias",
        False,
        "not modelled: gpt-oss without attention biases (its experts keep theirs)",
    ),
    ({**GLM_45, "mlp_bias": True}, "mlp_bias", True, "not modelled: biases on the MLP"),
    ({**DEEPSEEK_V3, "moe_layer_freq": 2}, "moe_layer_freq", 2, "not modelled: experts on every layer (1)"),
    ({**DEEPSEEK_V3, "n_group": 1, "topk_group": 2}, "topk_group", 2, "1 when n_group is 1 (no expert groups)"),
    (
        {**QWEN3_8B, "attention_bias": True},
        "attention_bias",
        True,
        "not modelled: biases on the attention projections",
    ),
    ({**QWEN3_8B, "mlp_bias": True}, "mlp_bias", True, "not modelled: biases on the MLP"),
    ({**FALCON_7B, "alibi": True}, "alibi", True, "not modelled: ALiBi positions (Falcon-RW)"),
    (
        {**DEEPSEEK_V3, "attention_bias": True},
        "attention_bias",
        True,
        "not modelled: biases on the attention projections",
    ),
    ({**DEEPSEEK_V3, "num_key_value_heads": 8}, "num_key_value_heads", 8, "latent attention has 128 (heads)"),
    ({**PHI_2, "qk_layernorm": True}, "qk_layernorm", True, "not modelled: LayerNorms on the queries and keys"),
    ({**GPT2, "add_cross_attention": True}, "add_cross_attention", True, "not modelled: cross-attention layers"),
    (
        {**PYTHIA_1_4B, "attention_bias": False},
        "attention_bias",
        False,
        "not modelled: a GPT-NeoX without attention biases (its MLP keeps them)",
    ),
]


# ---- compressed-tensors groups ------------------------------------------------------------------------------
def _with_groups(groups: Any) -> dict[str, Any]:
    return {**LLAMA3_8B, "quantization_config": {"quant_method": "compressed-tensors", "config_groups": groups}}


def _compressed(*weights: Any) -> dict[str, Any]:
    return _with_groups({f"group_{i}": {"targets": ["Linear"], "weights": w} for i, w in enumerate(weights)})


W4_GROUP = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group", "group_size": 128}


@pytest.mark.parametrize(
    ("weights", "bits", "group_size", "zero_point"),
    [
        ({"num_bits": 4, "strategy": "group", "group_size": 32}, 4, 32, False),  # symmetric unless said otherwise
        ({"num_bits": 4, "strategy": "group"}, 4, 128, False),  # llm-compressor's group size by default
        ({"num_bits": 8, "group_size": 64}, 8, 0, False),  # per channel unless said: no group scales
        ({"num_bits": 8, "strategy": "tensor"}, 8, 0, False),
        ({**W4_GROUP, "symmetric": False}, 4, 128, True),  # asymmetric: a zero point per group
    ],
)
def test_compressed_tensors_reads_each_groups_strategy_size_and_symmetry(
    tmp_path: Path, weights: dict[str, Any], bits: int, group_size: int, zero_point: bool
) -> None:
    quantization = _read(tmp_path, _compressed(weights)).quantization
    assert quantization is not None
    assert (quantization.method, quantization.bits, quantization.group_size, quantization.zero_point) == (
        "compressed-tensors",
        bits,
        group_size,
        zero_point,
    )


def test_compressed_tensors_groups_of_one_width_read_as_one(tmp_path: Path) -> None:
    quantization = _read(tmp_path, _compressed(W4_GROUP, dict(W4_GROUP))).quantization
    assert quantization is not None and (quantization.bits, quantization.group_size) == (4, 128)


GROUP_REFUSALS = [  # (config, field, value, rule)
    (
        _compressed(W4_GROUP, {**W4_GROUP, "num_bits": 8}),
        "quantization_config.config_groups",
        [(4, 128, False), (8, 128, False)],
        "not modelled: groups stored at different widths",
    ),
    (
        _compressed(W4_GROUP, {**W4_GROUP, "symmetric": False}),
        "quantization_config.config_groups",
        [(4, 128, False), (4, 128, True)],
        "not modelled: groups stored at different widths",
    ),
    (
        _with_groups({}),
        "quantization_config.config_groups",
        {},
        "a JSON object of groups, each with its weights' num_bits",
    ),
    (
        _with_groups([W4_GROUP]),
        "quantization_config.config_groups",
        [W4_GROUP],
        "a JSON object of groups, each with its weights' num_bits",
    ),
    (
        _with_groups({"g": {"weights": 4}}),
        "quantization_config.config_groups.g.weights",
        4,
        "a JSON object with num_bits",
    ),
    (
        _with_groups({"g": 4}),
        "quantization_config.config_groups.g.weights",
        None,
        "a JSON object with num_bits",
    ),
    (
        {**LLAMA3_8B, "quantization_config": "gptq"},
        "quantization_config",
        "gptq",
        "a JSON object with quant_method",
    ),
    (
        _compressed({**W4_GROUP, "num_bits": 2}),
        "quantization_config.config_groups.group_0.weights.num_bits",
        2,
        "clustersim prices 4- or 8-bit weights",
    ),
]


@pytest.mark.parametrize(("config", "field", "value", "rule"), OPTION_REFUSALS + GROUP_REFUSALS)
def test_a_refusal_names_its_field_value_and_whole_rule(
    tmp_path: Path, config: dict[str, Any], field: str, value: object, rule: str
) -> None:
    error = _refusal(tmp_path, config)
    assert (error.field, error.value, error.rule) == (field, value, rule)
