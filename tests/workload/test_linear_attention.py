"""Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): their counts against the published ones and Megatron-LM's FLOP
formula, the layers that attend and the ones that do not, and the shapes that are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.compute.memory import layer_activation_bytes
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.validation.case_model import case_transformer
from clustersim.validation.cases import CaseModel
from clustersim.workload.linear_attention import LinearAttention
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import Transformer, transformer_from_mapping
from clustersim.workload.zoo import load_model, read_hf_config

H = 2048
GDN = LinearAttention(layers=36, key_heads=16, value_heads=32)


def _next() -> Transformer:
    return load_model("qwen3-next-80b-a3b", use_env=False)


def _megatron_gdn_forward_flops(h: int, qk_dim: int, v_dim: int, v_heads: int, v_head_dim: int, conv: int) -> int:
    """Megatron-LM's gdn_layer_flops for one token (NVIDIA/Megatron-LM @d98e8a64 megatron/training/training.py),
    written out: in_proj, conv1d, the delta rule's four products, out_proj."""
    in_proj = 2 * qk_dim + 2 * v_dim + 2 * v_heads
    return 2 * (h * in_proj + conv * (2 * qk_dim + v_dim) + v_heads * v_head_dim**2 * 4 + h * v_dim)


def test_one_gated_deltanet_layer_holds_the_weights_of_hugging_faces_module() -> None:
    # in_proj_qkvz 2048 x (2 x 2048 + 2 x 4096), in_proj_ba 2048 x 64, conv1d 8192 x 4, dt_bias and A_log 32 each,
    # the gated norm 128, out_proj 4096 x 2048.
    expected = 2048 * 12288 + 2048 * 64 + 8192 * 4 + 32 + 32 + 128 + 4096 * 2048
    assert GDN.params(H) == expected == 33_718_464
    assert (GDN.ssm_state_elements(), GDN.conv_state_elements()) == (32 * 128 * 128, 8192 * 3)


def test_a_layers_projections_and_mixing_are_megatron_lms_count() -> None:
    projections = GDN.input_matmul_params(H) + GDN.output_matmul_params(H)
    ours = 2 * projections + GDN.mixing_flops_per_token()
    assert ours == _megatron_gdn_forward_flops(H, 2048, 4096, 32, 128, 4)


def test_qwen3_next_counts_match_its_model_card() -> None:
    model = _next()
    assert (model.linear_attention_layers, model.full_attention_layers) == (36, 12)
    embeddings = 2 * model.vocab * model.hidden  # untied
    assert model.num_params() == pytest.approx(80e9, rel=0.01)  # "80B in total"
    assert model.num_params() - embeddings == pytest.approx(79e9, rel=0.01)  # "79B non-embedding"
    assert model.active_params() - embeddings == pytest.approx(3e9, rel=0.1)  # "3B activated"
    # A gated attention layer: queries and their gate (2 x 16 x 256), keys and values (2 x 2 x 256), the output.
    assert model.attention_matmul_params() == 2048 * (8192 + 1024) + 4096 * 2048
    assert model.num_params() * 1.0 == pytest.approx(
        12 * model.attention_params()
        + 36 * GDN.params(H)
        + 48 * (513 * model.mlp_params() + model.router_params() + model.layer_norm_params())
        + embeddings
        + model.norm_params()
    )


def test_qwen35_35b_is_qwen3_next_with_fewer_layers_experts_and_a_larger_vocabulary() -> None:
    small, big = load_model("qwen3.5-35b-a3b", use_env=False), _next()
    assert small.linear_attention == big.linear_attention.model_copy(update={"layers": 30})
    assert (small.layers, small.full_attention_layers, small.vocab) == (40, 10, 248320)
    assert small.num_params() == pytest.approx(35e9, rel=0.02)  # "35B in total", its vision encoder not counted


def test_only_the_attention_layers_meet_keys() -> None:
    model = _next()
    assert model.attended_keys(4096) == 12 * 4096
    # Doubling the sequence adds the scores and context of the 12 attention layers, nothing of the other 36.
    grown = model.forward_flops_per_token(8192) - model.forward_flops_per_token(4096)
    assert grown == 2 * (model.q_width + model.context_width) * 12 * 4096
    plain = model.model_copy(update={"linear_attention": None})
    assert plain.attended_keys(4096) == 48 * 4096


def test_training_operations_average_the_two_layer_kinds() -> None:
    model = _next()
    tokens = 4096.0
    ops = {
        op.name: op
        for op in layer_operations(
            model, tokens=tokens, seq_len=4096, tp=1.0, sp_split=1.0, ep=1.0, fused_attention=True
        )
    }
    qkv = (12 * model.qkv_matmul_params() + 36 * GDN.input_matmul_params(H)) / 48
    assert float(ops["qkv"].flop) == pytest.approx(2 * tokens * qkv)
    out = (12 * model.context_width * H + 36 * GDN.output_matmul_params(H)) / 48
    assert float(ops["output projection"].flop) == pytest.approx(2 * tokens * out)
    assert float(ops["delta rule"].flop) == pytest.approx(tokens * GDN.mixing_flops_per_token() * 36 / 48)
    # The causal core of the 12 attention layers only, averaged over 48.
    core = 2 * tokens * (model.q_width + model.context_width) * 4096 * 0.5 * 12 / 48
    assert float(ops["attention core"].flop) == pytest.approx(core)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"linear_attention": {"layers": 48, "key_heads": 16, "value_heads": 32}}, "linear_attention.layers 48"),
        ({"linear_attention": {"layers": 36, "key_heads": 16, "value_heads": 24}}, "linear_attention.value_heads 24"),
        ({"sliding_window": 4096}, "sliding window"),
    ],
)
def test_impossible_hybrids_are_refused_naming_the_field(change: dict[str, object], named: str) -> None:
    data = _next().model_dump() | change
    with pytest.raises(ClusterSimError, match=named):
        transformer_from_mapping(data)


def test_a_hybrid_model_round_trips_through_its_record() -> None:
    model = _next()
    data = model.model_dump()
    assert data["linear_attention"]["layers"] == 36 and data["attention_gate"] is True
    assert transformer_from_mapping(data) == model
    assert "linear_attention" not in load_model("qwen3-30b-a3b", use_env=False).model_dump()


@given(
    layers=st.integers(2, 64),
    linear_share=st.floats(0.0, 0.99),
    key_heads=st.sampled_from([4, 8, 16]),
    value_ratio=st.sampled_from([1, 2, 4]),
    gate=st.booleans(),
)
def test_hybrid_totals_are_the_sum_of_their_layers(
    layers: int, linear_share: float, key_heads: int, value_ratio: int, gate: bool
) -> None:
    linear = int(linear_share * layers)
    spec = {"layers": linear, "key_heads": key_heads, "value_heads": key_heads * value_ratio} if linear else None
    model = Transformer(
        layers=layers, hidden=1024, ffn_hidden=2816, heads=8, kv_heads=2, head_dim=128, vocab=32000,
        ffn_type="swiglu", attention_gate=gate, linear_attention=spec,
    )  # fmt: skip
    gdn = model.linear_attention
    per_linear = gdn.params(1024) if gdn else 0
    blocks = (layers - linear) * model.attention_params() + linear * per_linear
    blocks += layers * (model.mlp_params() + model.layer_norm_params())
    assert model.num_params() == blocks + model.embedding_params() + model.norm_params()
    assert model.attended_keys(1000) == (layers - linear) * 1000
    # the Gated DeltaNet layers' work does not grow with the sequence; the attention layers' does
    growth = model.forward_flops_per_token(2000) - model.forward_flops_per_token(1000)
    assert growth == 2 * (model.q_width + model.context_width) * (layers - linear) * 1000


# Qwen/Qwen3-Next-80B-A3B-Instruct's config.json, the fields the reader takes (the model card's shape; see the zoo
# entry's source).
QWEN3_NEXT_CONFIG = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_act": "silu",
    "hidden_size": 2048, "intermediate_size": 5120, "num_hidden_layers": 48, "num_attention_heads": 16,
    "num_key_value_heads": 2, "head_dim": 256, "vocab_size": 151936, "max_position_embeddings": 262144,
    "tie_word_embeddings": False, "full_attention_interval": 4, "linear_num_key_heads": 16,
    "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
    "linear_conv_kernel_dim": 4, "num_experts": 512, "num_experts_per_tok": 10, "moe_intermediate_size": 512,
    "shared_expert_intermediate_size": 512, "decoder_sparse_step": 1, "mlp_only_layers": [],
    "attention_bias": False,
}  # fmt: skip


def _read(tmp_path: Path, data: dict[str, object]) -> Transformer:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return read_hf_config(path)


def test_the_published_config_reads_to_the_zoo_entry(tmp_path: Path) -> None:
    read, zoo = _read(tmp_path, QWEN3_NEXT_CONFIG), _next()
    assert read.model_copy(update={"name": zoo.name, "seq_len": zoo.seq_len}) == zoo
    kinds = ["linear_attention"] * 3 + ["full_attention"]
    by_types = _read(tmp_path, QWEN3_NEXT_CONFIG | {"layer_types": kinds * 12, "full_attention_interval": 2})
    assert by_types.linear_attention_layers == 36  # layer_types wins over the interval


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"layer_types": ["linear_attention"] * 47}, "layer_types"),
        ({"layer_types": ["sliding_attention"] * 48}, "layer_types"),
        ({"decoder_sparse_step": 2}, "decoder_sparse_step"),
        ({"mlp_only_layers": [0]}, "mlp_only_layers"),
        ({"shared_expert_intermediate_size": 700}, "shared_expert_intermediate_size"),
        ({"full_attention_interval": 1}, "linear_attention.layers"),
    ],
)
def test_a_config_the_reader_cannot_price_is_refused_naming_the_field(
    tmp_path: Path, change: dict[str, object], named: str
) -> None:
    with pytest.raises(ClusterSimError, match=named):
        _read(tmp_path, QWEN3_NEXT_CONFIG | change)


def test_a_gated_deltanet_layer_keeps_its_projections_convolution_and_outputs_for_the_backward() -> None:
    model = _next()
    attention_only = model.model_copy(update={"linear_attention": None})
    lay = LayoutArrays.of([Layout(tp=2, dp=1, ep=1)])
    hybrid = float(layer_activation_bytes(model, lay, seq_len=4096, fused=True)[0])
    plain = float(layer_activation_bytes(attention_only, lay, seq_len=4096, fused=True)[0])
    # attention: q, k, v, output and the gate's input (4096 + 512 + 512 + 4096 + 4096); Gated DeltaNet: its input
    # projection (12352), the convolution's output (8192), the delta rule's and the norm's outputs (2 x 4096)
    per_token = (12352 + 8192 + 2 * 4096) - (4096 + 512 + 512 + 4096 + 4096)
    assert hybrid - plain == pytest.approx(2 * 4096 * per_token * 36 / 48 / 2)


def test_an_output_gate_alone_adds_its_projection_to_the_qkv_work() -> None:
    plain = Transformer(layers=4, hidden=1024, ffn_hidden=2816, heads=8, kv_heads=2, vocab=32000, ffn_type="swiglu")
    gated = plain.model_copy(update={"attention_gate": True})
    common = {"tokens": 1000.0, "seq_len": 1000, "tp": 2.0, "sp_split": 1.0, "ep": 1.0, "fused_attention": True}
    qkv = {
        m.attention_gate: float(op.flop)
        for m in (plain, gated)
        for op in layer_operations(m, **common)
        if op.name == "qkv"
    }
    assert qkv[True] - qkv[False] == 2 * 1000 * 1024 * 1024 / 2
    assert gated.num_params() - plain.num_params() == 4 * 1024 * 1024
    latent = load_model("deepseek-v3", use_env=False).model_dump() | {"attention_gate": True}
    with pytest.raises(ClusterSimError, match="output gate with latent attention"):
        transformer_from_mapping(latent)


def test_a_case_named_after_a_hybrid_takes_its_layer_kinds_from_the_zoo_and_says_so() -> None:
    stated = {"name": "qwen3-next-80b-a3b", "layers": 48, "hidden": 2048, "ffn_hidden": 512, "heads": 16}
    stated |= {"kv_heads": 2, "head_dim": 256, "vocab": 151936, "ffn_type": "swiglu"}
    stated |= {"moe": {"experts": 512, "top_k": 10, "shared_experts": 1}}
    model, assumed = case_transformer(CaseModel.model_validate(stated), "case")
    assert model.linear_attention == GDN and model.attention_gate
    assert "from the zoo's qwen3-next-80b-a3b" in assumed["architecture"]
    own = CaseModel.model_validate(stated | {"linear_attention": {"layers": 24, "key_heads": 16, "value_heads": 32}})
    assert case_transformer(own, "case")[0].linear_attention_layers == 24  # a stated field is the case's own
    other = CaseModel.model_validate(stated | {"layers": 40})  # another model of the same name
    assert case_transformer(other, "case")[0].linear_attention is None
