"""The Qwen3-Next config reader's defaults, the fields it reads beyond them and its refusals word for word (what the
mutation run of ``clustersim.workload.hf_hybrid`` showed untested)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import read_hf_config
from tests.workload.test_linear_attention import QWEN3_NEXT_CONFIG

DEFAULTED = (  # keys whose transformers default is the published value, and (for the MoE) a shared expert of 0
    "hidden_act", "head_dim", "tie_word_embeddings", "full_attention_interval", "linear_key_head_dim",
    "linear_value_head_dim", "linear_conv_kernel_dim", "decoder_sparse_step", "shared_expert_intermediate_size",
)  # fmt: skip


def _read(tmp_path: Path, data: dict[str, object]) -> Transformer:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return read_hf_config(path)


def test_a_config_without_the_defaulted_keys_reads_as_the_published_one(tmp_path: Path) -> None:
    full = _read(tmp_path, QWEN3_NEXT_CONFIG)
    sparse = _read(tmp_path, {k: v for k, v in QWEN3_NEXT_CONFIG.items() if k not in DEFAULTED})
    assert sparse.moe is not None and sparse.moe.shared_experts == 0
    assert sparse == full.model_copy(update={"moe": full.moe.model_copy(update={"shared_experts": 0})})
    assert (sparse.head_dim, sparse.tied_embeddings, sparse.linear_attention_layers) == (256, False, 36)


def test_the_linear_heads_widths_and_kernel_are_read_from_their_keys(tmp_path: Path) -> None:
    stated = {"linear_key_head_dim": 64, "linear_value_head_dim": 96, "linear_conv_kernel_dim": 3}
    stated |= {"full_attention_interval": 3, "head_dim": 128, "tie_word_embeddings": True}
    model = _read(tmp_path, QWEN3_NEXT_CONFIG | stated)
    linear = model.linear_attention
    assert linear is not None and (linear.key_head_dim, linear.value_head_dim, linear.conv_kernel) == (64, 96, 3)
    assert (linear.layers, model.head_dim, model.tied_embeddings) == (32, 128, True)
    shared = _read(tmp_path, QWEN3_NEXT_CONFIG | {"shared_expert_intermediate_size": 1024})
    assert shared.moe is not None and shared.moe.shared_experts == 2
    assert _read(tmp_path, QWEN3_NEXT_CONFIG | {"hidden_act": "swish"}).ffn_type == "swiglu"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"layer_types": ["full_attention"] * 47}, "field 'layer_types': value ['full_attention', "),
        ({"layer_types": "linear"}, "field 'layer_types': value 'linear': a list of 48 entries, each one of "
         "linear_attention, full_attention"),
        ({"decoder_sparse_step": 2}, "field 'decoder_sparse_step': value 2: not modelled unless 1 (every layer MoE)"),
        ({"mlp_only_layers": [0]}, "field 'mlp_only_layers': value [0]: not modelled in a hybrid (give none)"),
        ({"shared_expert_intermediate_size": 700}, "field 'shared_expert_intermediate_size': value 700: not "
         "modelled unless a multiple of moe_intermediate_size 512"),
        ({"shared_expert_intermediate_size": -512}, "field 'shared_expert_intermediate_size': value -512"),
        ({"hidden_act": "gelu"}, "field 'hidden_act': value 'gelu': this family's MLP takes silu"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_field_the_value_and_the_rule(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(ClusterSimError) as refused:
        _read(tmp_path, QWEN3_NEXT_CONFIG | change)
    assert message in str(refused.value)


def test_a_shared_expert_of_zero_width_is_no_shared_expert(tmp_path: Path) -> None:
    model = _read(tmp_path, QWEN3_NEXT_CONFIG | {"shared_expert_intermediate_size": 0})
    assert model.moe is not None and model.moe.shared_experts == 0
