"""What mutation testing of the Hugging Face config readers (``workload.hf``, ``hf_fields``, ``hf_limits``,
``hf_moe``) found unpinned: the defaults a family takes for a field its config leaves out, the field names
it reads, each refusal's whole rule, and compressed-tensors' groups (their strategy, group size, symmetry and
the refusal of groups stored at different widths)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from clustersim.errors import CatalogFileError
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import Transformer
from tests.workload.hf_configs import GPT2, LLAMA3_8B, PHI_2, PYTHIA_1_4B


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


@pytest.mark.parametrize(
    ("config", "field", "value", "rule"),
    [
        ({**PHI_2, "qk_layernorm": True}, "qk_layernorm", True, "not modelled: LayerNorms on the queries and keys"),
        ({**GPT2, "add_cross_attention": True}, "add_cross_attention", True, "not modelled: cross-attention layers"),
        (
            {**PYTHIA_1_4B, "attention_bias": False},
            "attention_bias",
            False,
            "not modelled: a GPT-NeoX without attention biases (its MLP keeps them)",
        ),
    ],
)
def test_an_option_the_count_does_not_model_is_refused_with_its_whole_rule(
    tmp_path: Path, config: dict[str, Any], field: str, value: object, rule: str
) -> None:
    error = _refusal(tmp_path, config)
    assert (error.field, error.value, error.rule) == (field, value, rule)


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


@pytest.mark.parametrize(
    ("config", "field", "value", "rule"),
    [
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
            _compressed({**W4_GROUP, "num_bits": 2}),
            "quantization_config.config_groups.group_0.weights.num_bits",
            2,
            "clustersim prices 4- or 8-bit weights",
        ),
    ],
)
def test_compressed_tensors_refusals_name_the_group_field_value_and_rule(
    tmp_path: Path, config: dict[str, Any], field: str, value: object, rule: str
) -> None:
    error = _refusal(tmp_path, config)
    assert (error.field, error.value, error.rule) == (field, value, rule)
