"""The element-wise work a clamped gated MLP, expert biases and YaRN-scaled RoPE add outside fused kernels
(clustersim.workload.architecture_ops), counted per token, and where each is and is not paid."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from clustersim.choices import RecomputeModule
from clustersim.errors import CatalogFileError
from clustersim.workload.hf import read_hf_config
from clustersim.workload.operation import OpKind
from clustersim.workload.ops import Operation, layer_operations, module_recompute_share
from clustersim.workload.transformer import MLA, Transformer
from clustersim.workload.zoo import load_model
from tests.workload.hf_configs_2025 import GPT_OSS_120B

TOKENS, TP = 4096.0, 1.0
MOE = {"experts": 16, "top_k": 4}
SHAPE: dict[str, Any] = {"layers": 4, "hidden": 512, "ffn_hidden": 256, "heads": 8, "kv_heads": 2, "head_dim": 64}


def _model(**extra: Any) -> Transformer:
    return Transformer(vocab=1000, ffn_type="swiglu", moe=MOE, **SHAPE, **extra)


def _ops(model: Transformer, **flags: Any) -> dict[str, Operation]:
    one = np.ones(1)
    options: dict[str, Any] = {"unfused_clamped_glu": True, "unfused_scaled_rope": True} | flags
    ops = layer_operations(
        model, tokens=TOKENS * one, seq_len=4096, tp=TP * one, sp_split=one, ep=4 * one, fused_attention=True, **options
    )
    return {op.name: op for op in ops}


def test_the_clamps_move_16_bytes_of_the_mlp_width_forward_and_30_backward_per_routed_pass() -> None:
    ops = _ops(_model(clamped_glu=True))
    clamps = ops["clamped MLP"]
    assert clamps.bytes[0] == pytest.approx(16 * 256 * 4 * TOKENS)  # f = 256, four routed experts a token
    assert clamps.backward_ratio == pytest.approx(30 / 16)
    assert "clamped MLP" not in _ops(_model())  # a plain SwiGLU's clamps do not exist
    assert "clamped MLP" not in _ops(_model(clamped_glu=True), unfused_clamped_glu=False)  # clamped in-kernel
    assert "clamped MLP" not in _ops(_model(clamped_glu=True), fused_expert_mlp=True)  # the fused grouped MLP clamps


def test_expert_biases_outside_the_grouped_gemm_cost_12_hidden_widths_a_pair_or_28_with_fp32_probabilities() -> None:
    biased = _model(linear_bias=True)
    plain = _ops(biased)["expert bias"]
    assert plain.bytes[0] == pytest.approx(12 * 512 * 4 * TOKENS)
    assert plain.backward_ratio == pytest.approx(16 / 12)
    flex = _ops(biased, flex_dispatch=np.array([True]))["expert bias"]
    assert flex.bytes[0] == pytest.approx(28 * 512 * 4 * TOKENS)
    assert "expert bias" not in _ops(_model())
    assert "expert bias" not in _ops(biased, fused_expert_mlp=True)


def test_yarn_tables_unfuse_rope_at_20_bytes_per_query_and_key_element_forward_and_24_backward() -> None:
    scaled = _model(rope_concentration=1.3466)
    rope = _ops(scaled)["scaled rope"]
    assert rope.bytes[0] == pytest.approx(20 * (8 * 64 + 2 * 64) * TOKENS)  # query heads and KV heads of 64
    assert rope.backward_ratio == pytest.approx(24 / 20)
    assert "scaled rope" not in _ops(_model())
    assert "scaled rope" not in _ops(scaled, unfused_scaled_rope=False)
    assert "scaled rope" not in _ops(scaled, eager_elementwise=True)  # an eager stack's RoPE is priced already


def test_a_recomputed_moe_activation_runs_the_clamps_again_and_a_recomputed_moe_the_bias_too() -> None:
    model = _model(clamped_glu=True, linear_bias=True)
    ops = _ops(model)
    clamps, bias = ops["clamped MLP"], ops["expert bias"]
    assert module_recompute_share(model, clamps, RecomputeModule.MOE_ACT) == 1.0
    assert module_recompute_share(model, bias, RecomputeModule.MOE_ACT) == 0.0
    assert module_recompute_share(model, bias, RecomputeModule.MOE) == 1.0
    assert module_recompute_share(model, clamps, RecomputeModule.LAYERNORM) == 0.0


def test_the_fields_refuse_an_mlp_without_a_gate_and_positions_without_rotation() -> None:
    with pytest.raises(ValidationError, match="clamped_glu needs a gated MLP"):
        Transformer(vocab=1000, ffn_type="gelu", clamped_glu=True, **SHAPE)
    with pytest.raises(ValidationError, match=r"rope_concentration 1\.3 needs rotary positions"):
        Transformer(vocab=1000, ffn_type="gelu", rope_concentration=1.3, **SHAPE)


def test_gpt_oss_reads_as_clamped_with_yarn_tables_and_equal_mscales_cancel(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS_120B))
    model = read_hf_config(path)
    assert model.clamped_glu and model.rope_concentration == pytest.approx(0.1 * np.log(32) + 1, abs=1e-4)
    zoo = load_model("gpt-oss-120b", use_env=False)
    assert (zoo.clamped_glu, zoo.rope_concentration) == (model.clamped_glu, model.rope_concentration)
    # DeepSeek-V3's tables: mscale and mscale_all_dim both 1, their ratio 1 (no factor, fused RoPE)
    assert load_model("deepseek-v3", use_env=False).rope_concentration == 1.0
    cancelled = GPT_OSS_120B | {"rope_scaling": GPT_OSS_120B["rope_scaling"] | {"mscale": 1.0, "mscale_all_dim": 1.0}}
    path.write_text(json.dumps(cancelled))
    assert read_hf_config(path).rope_concentration == 1.0
    given = GPT_OSS_120B | {"rope_scaling": GPT_OSS_120B["rope_scaling"] | {"attention_factor": 1.2}}
    path.write_text(json.dumps(given))
    assert read_hf_config(path).rope_concentration == 1.2


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("attention_factor", 0, "a number above 0, at most 10"),
        ("attention_factor", True, "a number above 0, at most 10"),
        ("mscale", -1.0, "a number of at least 0, or null"),
        ("mscale_all_dim", "one", "a number of at least 0, or null"),
    ],
)
def test_a_yarn_table_factor_out_of_range_is_refused_naming_the_field(
    tmp_path: Path, key: str, value: object, rule: str
) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(GPT_OSS_120B | {"rope_scaling": GPT_OSS_120B["rope_scaling"] | {key: value}}))
    with pytest.raises(CatalogFileError, match=rf"rope_scaling\.{key}.*{re.escape(rule)}"):
        read_hf_config(path)


def test_the_added_traffic_splits_over_tensor_and_sequence_parallel_ranks_and_grows_with_the_capacity_factor() -> None:
    one = np.ones(1)
    model = _model(clamped_glu=True, linear_bias=True, rope_concentration=1.3466)
    whole = _ops(model)

    def split(tp: float, sp: float, of: Transformer = model) -> dict[str, Operation]:
        flags: dict[str, Any] = {"unfused_clamped_glu": True, "unfused_scaled_rope": True}
        ops = layer_operations(
            of, tokens=TOKENS * one, seq_len=4096, tp=tp * one, sp_split=sp * one, ep=4 * one, fused_attention=True,
            **flags,
        )  # fmt: skip
        return {op.name: op for op in ops}

    over_tp = split(2.0, 1.0)
    # the clamps and the rotary tables split over the tensor-parallel ranks (each holds its share of the widths)
    assert over_tp["clamped MLP"].bytes[0] == pytest.approx(whole["clamped MLP"].bytes[0] / 2)
    assert over_tp["scaled rope"].bytes[0] == pytest.approx(whole["scaled rope"].bytes[0] / 2)
    # the routed pairs' biases over the sequence-parallel split of the tokens
    assert split(1.0, 2.0)["expert bias"].bytes[0] == pytest.approx(whole["expert bias"].bytes[0] / 2)
    # a capacity factor pads each expert's pairs, and their biases with them
    padded = model.model_copy(update={"moe": model.moe.model_copy(update={"capacity_factor": 1.25})})
    assert split(1.0, 1.0, padded)["expert bias"].bytes[0] == pytest.approx(1.25 * whole["expert bias"].bytes[0])
    # all three are memory traffic, priced at the HBM rate
    assert {whole[name].kind for name in ("clamped MLP", "expert bias", "scaled rope")} == {OpKind.MEMORY}


def test_latent_attention_rotates_only_its_rotary_dims_under_yarn_tables() -> None:
    latent = Transformer(
        vocab=1000, ffn_type="swiglu", moe=MOE, rope_concentration=1.2, **{**SHAPE, "kv_heads": 8},
        mla=MLA(q_lora_rank=32, kv_lora_rank=24, rope_head_dim=8, v_head_dim=16),
    )  # fmt: skip
    rope = _ops(latent)["scaled rope"]
    # each of the 8 query heads' rotary dims and the one key the heads share: (8 + 1) x 8 elements a token
    assert rope.bytes[0] == pytest.approx(20 * (8 + 1) * 8 * TOKENS)
