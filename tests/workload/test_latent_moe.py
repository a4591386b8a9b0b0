"""Latent MoE (Nemotron 3 Super and Ultra): the routed experts work in a latent width, projected from and back to the
hidden size around the dispatch; the router and the shared experts read the hidden size. The zoo entries against the
published checkpoint counts, Megatron-LM's own FLOP formula, what training and serving move and hold, and the
Hugging Face reader."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.schema import Dtype
from clustersim.compute.memory import params_per_device
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.collectives import Op
from clustersim.serving.eager_launches import kernels_per_layer
from clustersim.serving.memory import matmul_params
from clustersim.workload.moe import MoE
from clustersim.workload.ops import layer_operations
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model
from tests.workload.test_linear_attention import _read
from tests.workload.test_mamba_hybrid import NANO_CONFIG

SHAPE = {"layers": 8, "hidden": 1024, "ffn_hidden": 512, "heads": 8, "kv_heads": 2, "vocab": 32000, "ffn_type": "gelu"}


def _moe(latent: int | None, shared: int = 2, **extra: object) -> Transformer:
    experts = {"experts": 64, "top_k": 6, "shared_experts": shared, "latent": latent}
    return Transformer(**SHAPE | extra, moe=experts, linear_bias=False)


def test_nemotron_3_super_counts_exactly_its_bf16_checkpoints_backbone() -> None:
    # nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-BF16's safetensors: 123,611,012,096 weights, of which the MTP block's
    # 2,942,324,736; its 490 idle experts of 512 in each of the 40 MoE layers hold 107,898,470,400
    model = load_model("nemotron-3-super", use_env=False)
    assert model.num_params() == 123_611_012_096 - 2_942_324_736
    assert model.num_params() - model.active_params() == 107_898_470_400
    assert (model.layers, model.moe_layers, model.mlp_free_layers, model.expert_input) == (48, 40, 8, 1024)


def test_nemotron_3_ultra_is_550b_with_55b_active() -> None:
    model = load_model("nemotron-3-ultra", use_env=False)
    assert model.num_params() == pytest.approx(550e9, rel=0.01)
    assert model.active_params() == pytest.approx(55e9, rel=0.03)


@given(latent=st.integers(64, 4096), top_k=st.integers(1, 8), shared=st.integers(0, 3))
def test_a_tokens_expert_flops_are_megatron_lms_latent_formula(latent: int, top_k: int, shared: int) -> None:
    # NVIDIA/Megatron-LM @d98e8a64 megatron/training/training.py moe_layer_flops: routed 4 T l f k (the experts on
    # moe_latent_size) + 4 T h l (the up and down projections); shared 4 T h f_shared; the router apart
    base = _moe(latent, shared)
    model = base.model_copy(update={"moe": base.moe.model_copy(update={"top_k": top_k})})
    h, f = 1024, 512
    megatron = 4 * latent * f * top_k + 4 * h * latent + 4 * h * f * shared
    router = 2 * h * 64
    moe_part = model.matmul_params_per_token() - round(8 * model.mixer_matmul_params()) - 32000 * h
    assert 2 * moe_part == 8 * (megatron + router)


def test_without_a_latent_width_every_count_is_the_plain_moes() -> None:
    plain, same = _moe(None), _moe(1024)  # a latent as wide as the hidden size still adds its two projections
    assert (plain.expert_input, same.expert_input) == (1024, 1024)
    assert same.num_params() - plain.num_params() == 8 * 2 * 1024 * 1024
    assert same.active_params() - plain.active_params() == 8 * 2 * 1024 * 1024


def test_a_latent_shrinks_the_routed_experts_and_their_dispatch_not_the_shared_ones() -> None:
    plain, latent = _moe(None), _moe(256)
    kwargs = {"tokens": 4096.0, "seq_len": 4096, "tp": 1.0, "sp_split": 1.0, "ep": 8.0, "fused_attention": True}
    before = {op.name: op for op in layer_operations(plain, **kwargs)}
    after = {op.name: op for op in layer_operations(latent, **kwargs)}
    f, matrices = 512, 2
    routed, shared = 2 * 4096 * 6 * f * matrices, 2 * 4096 * 2 * f * matrices  # per unit of input width
    assert float(before["experts"].flop) == pytest.approx((routed + shared) * 1024)
    assert float(after["experts"].flop) == pytest.approx(routed * 256 + shared * 1024)
    assert float(after["experts"].gemm_flop) == pytest.approx(float(before["experts"].gemm_flop) / 4)
    assert float(after["token permutation"].bytes) == pytest.approx(float(before["token permutation"].bytes) / 4)
    assert float(after["latent projections"].flop) == pytest.approx(2 * 4096 * 2 * 1024 * 256)
    assert "latent projections" not in before


def test_the_latent_projections_are_whole_on_every_tensor_parallel_rank() -> None:
    # Megatron-Core builds them as TELinear(parallel_mode="duplicated"); the shared experts split over TP
    plain, latent = _moe(None, shared=0), _moe(256, shared=0)
    held = {}
    for name, model in (("plain", plain), ("latent", latent)):
        for tp in (1, 4):
            lay = LayoutArrays.of([Layout(tp=tp, pp=1, dp=1, ep=1, etp=1)])
            held[name, tp] = float(params_per_device(model, lay)[0])
    projections = 8 * 2 * 1024 * 256
    routed_saved = 8 * 64 * 2 * (1024 - 256) * 512
    assert held["latent", 1] - held["plain", 1] == pytest.approx(projections - routed_saved)
    assert held["latent", 4] - held["plain", 4] == pytest.approx(projections - routed_saved)


def test_training_dispatches_and_combines_latent_rows() -> None:
    # the closed form's tiny MoE (tests.training.test_step_closed_form): an all-to-all of T x top_k rows per pass
    from tests.training.test_step_closed_form import MOE, SW, estimate, node_fabric, t_coll, terms

    plain = SW.model_copy(update={"ep_dispatch_per_node": False})
    latent = MOE.model_copy(update={"moe": MOE.moe.model_copy(update={"latent": MOE.hidden // 4})})
    est = estimate(Layout(dp=2, ep=2), devices=2, global_batch=4, model=latent, sw=plain)
    link = 2 * 4 * 4 * t_coll(Op.ALLTOALL, 1024 * 2 * (MOE.hidden // 4) * 2, node_fabric(2))
    assert terms(est)["ep comm"] == pytest.approx((link, link), rel=1e-9)


def test_serving_reads_the_projections_with_the_dense_weights_and_launches_two_gemms_more() -> None:
    plain, latent = _moe(None), _moe(256)
    dense_before, expert_before = matmul_params(plain)
    dense_after, expert_after = matmul_params(latent)
    assert dense_after - dense_before == 8 * 2 * 1024 * 256
    assert expert_after == pytest.approx(expert_before / 4)
    assert kernels_per_layer(latent, Dtype.BF16, 1) - kernels_per_layer(plain, Dtype.BF16, 1) == 2
    assert kernels_per_layer(latent, Dtype.FP8, 1) - kernels_per_layer(plain, Dtype.FP8, 1) == 4  # and quantize


# nvidia/NVIDIA-Nemotron-3-Super-120B-A12B-NVFP4's config.json, the fields the reader takes (a public transcription).
SUPER_CONFIG = NANO_CONFIG | {
    "hidden_size": 4096, "intermediate_size": 2688, "num_hidden_layers": 88, "num_attention_heads": 32,
    "hybrid_override_pattern":
        "MEMEMEM*EMEMEMEM*EMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEMEM*EMEMEMEM*EMEMEMEME",
    "mamba_num_heads": 128, "n_routed_experts": 512, "num_experts_per_tok": 22, "moe_intermediate_size": 2688,
    "moe_latent_size": 1024, "moe_shared_expert_intermediate_size": 5376, "num_nextn_predict_layers": 1,
    "mtp_hybrid_override_pattern": "*E",
}  # fmt: skip


def test_the_published_super_config_reads_to_the_zoo_entry(tmp_path: Path) -> None:
    read, zoo = _read(tmp_path, SUPER_CONFIG), load_model("nemotron-3-super", use_env=False)
    assert read.model_copy(update={"name": zoo.name, "seq_len": zoo.seq_len}) == zoo


def test_a_config_listing_its_blocks_by_name_reads_as_its_pattern(tmp_path: Path) -> None:
    # Nemotron 3 Ultra's config names its 108 blocks in layers_block_type and leaves num_hidden_layers null; this
    # order repeats one period of its counts (48 mamba, 48 moe, 12 attention), not the published order
    period = ["mamba", "moe", "mamba", "moe", "mamba", "moe", "mamba", "attention", "moe"]
    ultra = {k: v for k, v in SUPER_CONFIG.items() if k != "hybrid_override_pattern"} | {
        "layers_block_type": period * 12, "num_hidden_layers": None, "hidden_size": 8192,
        "num_attention_heads": 64, "mamba_num_heads": 256, "moe_intermediate_size": 5120, "intermediate_size": 5120,
        "moe_latent_size": 2048, "moe_shared_expert_intermediate_size": 10240,
    }  # fmt: skip
    read, zoo = _read(tmp_path, ultra), load_model("nemotron-3-ultra", use_env=False)
    assert read.model_copy(update={"name": zoo.name, "seq_len": zoo.seq_len}) == zoo
    assert np.isclose(read.num_params(), zoo.num_params())


def test_the_projections_carry_their_biases_where_the_model_has_them() -> None:
    # fc1_latent_proj and fc2_latent_proj take bias=config.add_bias_linear (Megatron-Core moe_layer.py)
    moe = MoE(experts=8, top_k=2, latent=256)
    assert moe.latent_projection_params(1024, bias=True) == 2 * 1024 * 256 + 256 + 1024
    assert moe.latent_projection_params(1024, bias=False) == 2 * 1024 * 256
    assert MoE(experts=8, top_k=2).latent_projection_params(1024, bias=True) == 0
    biased = _moe(256).model_copy(update={"linear_bias": True})
    assert biased.latent_projection_params() - biased.latent_projection_params(biases=False) == 256 + 1024


def test_a_token_may_keep_to_every_group() -> None:
    # group_top_k equal to the groups is plain top-k over all experts, allowed; one more is refused
    assert MoE(experts=256, top_k=8, groups=8, group_top_k=8).group_top_k == 8
    with pytest.raises(ValueError, match="group_top_k at most groups"):
        MoE(experts=256, top_k=8, groups=8, group_top_k=9)
