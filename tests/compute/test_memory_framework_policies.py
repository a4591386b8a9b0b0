"""What a framework's own recompute policy and loss keep, the last pipeline stage's logits, and the 16-bit copies
ZeRO 3 gathers, counted by hand on a small Llama shape.

torchtitan's per-op selective recompute saves the outputs of ``aten.mm`` but every second one per block, and of
attention (pytorch/torchtitan parallelize_llama.py ``_save_list``): a block of Q, K, V, the projection and a gated
MLP's three matmuls keeps Q, V, the first up matrix and the down matrix, attention's output and its input. Its loss
holds 12 bytes a logit at its backward (the FP32 log-softmax, its incoming gradient and the logits' gradient).
"""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.choices import SelectiveRecompute
from clustersim.compute.memory import (
    activation_bytes,
    alternate_matmul_bytes,
    gathered_params,
    layer_activation_bytes,
    memory_per_device,
    params_per_device,
)
from clustersim.compute.software import software_for
from clustersim.execution import Layout, Recompute
from clustersim.scenario.training import compiled_software
from clustersim.system import system_for_accelerator
from clustersim.training.estimate import estimate_training
from clustersim.training.job import TrainingJob
from clustersim.workload.ops import (
    alternate_matmul_recompute_flops_per_token,
    alternate_matmul_recompute_share,
    layer_operations,
)
from clustersim.workload.transformer import MoE, Transformer
from tests.compute.test_memory_closed_form import LLAMA, arrays

# The closed-form tests' model (h = 64, q = 64, kv = v = 16, SwiGLU f = 160, V = 1000) and its plain-MLP twin.
GELU = Transformer(
    name="gelu-tiny", layers=4, hidden=64, ffn_hidden=160, heads=8, kv_heads=2, vocab=1000, ffn_type="gelu"
)
ALTERNATE = SelectiveRecompute.ALTERNATE_MATMULS


def test_the_per_op_policy_keeps_the_input_q_v_the_first_up_and_the_down_matrix_and_attention():
    tokens = 128 * 2
    lay = arrays(dp=1, micro_batch=2, recompute=Recompute.SELECTIVE)
    kept = alternate_matmul_bytes(LLAMA, lay, seq_len=128)[0]
    assert kept == pytest.approx(2 * tokens * (64 + 64 + 16 + 160 + 64 + 64))  # input, q, v, w1, w2, attention
    assert layer_activation_bytes(LLAMA, lay, seq_len=128, fused=True, selective=ALTERNATE)[0] == kept
    # a plain MLP's down matrix is the sixth matmul: recomputed, not kept
    plain = alternate_matmul_bytes(GELU, lay, seq_len=128)[0]
    assert plain == pytest.approx(2 * tokens * (64 + 64 + 16 + 160 + 64))
    # Megatron's selective recompute keeps every other activation of the layer: more
    megatron = layer_activation_bytes(LLAMA, lay, seq_len=128, fused=True)[0]
    assert kept < megatron
    # without selective recompute the policy changes nothing
    none = arrays(dp=1, micro_batch=2)
    assert layer_activation_bytes(LLAMA, none, seq_len=128, fused=True, selective=ALTERNATE)[0] == pytest.approx(
        layer_activation_bytes(LLAMA, none, seq_len=128, fused=True)[0]
    )


def test_under_tensor_parallelism_row_parallel_outputs_stay_whole_and_reduce_scatters_are_kept():
    tokens = 128
    lay = arrays(tp=4, dp=1, sequence_parallel=True, recompute=Recompute.SELECTIVE)
    kept = alternate_matmul_bytes(LLAMA, lay, seq_len=128)[0]
    split = (64 + 16 + 160 + 64) / 4  # q, v, w1 and attention's output, column-parallel
    assert kept == pytest.approx(2 * tokens * (split + 64 + 64 / 4 + 2 * 64 / 4))  # w2 whole, input, two scatters


def test_the_loss_holds_its_bytes_per_logit_on_the_last_stage_only():
    one = arrays(dp=1, micro_batch=1)
    four = activation_bytes(LLAMA, one, seq_len=128, global_batch=1, fused=True)[0]
    twelve = activation_bytes(LLAMA, one, seq_len=128, global_batch=1, fused=True, loss_bytes_per_logit=12.0)[0]
    assert twelve - four == pytest.approx(8.0 * 128 * 1000)
    # four stages, eight micro-batches: the first holds four in flight, the last one and the logits
    piped = arrays(pp=4, dp=1)
    per_layer = layer_activation_bytes(LLAMA, piped, seq_len=128, fused=True)[0]
    first = 4 * 1 * per_layer  # one layer a stage, four micro-batches
    for loss_bytes in (4.0, 12.0, 64.0):
        got = activation_bytes(LLAMA, piped, seq_len=128, global_batch=8, fused=True, loss_bytes_per_logit=loss_bytes)
        assert got[0] == pytest.approx(max(first, per_layer + loss_bytes * 128 * 1000))


def test_the_interleaved_last_rank_holds_vp_minus_one_rounds_and_one_chunk():
    lay = arrays(pp=2, vp=2, dp=1)
    per_layer = layer_activation_bytes(LLAMA, lay, seq_len=128, fused=True)[0]
    first = 2 * 2 * (1 + 1 / 4) * per_layer  # two layers a rank, two micro-batches, x (1 + (pp - 1) / (pp vp))
    last = 3 * per_layer  # (vp - 1) pp + 1 = 3 chunks of one layer each
    for loss_bytes in (1e-9, 64.0):
        got = activation_bytes(LLAMA, lay, seq_len=128, global_batch=8, fused=True, loss_bytes_per_logit=loss_bytes)
        assert got[0] == pytest.approx(max(first, last + loss_bytes * 128 * 1000))


def test_zero3_holds_two_gathered_layers_and_the_embeddings_in_16_bits():
    lay = arrays(dp=8, zero=3)
    layer = (params_per_device(LLAMA, lay)[0] - 2 * 64 * 1000 - 64) / 4  # the 4 layers' share (final norm apart)
    assert gathered_params(LLAMA, lay)[0] == pytest.approx(2 * layer + 64 * 1000)  # two blocks, the output matrix
    sharded = memory_per_device(LLAMA, lay, seq_len=128, global_batch=8, fused_attention=True, zero3_gathered_layers=2)
    held = 2 * params_per_device(LLAMA, lay)[0] / 8 + 2 * gathered_params(LLAMA, lay)[0]
    assert sharded.weights[0] == pytest.approx(held)
    assert gathered_params(LLAMA, arrays(dp=8, zero=2))[0] == 0.0
    # DeepSpeed gathers a submodule at a time (two a GPT block): two of them are one layer
    assert gathered_params(LLAMA, lay, layers=1.0)[0] == pytest.approx(layer + 64 * 1000)
    assert gathered_params(LLAMA, lay, layers=0.0)[0] == 0.0  # none counted: not even the output


def test_each_framework_counts_its_own_gathered_copies():
    catalog = load_catalog()
    system = system_for_accelerator(catalog, "h100-sxm", devices=8, devices_per_node=8)
    job, layout = TrainingJob(seq_len=128, global_batch=8), Layout(dp=8, zero=3)
    weights = {
        name: estimate_training(LLAMA, system, layout, job, software=software_for(name, "hopper")).memory.weights_bytes
        for name in ("torchtitan", "deepspeed", "megatron")
    }
    lay = arrays(dp=8, zero=3)
    sharded = 2 * params_per_device(LLAMA, lay)[0] / 8  # Megatron's 16-bit shards: its gathered copies not counted
    assert weights["megatron"] == pytest.approx(sharded)
    assert weights["deepspeed"] - weights["megatron"] == pytest.approx(2 * gathered_params(LLAMA, lay, 1.0)[0])
    assert weights["torchtitan"] == pytest.approx(2 * sharded + 2 * gathered_params(LLAMA, lay, 2.0)[0])  # fp32 shards


@pytest.mark.parametrize("zero", [2, 3])
def test_a_pipelined_fsdp2_stage_holds_its_16_bit_weights_and_fp32_gradients_whole(zero):
    """torchtitan under torch.distributed.pipelining: FSDP2 keeps the stage gathered (no reshard after forward or
    backward) and accumulates its gradients unsharded in FP32 until the last micro-batch; the shards and Adam stay."""
    fsdp = (4.0, 4.0, 8.0)  # FSDP's fp32 weights and gradients, Adam's two moments

    def held(lay, unsharded):
        return memory_per_device(
            LLAMA, lay, seq_len=128, global_batch=8, fused_attention=True, state_bytes=fsdp,
            zero3_gathered_layers=2, pipeline_unsharded=unsharded,
        )  # fmt: skip

    piped = arrays(dp=4, pp=2, zero=zero)
    stage = params_per_device(LLAMA, piped)[0]
    whole, plain = held(piped, True), held(piped, False)
    assert whole.weights[0] == pytest.approx(4 * stage / 4 + 2 * stage)  # the fp32 shard and the 16-bit stage
    assert whole.gradients[0] == pytest.approx(4 * stage)  # fp32, unsharded
    assert whole.optimizer[0] == pytest.approx(plain.optimizer[0]) == pytest.approx(8 * stage / 4)
    assert whole.activations[0] == pytest.approx(plain.activations[0])
    assert plain.gradients[0] == pytest.approx(4 * stage / 4)
    for unpiped in (arrays(dp=8, zero=zero), arrays(dp=4, pp=2, zero=1)):  # no pipeline, or ZeRO below 2: as before
        assert held(unpiped, True).total[0] == pytest.approx(held(unpiped, False).total[0])
    catalog = load_catalog()
    system = system_for_accelerator(catalog, "h100-sxm", devices=8, devices_per_node=8)
    job, layout = TrainingJob(seq_len=128, global_batch=8), Layout(dp=4, pp=2, zero=zero)
    titan = estimate_training(LLAMA, system, layout, job, software=software_for("torchtitan", "hopper")).memory
    assert software_for("torchtitan", "hopper").pipeline_unsharded_state
    assert not software_for("megatron", "hopper").pipeline_unsharded_state
    assert titan.gradients_bytes == pytest.approx(4 * stage)


def test_the_per_op_policy_recomputes_k_the_projection_a_third_of_a_gated_mlp_and_every_elementwise_pass():
    one = np.ones(1)
    ops = {op.name: op for op in layer_operations(
        LLAMA, tokens=one, seq_len=128, tp=one, sp_split=one, ep=one, fused_attention=True
    )}  # fmt: skip
    share = {name: alternate_matmul_recompute_share(LLAMA, op) for name, op in ops.items()}
    assert share["qkv"] == pytest.approx(16 / (64 + 16 + 16))
    assert share["output projection"] == 1.0 and share["mlp"] == pytest.approx(1 / 3)
    assert share["attention core"] == 0.0 and share["norms and residuals"] == 1.0
    gelu = next(op for op in layer_operations(
        GELU, tokens=one, seq_len=128, tp=one, sp_split=one, ep=one, fused_attention=True
    ) if op.name == "mlp")  # fmt: skip
    assert alternate_matmul_recompute_share(GELU, gelu) == pytest.approx(1 / 2)
    flops = 2 * (64 * 16 + 64 * 64 + 64 * 160) * 4  # K, the projection, the second up matrix; four layers
    assert alternate_matmul_recompute_flops_per_token(LLAMA, 128) == pytest.approx(flops)


def test_torchtitan_prices_its_selective_recompute_and_memory_by_its_policy():
    catalog = load_catalog()
    system = system_for_accelerator(catalog, "h100-sxm", devices=8, devices_per_node=8)
    model, job = LLAMA, TrainingJob(seq_len=128, global_batch=16)
    layout = Layout(dp=8, micro_batch=2, zero=3, recompute=Recompute.SELECTIVE)
    titan = software_for("torchtitan", system.accelerator.family)
    plain = titan.model_copy(update={"selective_recompute": SelectiveRecompute.ATTENTION_CORE})
    ours = estimate_training(model, system, layout, job, software=titan)
    core = estimate_training(model, system, layout, job, software=plain)
    extra = alternate_matmul_recompute_flops_per_token(model, 128) - model.attention_flops_per_token(128)
    assert ours.hardware_flops_per_step - core.hardware_flops_per_step == pytest.approx(extra * job.tokens_per_step)
    assert ours.memory.activations_bytes < core.memory.activations_bytes
    recompute = {t.name: t.exposed_s for t in ours.terms}["recompute"]
    assert recompute > {t.name: t.exposed_s for t in core.terms}["recompute"]


def test_torchtitans_tensor_parallelism_keeps_the_gathered_gemm_inputs_and_gathers_them_once():
    tokens = 128
    lay = arrays(tp=4, dp=1, sequence_parallel=True)
    split = layer_activation_bytes(LLAMA, lay, seq_len=128, fused=True)[0]
    whole = layer_activation_bytes(LLAMA, lay, seq_len=128, fused=True, gathered_inputs=True)[0]
    assert whole - split == pytest.approx(2 * 2 * tokens * 64 * (1 - 1 / 4))  # the QKV and MLP inputs, not split
    # without sequence parallelism nothing was split: nothing changes
    plain = arrays(tp=4, dp=1)
    assert layer_activation_bytes(LLAMA, plain, seq_len=128, fused=True, gathered_inputs=True)[0] == pytest.approx(
        layer_activation_bytes(LLAMA, plain, seq_len=128, fused=True)[0]
    )
    # the time: kept, they are not gathered again in the backward pass (one all-reduce's worth of the five)
    catalog = load_catalog()
    system = system_for_accelerator(catalog, "h100-sxm", devices=8, devices_per_node=8)
    job, layout = TrainingJob(seq_len=128, global_batch=8), Layout(tp=4, dp=2, sequence_parallel=True, zero=3)
    titan = software_for("torchtitan", "hopper")
    regathers = titan.model_copy(update={"tp_keeps_gathered_inputs": False})
    kept = {t.name: t.link_s for t in estimate_training(LLAMA, system, layout, job, software=titan).terms}
    again = {t.name: t.link_s for t in estimate_training(LLAMA, system, layout, job, software=regathers).terms}
    assert kept["tp comm"] == pytest.approx(again["tp comm"] * 4 / 5)


def test_the_per_op_policy_splits_over_context_and_two_tensor_ranks_as_the_layer_does():
    one = alternate_matmul_bytes(LLAMA, arrays(dp=1, recompute=Recompute.SELECTIVE), seq_len=128)[0]
    halves = alternate_matmul_bytes(LLAMA, arrays(cp=2, dp=1, recompute=Recompute.SELECTIVE), seq_len=128)[0]
    assert halves == pytest.approx(one / 2)  # each context rank keeps its half of the sequence
    two = alternate_matmul_bytes(LLAMA, arrays(tp=2, dp=1, recompute=Recompute.SELECTIVE), seq_len=128)[0]
    split = (64 + 16 + 160 + 64) / 2  # q, v, w1 and attention's output over two ranks
    assert two == pytest.approx(2 * 128 * (split + 64 + 64 + 2 * 64 / 2))  # w2 and the input whole, two scatters


def test_zero3_gathers_each_layers_own_routed_experts():
    moe = LLAMA.model_copy(update={"name": "moe-tiny", "moe": MoE(experts=8, top_k=2)})
    two, four = arrays(dp=8, ep=2, zero=3), arrays(dp=8, ep=4, zero=3)
    # two gathered layers of 8 / ep experts each: 2 x (4 - 2) experts' MLPs more at ep 2
    assert gathered_params(moe, two)[0] - gathered_params(moe, four)[0] == pytest.approx(2 * 2 * moe.mlp_params())


def test_torch_compile_compiles_torchtitans_loss_with_the_model():
    titan = software_for("torchtitan", "hopper")
    compiled = compiled_software(titan, True)
    assert (compiled.eager_elementwise, compiled.loss_bytes_per_logit) == (False, 4.0)
    assert compiled_software(titan, False).loss_bytes_per_logit == 12.0  # eager: the upcast loss
