"""Mamba-2 hybrids (Nemotron-H, Nemotron 3): one Mamba-2 layer's weights as Megatron-Core builds them, the layers
with no MLP, the zoo entry against its published counts and Megatron's own FLOP count, the Hugging Face reader,
and the shapes that are refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.schema import Dtype
from clustersim.compute.memory import layer_activation_bytes, params_per_device
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.serving.eager_launches import kernels_per_layer
from clustersim.serving.memory import kv_bytes_per_token, state_bytes_per_sequence
from clustersim.validation.case_model import case_transformer
from clustersim.validation.cases import CaseModel
from clustersim.workload.linear_attention import LinearAttention
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import Transformer, transformer_from_mapping
from clustersim.workload.zoo import load_model
from tests.workload.test_linear_attention import _read

H = 2688
MAMBA = LinearAttention(kind="mamba2", layers=23, key_heads=8, value_heads=64, key_head_dim=128, value_head_dim=64)


def _nano() -> Transformer:
    return load_model("nemotron-3-nano-30b-a3b", use_env=False)


def test_one_mamba2_layer_holds_the_weights_of_megatron_cores_mixer() -> None:
    # MambaMixer (NVIDIA/Megatron-LM @d98e8a64 megatron/core/ssm/mamba_mixer.py): in_proj h -> 2 d_inner + 2 groups
    # x d_state + heads (z, x, B, C, dt), no bias; conv1d over x, B, C with a bias, 4 taps; A_log, D, dt_bias per
    # head; the gated RMSNorm over d_inner; out_proj d_inner -> h.
    d_inner, conv_channels = 64 * 64, 64 * 64 + 2 * 8 * 128
    expected = H * (2 * d_inner + 2 * 8 * 128 + 64) + conv_channels * 5 + 3 * 64 + d_inner + d_inner * H
    assert MAMBA.params(H) == expected
    assert (MAMBA.ssm_state_elements(), MAMBA.conv_state_elements()) == (64 * 64 * 128, conv_channels * 3)
    assert MAMBA.chunk_tokens == 128


def test_the_scan_is_megatron_lms_count_at_the_layers_own_width() -> None:
    # mamba_layer_flops: 7 x d_inner x d_state per token for the scan (Megatron takes d_inner = 2 h), plus the
    # convolution's two FLOPs per tap and channel
    conv = 2 * 4 * (64 * 64 + 2 * 8 * 128)
    assert MAMBA.mixing_flops_per_token() == conv + 7 * (64 * 64) * 128
    gated_deltanet = MAMBA.model_copy(update={"kind": "gated_deltanet"})
    assert gated_deltanet.input_matmul_params(H) - MAMBA.input_matmul_params(H) == H * 64  # a decay per head more


def test_nemotron_3_nano_counts_match_its_model_card_and_megatrons_flops() -> None:
    model = _nano()
    assert (model.layers, model.linear_attention_layers, model.full_attention_layers) == (29, 23, 6)
    assert (model.moe_layers, model.dense_mlp_layers, model.mlp_free_layers) == (23, 0, 6)
    assert model.num_params() == pytest.approx(31.6e9, rel=0.005)  # 31.6B in the checkpoint
    assert model.active_params() == pytest.approx(3.5e9, rel=0.03)  # "3.5B active parameters"
    # Megatron-Bridge's performance summary: 905 model TFLOP/s at 40,960 tokens/s per GPU (26.08, GB300) and 328 at
    # 14,719 (26.06, H100): Megatron's own count of the same model at 8,192 tokens
    for tflops, tokens in ((905, 40960), (328, 14719)):
        assert model.model_flops_per_token(8192) == pytest.approx(tflops * 1e12 / tokens, rel=0.02)


@given(layers=st.integers(4, 60), free_share=st.floats(0.0, 0.9), moe=st.booleans())
def test_a_layer_with_no_mlp_drops_its_mlp_and_one_norm(layers: int, free_share: float, moe: bool) -> None:
    free = min(int(free_share * layers), layers - 1)
    experts = {"experts": 16, "top_k": 2, "shared_experts": 1} if moe else None
    shape = {"layers": layers, "hidden": 1024, "ffn_hidden": 2048, "heads": 8, "kv_heads": 2, "vocab": 32000}
    full = Transformer(**shape, ffn_type="gelu", moe=experts, linear_bias=False)
    part = full.model_copy(update={"mlp_free_layers": free})
    part = Transformer.model_validate(part.model_dump())
    mlp = full.total_mlps * full.mlp_params() + full.router_params()
    assert full.num_params() - part.num_params() == free * (mlp + full.norm_params())
    active = full.active_mlps * full.mlp_matmul_params() + full.router_params()
    assert full.matmul_params_per_token() - part.matmul_params_per_token() == free * active
    assert part.mlp_share == (layers - free) / layers


def test_training_runs_the_mlp_on_the_layers_that_have_one_and_the_scan_on_the_mamba_ones() -> None:
    model = _nano()
    plain = model.model_copy(update={"mlp_free_layers": 0})
    kwargs = {"tokens": 8192.0, "seq_len": 8192, "tp": 1.0, "sp_split": 1.0, "ep": 8.0, "fused_attention": True}
    ops = {op.name: op for op in layer_operations(model, **kwargs)}
    all_mlps = {op.name: op for op in layer_operations(plain, **kwargs)}
    assert float(ops["experts"].flop) == pytest.approx(float(all_mlps["experts"].flop) * 23 / 29)
    assert float(ops["norms and residuals"].bytes) == pytest.approx(
        float(all_mlps["norms and residuals"].bytes) * (1 + 23 / 29) / 2
    )
    assert "delta rule" not in ops
    assert float(ops["scan"].flop) == pytest.approx(8192 * 23 * MAMBA.mixing_flops_per_token() / 29)


def test_serving_holds_each_mamba_layers_state_and_caches_keys_on_six_layers() -> None:
    model = _nano()
    assert kv_bytes_per_token(model, Dtype.BF16) == 6 * (2 * 2 * 128) * 2  # keys and values of 2 heads, 6 layers
    # the states in float32 as the checkpoint asks (vLLM's and SGLang's Nemotron-H default), whatever the engine's own
    per_layer = MAMBA.ssm_state_elements() * 4 + MAMBA.conv_state_elements() * 2
    assert state_bytes_per_sequence(model) == state_bytes_per_sequence(model, ssm_bytes=2.0) == 23 * per_layer
    linear = model.linear_attention.model_copy(update={"state_bytes": None})
    unstated = model.model_copy(update={"linear_attention": linear})  # the engine's own width then
    assert state_bytes_per_sequence(unstated) == 23 * (MAMBA.ssm_state_elements() + MAMBA.conv_state_elements()) * 2


def test_an_eager_step_launches_a_mamba2_layers_nine_kernels_and_none_of_a_missing_mlp() -> None:
    model = _nano()
    # norms and all-reduces: two in the 23 layers with an MLP, one in the 6 without; attention's 5 on 6 of 29 layers,
    # Mamba-2's 9 on 23; the MoE's 7 and its two shared experts' 3 each on 23
    norms = (23 * 2 + 6 * 1) / 29
    assert kernels_per_layer(model, Dtype.BF16, 1) == pytest.approx(norms + (6 * 5 + 23 * 9) / 29 + 23 * 13 / 29)
    assert kernels_per_layer(model, Dtype.BF16, 2) - kernels_per_layer(model, Dtype.BF16, 1) == pytest.approx(norms)


# nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16's config.json, the fields the reader takes (the zoo entry's shape).
NANO_CONFIG = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "mlp_hidden_act": "relu2",
    "hidden_size": 2688, "intermediate_size": 1856, "num_hidden_layers": 52, "num_attention_heads": 32,
    "num_key_value_heads": 2, "head_dim": 128, "vocab_size": 131072, "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "hybrid_override_pattern": "MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
    "mamba_num_heads": 64, "mamba_head_dim": 64, "ssm_state_size": 128, "n_groups": 8, "conv_kernel": 4,
    "n_routed_experts": 128, "num_experts_per_tok": 6, "moe_intermediate_size": 1856,
    "moe_shared_expert_intermediate_size": 3712, "n_group": 1, "topk_group": 1, "use_bias": False,
    "use_conv_bias": True, "attention_bias": False, "mlp_bias": False,
}  # fmt: skip


def test_the_published_config_reads_to_the_zoo_entry(tmp_path: Path) -> None:
    read, zoo = _read(tmp_path, NANO_CONFIG), _nano()
    assert read.model_copy(update={"name": zoo.name, "seq_len": zoo.seq_len}) == zoo


def test_a_dense_nemotron_h_reads_its_mlp_blocks(tmp_path: Path) -> None:
    # Nemotron-H 8B's pattern (Megatron-Bridge NemotronHModel8BProvider): 24 Mamba-2, 4 attention, 24 MLP blocks
    pattern = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"
    dense = {k: v for k, v in NANO_CONFIG.items() if not k.startswith(("n_routed", "num_experts", "moe_"))}
    model = _read(tmp_path, dense | {"hybrid_override_pattern": pattern, "intermediate_size": 21504})
    assert (model.layers, model.linear_attention_layers, model.mlp_free_layers, model.moe) == (28, 24, 4, None)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hybrid_override_pattern": "M---M*"}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "MEM-M*E", "num_hidden_layers": 7}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "MEM*E"}, "hybrid_override_pattern"),
        ({"hybrid_override_pattern": "MEMEME", "num_hidden_layers": 6}, "hybrid_override_pattern"),
        ({"moe_latent_size": -1}, "moe_latent_size"),
        ({"layers_block_type": ["mamba", "mlp", "mlp", "attention"], "num_hidden_layers": None}, "layers_block_type"),
        ({"n_group": 8}, "n_group"),
        ({"use_bias": True}, "use_bias"),
        ({"use_conv_bias": False}, "use_conv_bias"),
        ({"mlp_hidden_act": "silu"}, "mlp_hidden_act"),
        ({"moe_shared_expert_intermediate_size": 1000}, "moe_shared_expert_intermediate_size"),
    ],
)
def test_a_config_the_reader_cannot_price_is_refused_naming_the_field(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(ClusterSimError, match=named):
        _read(tmp_path, NANO_CONFIG | change)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"mlp_free_layers": 29}, "mlp_free_layers"),
        ({"mlp_free_layers": 6, "dense_layers": 1}, "mlp_free_layers"),
        ({"mlp_free_layers": 6, "layer_norms": 1}, "mlp_free_layers"),
    ],
)
def test_impossible_mlp_free_layers_are_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    data = _nano().model_dump() | change
    with pytest.raises(ClusterSimError, match=named):
        transformer_from_mapping(data)


def test_a_case_named_after_nemotron_3_nano_takes_its_layer_kinds_from_the_zoo_and_says_so() -> None:
    zoo = _nano()
    shape = {k: getattr(zoo, k) for k in ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab")}
    moe = {"experts": 128, "top_k": 6, "shared_experts": 2}
    case = CaseModel.model_validate(shape | {"name": zoo.name, "seq_len": 8192, "ffn_type": "gelu", "moe": moe})
    model, assumed = case_transformer(case, "model")
    assert (model.linear_attention, model.mlp_free_layers, model.position) == (
        zoo.linear_attention,
        6,
        zoo.position,
    )
    assert model.num_params() == zoo.num_params()
    assert "architecture" in assumed


@pytest.mark.parametrize("ep", [1, 8])
def test_a_device_holds_the_models_parameters_with_no_mlp_in_the_mlp_free_layers(ep: int) -> None:
    model = _nano()
    lay = LayoutArrays.of([Layout(tp=1, dp=ep, ep=ep)])
    routed_away = model.moe_layers * model.moe.experts * model.mlp_params() * (1 - 1 / ep)
    assert float(params_per_device(model, lay)[0]) == pytest.approx(model.num_params() - routed_away, rel=1e-9)


def test_the_activations_keep_the_mlps_of_the_layers_that_have_one() -> None:
    model = _nano()
    plain = Transformer.model_validate(model.model_dump() | {"mlp_free_layers": 0})
    lay = LayoutArrays.of([Layout(tp=1, dp=1, ep=1)])
    kept = float(layer_activation_bytes(model, lay, seq_len=8192, fused=True)[0])
    all_mlps = float(layer_activation_bytes(plain, lay, seq_len=8192, fused=True)[0])
    # an MLP-free layer keeps no MLP activations: the difference is 6 of 29 layers' MLP share, so it halves when 3
    # of the 29 are MLP-free
    three = float(
        layer_activation_bytes(plain.model_copy(update={"mlp_free_layers": 3}), lay, seq_len=8192, fused=True)[0]
    )
    assert all_mlps - kept == pytest.approx(2 * (all_mlps - three), rel=1e-9) and kept < all_mlps


# nvidia/Nemotron-H-8B-Base-8K's config.json, the fields the reader takes (Megatron-Bridge's bridge test fixture
# tests/unit_tests/models/nemotronh/test_nemotron_h_bridge.py: attention_head_dim, not head_dim)
NEMOTRON_H_8B_CONFIG = {
    "architectures": ["NemotronHForCausalLM"], "model_type": "nemotron_h", "attention_bias": False,
    "attention_head_dim": 128, "conv_kernel": 4, "hidden_act": "relu2", "hidden_size": 4096,
    "hybrid_override_pattern": "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-", "intermediate_size": 21504,
    "mamba_head_dim": 64, "mamba_num_heads": 128, "max_position_embeddings": 8192, "mlp_bias": False,
    "mlp_hidden_act": "relu2", "n_groups": 8, "num_attention_heads": 32, "num_hidden_layers": 52,
    "num_key_value_heads": 8, "ssm_state_size": 128, "tie_word_embeddings": False, "use_bias": False,
    "use_conv_bias": True, "vocab_size": 131072,
}  # fmt: skip


def test_the_nemotron_h_8b_config_reads_to_its_zoo_entry_and_its_attention_head_dim(tmp_path: Path) -> None:
    read, zoo = _read(tmp_path, NEMOTRON_H_8B_CONFIG), load_model("nemotron-h-8b", use_env=False)
    assert read.model_copy(update={"name": zoo.name, "seq_len": zoo.seq_len}) == zoo
    assert _read(tmp_path, NEMOTRON_H_8B_CONFIG | {"attention_head_dim": 64}).head_dim == 64


@pytest.mark.parametrize(
    ("name", "published", "blocks"),
    [
        ("nemotron-h-8b", 8e9, (24, 4, 24)),
        ("nemotron-h-56b", 56e9, (54, 10, 54)),
        ("nemotron-nano-9b-v2", 9e9, (27, 4, 25)),
        ("nemotron-nano-12b-v2", 12e9, (28, 6, 28)),
    ],
)
def test_the_dense_mamba2_hybrids_count_their_named_sizes(name: str, published: float, blocks: tuple[int, ...]):
    model = load_model(name, use_env=False)
    mamba, attention, mlps = blocks
    assert (model.linear_attention_layers, model.full_attention_layers) == (mamba, attention)
    assert model.layers - model.mlp_free_layers == mlps and model.moe is None
    assert model.num_params() == pytest.approx(published, rel=0.03)  # the names are rounded: 8B, 56B, 9B, 12B
