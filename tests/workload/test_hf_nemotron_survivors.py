"""The Nemotron-H config reader's defaults, the fields it reads beyond them and its refusals word for word (what the
mutation run of ``clustersim.workload.hf_hybrid`` showed untested), and the Mamba-2 chunk."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.workload.linear_attention import LinearAttention
from tests.workload.test_linear_attention import _read
from tests.workload.test_mamba_hybrid import NANO_CONFIG

# keys whose NemotronHConfig default is the published value (mamba groups 8, head 64, state 128, conv 4; relu2; no
# biases; a biased convolution; one group), and a shared expert of 0 and an untied output where the config is silent
DEFAULTED = (
    "mlp_hidden_act", "n_groups", "mamba_head_dim", "ssm_state_size", "conv_kernel", "use_bias", "attention_bias",
    "mlp_bias", "use_conv_bias", "n_group", "moe_shared_expert_intermediate_size", "tie_word_embeddings", "head_dim",
)  # fmt: skip
DENSE_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"  # Nemotron-H 8B's 52 blocks


def test_a_config_without_the_defaulted_keys_reads_as_the_published_one(tmp_path: Path) -> None:
    full = _read(tmp_path, NANO_CONFIG)
    sparse = _read(tmp_path, {k: v for k, v in NANO_CONFIG.items() if k not in DEFAULTED})
    assert sparse.moe is not None and sparse.moe.shared_experts == 0
    assert sparse == full.model_copy(update={"moe": full.moe.model_copy(update={"shared_experts": 0})})
    assert (sparse.head_dim, sparse.tied_embeddings, sparse.ffn_hidden) == (128, False, 1856)


def test_the_mamba_widths_and_kernel_are_read_from_their_keys(tmp_path: Path) -> None:
    stated = {"n_groups": 4, "mamba_head_dim": 32, "ssm_state_size": 64, "conv_kernel": 3, "mamba_num_heads": 96}
    stated |= {"head_dim": 64, "tie_word_embeddings": True}
    model = _read(tmp_path, NANO_CONFIG | stated)
    linear = model.linear_attention
    assert linear is not None
    shape = (linear.key_heads, linear.value_head_dim, linear.key_head_dim, linear.conv_kernel, linear.value_heads)
    assert shape == (4, 32, 64, 3, 96)
    assert (model.head_dim, model.tied_embeddings, linear.kind.value) == (64, True, "mamba2")
    shared = _read(tmp_path, NANO_CONFIG | {"moe_shared_expert_intermediate_size": 1856, "intermediate_size": 4096})
    assert shared.moe is not None and (shared.moe.shared_experts, shared.ffn_hidden) == (1, 1856)  # the experts' width


def test_a_dense_pattern_reads_the_mlp_width_and_an_even_one_has_no_mlp_free_layers(tmp_path: Path) -> None:
    dense = {k: v for k, v in NANO_CONFIG.items() if not k.startswith(("n_routed", "num_experts", "moe_"))}
    model = _read(tmp_path, dense | {"hybrid_override_pattern": DENSE_PATTERN, "intermediate_size": 21504})
    assert (model.ffn_hidden, model.mlp_free_layers, model.moe) == (21504, 4, None)
    even = _read(tmp_path, dense | {"hybrid_override_pattern": "M-*-", "num_hidden_layers": 4})
    assert (even.layers, even.mlp_free_layers, even.linear_attention_layers) == (2, 0, 1)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"hybrid_override_pattern": "MEM"}, "field 'hybrid_override_pattern': value 'MEM': 52 characters "
         "(num_hidden_layers), each of M*-E"),
        ({"hybrid_override_pattern": 52}, "field 'hybrid_override_pattern': value 52: 52 characters"),
        ({"hybrid_override_pattern": "MEE*", "num_hidden_layers": 4}, "field 'hybrid_override_pattern': value "
         "'MEE*': an MLP block must follow a mixer (M or *): MLP blocks in a row are not modelled (block 2)"),
        ({"hybrid_override_pattern": "EM*E", "num_hidden_layers": 4}, "an MLP block must follow a mixer (M or *): "
         "MLP blocks in a row are not modelled (block 0)"),
        ({"hybrid_override_pattern": "M-*E", "num_hidden_layers": 4}, "field 'hybrid_override_pattern': value "
         "'M-*E': dense (-) and MoE (E) MLP blocks together are not modelled"),
        ({"hybrid_override_pattern": "MEME", "num_hidden_layers": 4}, "field 'hybrid_override_pattern': value "
         "'MEME': a hybrid needs Mamba-2 (M) and attention (*) blocks"),
        ({"hybrid_override_pattern": "*E*E", "num_hidden_layers": 4}, "a hybrid needs Mamba-2 (M) and attention"),
        ({"use_bias": True}, "field 'use_bias': value True: biases on the projections are not modelled in Nemotron-H "
         "(give false)"),
        ({"attention_bias": True}, "field 'attention_bias': value True: biases on the projections"),
        ({"mlp_bias": True}, "field 'mlp_bias': value True: biases on the projections"),
        ({"use_conv_bias": False}, "field 'use_conv_bias': value False: not modelled: the Mamba-2 convolution is "
         "counted with its bias"),
        ({"layers_block_type": ["mamba", "moe", "attn"]}, "field 'layers_block_type': value ['mamba', 'moe', "
         "'attn']: a list of block names, each one of mamba, attention, mlp, moe"),
        ({"layers_block_type": "MEM*E"}, "field 'layers_block_type': value 'MEM*E': a list of block names"),
        ({"layers_block_type": [["mamba"]]}, "field 'layers_block_type': value [['mamba']]: a list of block names"),
        ({"layers_block_type": ["mamba", "moe", "attention", "moe"]}, "field 'layers_block_type': value 'ME*E': 52 "
         "blocks (num_hidden_layers), each of M*-E"),
        ({"moe_latent_size": 0}, "field 'moe_latent_size': value 0: must be at least 1"),
        ({"n_group": 8}, "field 'n_group': value 8: group-limited routing is not read from this family (give 1)"),
        ({"moe_shared_expert_intermediate_size": 1000}, "field 'moe_shared_expert_intermediate_size': value 1000: "
         "not modelled unless a multiple of moe_intermediate_size 1856"),
        ({"moe_shared_expert_intermediate_size": -1856}, "field 'moe_shared_expert_intermediate_size': value -1856"),
        ({"mlp_hidden_act": "silu"}, "field 'mlp_hidden_act': value 'silu': this family's MLP takes relu2"),
        ({"mamba_ssm_cache_dtype": "int8"}, "field 'mamba_ssm_cache_dtype': value 'int8': one of float32, bfloat16, "
         "float16"),
    ],
)  # fmt: skip
def test_each_refusal_names_the_field_the_value_and_the_rule(
    tmp_path: Path, change: dict[str, object], message: str
) -> None:
    with pytest.raises(ClusterSimError) as refused:
        _read(tmp_path, NANO_CONFIG | change)
    assert message in str(refused.value)


def test_the_scan_works_in_mamba_ssms_chunks_of_128_the_delta_rule_in_64() -> None:
    mamba = LinearAttention(kind="mamba2", layers=1, key_heads=1, value_heads=1)
    assert (mamba.chunk_tokens, LinearAttention(layers=1, key_heads=1, value_heads=1).chunk_tokens) == (128, 64)


def test_a_shared_expert_of_zero_width_is_no_shared_expert(tmp_path: Path) -> None:
    model = _read(tmp_path, NANO_CONFIG | {"moe_shared_expert_intermediate_size": 0})
    assert model.moe is not None and model.moe.shared_experts == 0


@pytest.mark.parametrize(("dtype", "width"), [("float32", 4.0), ("bfloat16", 2.0), ("float16", 2.0), (None, 4.0)])
def test_the_states_width_is_the_configs_cache_dtype_float32_where_silent(
    tmp_path: Path, dtype: str | None, width: float
) -> None:
    config = {k: v for k, v in NANO_CONFIG.items() if k != "mamba_ssm_cache_dtype"}
    model = _read(tmp_path, config | ({"mamba_ssm_cache_dtype": dtype} if dtype else {}))
    assert model.linear_attention is not None and model.linear_attention.state_bytes == width
