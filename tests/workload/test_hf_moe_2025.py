"""The 2025 open MoE models' published config.json files (``hf_configs_2025.py``) read by the gpt_oss, glm4_moe
and kimi_k2 readers: the same Transformer as the zoo entries written by hand, the published totals, what each
reads and what it refuses."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError
from clustersim.workload.hf import read_hf_config
from clustersim.workload.quantization import MXFP4_EXPERTS
from clustersim.workload.transformer import QuantMethod, Transformer
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs_2025 import (
    GLM_45,
    GLM_45_AIR,
    GPT_OSS_20B,
    GPT_OSS_120B,
    KIMI_K2_INSTRUCT,
    QWEN3_CODER_480B,
)


def _read(tmp_path: Path, config: dict[str, Any], name: str = "config.json") -> Transformer:
    path = tmp_path / name
    path.write_text(json.dumps(config))
    return read_hf_config(path)


def _refused(tmp_path: Path, config: dict[str, Any], *parts: str) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ClusterSimError) as info:
        read_hf_config(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message
    for part in parts:
        assert part in message, message


CONFIGS = {
    "gpt-oss-120b": GPT_OSS_120B,
    "gpt-oss-20b": GPT_OSS_20B,
    "glm-4.5": GLM_45,
    "glm-4.5-air": GLM_45_AIR,
    "kimi-k2": KIMI_K2_INSTRUCT,
    "qwen3-coder-480b-a35b": QWEN3_CODER_480B,
}
# Where the config and the zoo entry differ, and why: seq_len is the config's initial_context_length for gpt-oss
# (4096, as the zoo), else max_position_embeddings capped at 8192 (the zoo's 4096 is the papers' pre-training
# length, which GLM's and Kimi's configs do not state); Kimi-K2-Instruct is an FP8 checkpoint (128 x 128 blocks)
# and the zoo entry the bf16 model that trains; so are gpt-oss's releases (MXFP4 routed experts, the rest bf16).
_FP8_BLOCKS = {"method": QuantMethod.FP8, "bits": 8, "group_size": 128 * 128, "zero_point": False}
_MXFP4 = {"method": QuantMethod.MXFP4, "bits": 4, "group_size": 32, "zero_point": False, "scale_bits": 8}
DIFFERENCES: dict[str, dict[str, Any]] = {
    "gpt-oss-120b": {"quantization": ({**_MXFP4, "experts_only": True}, None)},
    "gpt-oss-20b": {"quantization": ({**_MXFP4, "experts_only": True}, None)},
    "glm-4.5": {"seq_len": (8192, 4096)},
    "glm-4.5-air": {"seq_len": (8192, 4096)},
    "qwen3-coder-480b-a35b": {"seq_len": (8192, 4096)},
    "kimi-k2": {
        "seq_len": (8192, 4096),
        "quantization": ({**_FP8_BLOCKS, "scale_bits": 16, "experts_only": False}, None),
    },
}


@pytest.mark.parametrize("model_id", list(CONFIGS))
def test_the_published_config_reads_as_the_zoo_entry(model_id: str, tmp_path: Path) -> None:
    read, zoo = _read(tmp_path, CONFIGS[model_id]), load_model(model_id, use_env=False)
    got, want = read.model_dump(exclude={"name"}), zoo.model_dump(exclude={"name"})
    differ = {key: (got.get(key), want.get(key)) for key in got.keys() | want.keys() if got.get(key) != want.get(key)}
    assert differ == DIFFERENCES.get(model_id, {})
    assert read.num_params() == zoo.num_params() and read.active_params() == zoo.active_params()
    assert read.num_params() == pytest.approx(zoo.num_params(), rel=1e-9)
    assert read.model_flops_per_token(4096) == zoo.model_flops_per_token(4096)
    assert read.kv_cache_elements == zoo.kv_cache_elements


# Published totals. gpt-oss: the model card's Table 1 (arXiv 2508.10925: 116.83B and 20.91B), which holds the
# attention sinks (heads per layer) and the router's bias (experts per layer) the reader does not count. Kimi K2:
# 1.04T (arXiv 2507.20534), which counts layer 0 as a MoE layer too (1,042.97B; the config's first_k_dense_replace
# 1 makes it dense: 1,026.41B). GLM-4.5's 355B and 106B leave out the embedding and output layer and count the MTP
# layer: tests/workload/test_zoo_open_models.py reconciles them with the zoo's count, which this one equals.
@pytest.mark.parametrize(
    ("model_id", "published", "tolerance"),
    [("gpt-oss-120b", 116.83e9, 0.005e9), ("gpt-oss-20b", 20.91e9, 0.005e9), ("kimi-k2", 1.04e12, 0.02e12)],
)
def test_published_totals(model_id: str, published: float, tolerance: float, tmp_path: Path) -> None:
    config = CONFIGS[model_id]
    model = _read(tmp_path, config)
    uncounted = config["num_hidden_layers"] * (config["num_attention_heads"] + config.get("num_local_experts", 0))
    uncounted = uncounted if config["model_type"] == "gpt_oss" else 0
    assert model.num_params() + uncounted == pytest.approx(published, abs=tolerance)


def test_gpt_oss_reads_its_windows_biases_and_training_length(tmp_path: Path) -> None:
    model = _read(tmp_path, GPT_OSS_120B)
    assert (model.sliding_window, model.window_layers, model.seq_len, model.max_context_tokens) == (
        128,
        18,
        4096,
        131072,
    )
    assert model.linear_bias and model.qkv_bias
    assert model.quantization == MXFP4_EXPERTS and model.quantization.bytes_per_weight == 4.25 / 8  # the experts
    assert model.moe is not None and (model.moe.experts, model.moe.top_k, model.moe.shared_experts) == (128, 4, 0)
    # Without layer_types, GptOssConfig's default: layers 0, 2, ... windowed, the same 18.
    plain = _read(tmp_path, {k: v for k, v in GPT_OSS_120B.items() if k != "layer_types"})
    assert plain == model
    # Every layer full: the attention FLOPs grow, the parameters do not.
    full = _read(tmp_path, {**GPT_OSS_120B, "layer_types": ["full_attention"] * 36})
    assert full.window_layers == 0 and full.num_params() == model.num_params()
    assert full.model_flops_per_token(8192) > model.model_flops_per_token(8192)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["sliding_attention", "full_attention"]), min_size=24, max_size=24))
def test_gpt_oss_windows_follow_layer_types(types: list[str]) -> None:
    """Any pattern of windowed layers: as many as it names, the same parameters, and at a sequence beyond the
    window each windowed layer attends to 128 keys instead of all of them."""
    path = Path(tempfile.mkdtemp()) / "config.json"
    path.write_text(json.dumps({**GPT_OSS_20B, "layer_types": types}))
    model = read_hf_config(path)
    windowed = types.count("sliding_attention")
    assert model.window_layers == windowed and model.num_params() == 20_914_754_880
    assert model.attended_keys(4096) == windowed * 128 + (24 - windowed) * 4096


@settings(max_examples=25, deadline=None)
@given(st.integers(min_value=0, max_value=45))
def test_glm_air_dense_layers_follow_first_k_dense_replace(dense: int) -> None:
    """Each leading dense layer trades a MoE block (128 + 1 experts of 1408 and a router) for a 10944-wide MLP."""
    path = Path(tempfile.mkdtemp()) / "config.json"
    path.write_text(json.dumps({**GLM_45_AIR, "first_k_dense_replace": dense}))
    model, air = read_hf_config(path), load_model("glm-4.5-air", use_env=False)
    assert (model.dense_layers, model.moe_layers) == (dense, 46 - dense)
    per_layer = 129 * 3 * 4096 * 1408 + 128 * 4096 - 3 * 4096 * 10944
    assert model.num_params() == air.num_params() - (dense - 1) * per_layer


def test_glm45_reads_qkv_biases_qk_norm_and_leading_dense_layers(tmp_path: Path) -> None:
    glm, air = _read(tmp_path, GLM_45), _read(tmp_path, GLM_45_AIR)
    assert glm.qkv_bias and not glm.linear_bias and glm.qk_norm and not air.qk_norm
    assert (glm.dense_layers, glm.moe_layers, glm.ffn_hidden, glm.expert_ffn) == (3, 89, 12288, 1536)
    assert glm.moe is not None and (glm.moe.experts, glm.moe.shared_experts, glm.moe.groups) == (160, 1, 1)
    assert glm.moe.group_top_k is None  # topk_group 1 of n_group 1: no group-limited routing
    # The MTP layer and the rotary share change no count.
    same = _read(tmp_path, {**GLM_45, "num_nextn_predict_layers": 0, "partial_rotary_factor": 1.0})
    assert same.num_params() == glm.num_params()
    unbiased = _read(tmp_path, {**GLM_45, "attention_bias": False})
    assert glm.num_params() - unbiased.num_params() == 92 * (96 + 2 * 8) * 128


def test_kimi_k2_reads_as_its_deepseek_v3_twin(tmp_path: Path) -> None:
    kimi = _read(tmp_path, KIMI_K2_INSTRUCT)
    twin = _read(tmp_path, {**KIMI_K2_INSTRUCT, "model_type": "deepseek_v3"})
    assert kimi == twin and kimi.mla is not None and kimi.mla.q_lora_rank == 1536
    assert kimi.quantization is not None and kimi.quantization.describe() == "8-bit fp8, groups of 16384"
    assert kimi.max_context_tokens == 131072  # yarn factor 32 x 4096


REFUSALS: dict[str, tuple[dict[str, Any], list[str]]] = {
    "gpt-oss without attention biases": (
        {**GPT_OSS_120B, "attention_bias": False},
        ["'attention_bias'", "value False", "not modelled"],
    ),
    "gpt-oss top-k names disagree": (
        {**GPT_OSS_120B, "experts_per_token": 2},
        ["'experts_per_token'", "value 2", "num_experts_per_tok 4"],
    ),
    "gpt-oss mxfp4 attention": (
        {**GPT_OSS_120B, "quantization_config": {"quant_method": "mxfp4", "modules_to_not_convert": ["lm_head"]}},
        ["'quantization_config.modules_to_not_convert'", "['lm_head']", "model.layers.*.self_attn"],
    ),
    "gpt-oss training length": (
        {**GPT_OSS_20B, "initial_context_length": 262144},
        ["'initial_context_length'", "value 262144", "at most the 131072 tokens"],
    ),
    "gpt-oss layer types": (
        {**GPT_OSS_20B, "layer_types": ["sliding_attention"] * 36},
        ["'layer_types'", "a list of 24 entries"],
    ),
    "glm rotary factor": (
        {**GLM_45, "partial_rotary_factor": 1.5},
        ["'partial_rotary_factor'", "value 1.5", "at most 1"],
    ),
    "glm mlp bias": ({**GLM_45, "mlp_bias": True}, ["'mlp_bias'", "not modelled"]),
    "glm all dense": (
        {**GLM_45_AIR, "first_k_dense_replace": 46},
        ["'first_k_dense_replace'", "value 46", "fewer than num_hidden_layers 46"],
    ),
    "kimi group top-k without groups": (
        {**KIMI_K2_INSTRUCT, "topk_group": 2},
        ["'topk_group'", "value 2", "1 when n_group is 1"],
    ),
    "mxfp4 elsewhere": (
        {**GLM_45, "quantization_config": {"quant_method": "mxfp4"}},
        ["'quantization_config.quant_method'", "'mxfp4'", "known: gptq"],
    ),
}


@pytest.mark.parametrize("case", list(REFUSALS))
def test_refusals_name_the_field_the_value_and_the_rule(case: str, tmp_path: Path) -> None:
    config, parts = REFUSALS[case]
    _refused(tmp_path, config, *parts)


def test_the_unknown_model_type_lists_the_new_families(tmp_path: Path) -> None:
    _refused(tmp_path, {**GLM_45, "model_type": "glm4"}, "'glm4'", "glm4_moe", "gpt_oss", "kimi_k2")


def test_the_mtp_modules_are_read_for_training_and_left_out_of_the_count(tmp_path: Path) -> None:
    """``num_nextn_predict_layers`` becomes ``mtp_layers`` (GLM-4.5: 1; Kimi K2: 0), which changes no count."""
    glm, kimi = _read(tmp_path, GLM_45), _read(tmp_path, KIMI_K2_INSTRUCT)
    assert (glm.mtp_layers, kimi.mtp_layers) == (1, 0)
    assert _read(tmp_path, {**GLM_45, "num_nextn_predict_layers": 0}).mtp_layers == 0
    assert load_model("deepseek-v3", use_env=False).mtp_layers == 1
