"""Memory per device of small layouts, counted by hand.

Model state: 2 bytes of 16-bit weights, 4 of FP32 gradients, 12 of FP32 master weights, momentum and
variance per parameter (18), the 12 sharded by ZeRO 1, the gradients too by ZeRO 2, the weights too by
ZeRO 3, over the dp x cp ranks. Activations per layer and micro-batch of S tokens (Korthikanti et al.
2022, generalized to GQA and gated MLPs), 16-bit: 10 S h outside the tensor-parallel region (split by t
only with sequence parallelism), 2 S (2q + 2kv) for Q, K, V and the projection input plus 2 S f x
matrices per active MLP inside (split by t), 5 a s S for unfused attention scores (split by t).
"""

from __future__ import annotations

import pytest

from clustersim.compute.memory import (
    FRAGMENTATION,
    RESERVED_BYTES,
    memory_per_device,
    params_per_device,
)
from clustersim.compute.stages import stage_layers
from clustersim.execution import Layout, LayoutArrays
from clustersim.workload.transformer import MoE, Transformer

# 4 layers, h = 64, 8 query heads and 2 KV heads of 8 (q = 64, kv = 16), SwiGLU f = 160, V = 1000, untied.
LLAMA = Transformer(
    name="llama-tiny", layers=4, hidden=64, ffn_hidden=160, heads=8, kv_heads=2, vocab=1000, ffn_type="swiglu"
)
ATTENTION = 64 * (64 + 2 * 16) + 64 * 64  # 10,240
MLP = 3 * 64 * 160  # 30,720
NORM = 64  # RMSNorm weight


def arrays(**layout) -> LayoutArrays:
    return LayoutArrays.of([Layout(**layout)])


def memory(model=LLAMA, *, seq_len=128, global_batch=4, fused=False, **layout):
    return memory_per_device(model, arrays(**layout), seq_len=seq_len, global_batch=global_batch, fused_attention=fused)


def test_stage_layers_round_up_per_model_chunk():
    assert stage_layers(LLAMA, arrays())[0] == 4
    assert stage_layers(LLAMA, arrays(pp=2))[0] == 2
    assert stage_layers(LLAMA, arrays(pp=2, vp=2))[0] == 2  # 2 chunks of 1 layer
    assert stage_layers(LLAMA, arrays(pp=3, uneven_stages=True))[0] == 2  # ceil(4 / 3)
    five = LLAMA.model_copy(update={"layers": 5})
    assert stage_layers(five, arrays(pp=2, vp=2, uneven_stages=True))[0] == 4  # 2 chunks of ceil(5 / 4) = 2


def test_parameters_of_the_fullest_stage():
    # One stage: everything (4 layers, embedding, output matrix, final norm).
    assert params_per_device(LLAMA, arrays())[0] == LLAMA.num_params() == 4 * (ATTENTION + MLP + 2 * NORM) + 128_064
    # tp 2: matrices split, norms replicated; embedding and output split by t.
    assert params_per_device(LLAMA, arrays(tp=2))[0] == 4 * ((ATTENTION + MLP) / 2 + 2 * NORM) + 2 * 64_000 / 2 + NORM
    # pp 2: 2 layers and one of the embedding / output matrix (and the final norm).
    assert params_per_device(LLAMA, arrays(tp=2, pp=2))[0] == 2 * ((ATTENTION + MLP) / 2 + 2 * NORM) + 32_000 + NORM


def test_gpt_pipeline_stage_keeps_the_learned_positions():
    gpt = Transformer(layers=4, hidden=64, ffn_hidden=256, heads=4, vocab=1000, seq_len=128)  # tied, learned
    layer = gpt.attention_params() + gpt.mlp_params() + 2 * gpt.norm_params()
    assert params_per_device(gpt, arrays())[0] == 4 * layer + 64_000 + 128 * 64 + 128
    assert params_per_device(gpt, arrays(pp=2))[0] == 2 * layer + 64_000 + 128 * 64 + 128


def test_moe_stage_holds_its_share_of_the_experts():
    moe = LLAMA.model_copy(update={"moe": MoE(experts=8, top_k=2, shared_experts=1, expert_ffn_hidden=32)})
    expert = 3 * 64 * 32
    layer = (ATTENTION + 64 * 8 + 8 * expert / 4 + 1 * expert) / 2 + 2 * NORM  # tp 2, ep 4
    assert params_per_device(moe, arrays(tp=2, dp=4, ep=4))[0] == pytest.approx(4 * layer + 2 * 64_000 / 2 + NORM)


@pytest.mark.parametrize(
    ("zero", "weights", "gradients", "optimizer"),
    [(0, 2, 4, 12), (1, 2, 4, 12 / 8), (2, 2, 4 / 8, 12 / 8), (3, 2 / 8, 4 / 8, 12 / 8)],
)
def test_zero_stages_shard_model_state_over_dp_and_cp(zero, weights, gradients, optimizer):
    # dp 4 x cp 2 = 8 shards
    mem = memory(dp=4, cp=2, zero=zero, global_batch=8)
    params = LLAMA.num_params()
    assert mem.params_per_device[0] == params
    assert mem.weights[0] == pytest.approx(params * weights)
    assert mem.gradients[0] == pytest.approx(params * gradients)
    assert mem.optimizer[0] == pytest.approx(params * optimizer)
    assert mem.model_state[0] == pytest.approx(params * (weights + gradients + optimizer))


def test_activations_of_one_stage_by_hand():
    # S = 2 x 128 = 256 tokens, t = 2 with sequence parallelism, unfused scores, one stage of 4 layers.
    mem = memory(tp=2, micro_batch=2, sequence_parallel=True)
    outside = 10 * 256 * 64 / 2
    inside = 2 * 256 * (64 + 2 * 16 + 64) + 2 * 256 * 160 * 3
    scores = 5 * 8 * 128 * 256
    per_layer = outside + (inside + scores) / 2  # 901,120 bytes
    logits = 4 * 256 * 1000 / 2  # FP32 logits of the loss
    assert mem.activations[0] == pytest.approx(4 * per_layer + logits, rel=1e-12)
    # total, overhead and what a run needs
    assert mem.total[0] == pytest.approx(mem.model_state[0] + mem.activations[0], rel=1e-12)
    assert mem.overhead[0] == pytest.approx(RESERVED_BYTES + FRAGMENTATION * mem.activations[0], rel=1e-12)
    assert mem.required[0] == pytest.approx(mem.total[0] + mem.overhead[0], rel=1e-12)
    assert RESERVED_BYTES == 2.5 * 2**30 and FRAGMENTATION == 0.05


def test_without_sequence_parallelism_the_outside_part_is_replicated():
    mem = memory(tp=2, micro_batch=2, fused=True)
    per_layer = 10 * 256 * 64 + (2 * 256 * (64 + 32 + 64) + 2 * 256 * 160 * 3) / 2  # fused: no scores
    assert mem.activations[0] == pytest.approx(4 * per_layer + 4 * 256 * 1000 / 2, rel=1e-12)


def test_selective_recompute_drops_the_scores_and_full_keeps_layer_inputs():
    selective = memory(tp=2, micro_batch=2, sequence_parallel=True, recompute="selective")
    per_layer = 10 * 256 * 64 / 2 + (2 * 256 * (64 + 32 + 64) + 2 * 256 * 160 * 3) / 2
    logits = 4 * 256 * 1000 / 2
    assert selective.activations[0] == pytest.approx(4 * per_layer + logits, rel=1e-12)
    full = memory(tp=2, micro_batch=2, sequence_parallel=True, recompute="full")
    checkpoint = 2 * 256 * 64 / 2  # each layer's input, split by SP
    rebuilt = (
        10 * 256 * 64 / 2 + (2 * 256 * (64 + 32 + 64) + 2 * 256 * 160 * 3 + 5 * 8 * 128 * 256) / 2
    )  # one layer at a time
    assert full.activations[0] == pytest.approx(4 * checkpoint + rebuilt + logits, rel=1e-12)


def test_pipeline_in_flight_micro_batches_and_interleaving():
    per_layer = 10 * 128 * 64 + 2 * 128 * (64 + 32 + 64) + 2 * 128 * 160 * 3  # fused, t = 1, S = 128
    logits = 4 * 128 * 1000  # on the last stage, which holds one micro-batch (1F1B)
    # pp 2, 8 micro-batches: the first stage holds 2 micro-batches of its 2 layers, the last one and the logits.
    plain = memory(pp=2, global_batch=8, fused=True)
    assert plain.activations[0] == pytest.approx(max(2 * 2 * per_layer, 2 * per_layer + logits), rel=1e-12)
    # vp 2: the first x (1 + (pp - 1) / (pp vp)) = 1.25; the last (vp - 1) pp + 1 = 3 of its one-layer chunks
    interleaved = memory(pp=2, vp=2, global_batch=8, fused=True)
    expected = max(2 * 2 * 1.25 * per_layer, 3 * per_layer + logits)
    assert interleaved.activations[0] == pytest.approx(expected, rel=1e-12)
    assert memory(pp=2, vp=2, global_batch=8, fused=False).activations[0] > expected  # unfused scores: more
    # one micro-batch: only one can be in flight
    single = memory(pp=2, global_batch=1, fused=True)
    assert single.activations[0] == pytest.approx(2 * 1 * per_layer + logits, rel=1e-12)


def test_context_parallelism_splits_the_sequence():
    # cp 2: S = 64 local tokens; unfused scores are 5 a s S with the full s = 128.
    mem = memory(cp=2, global_batch=4)
    per_layer = 10 * 64 * 64 + 2 * 64 * (64 + 32 + 64) + 2 * 64 * 160 * 3 + 5 * 8 * 128 * 64
    assert mem.activations[0] == pytest.approx(4 * per_layer + 4 * 64 * 1000, rel=1e-12)


def test_moe_activations_count_active_experts_and_capacity():
    moe = LLAMA.model_copy(update={"moe": MoE(experts=8, top_k=2, shared_experts=1, capacity_factor=1.5)})
    mem = memory(moe, dp=2, ep=2, global_batch=4, fused=True)
    per_layer = 10 * 128 * 64 + 2 * 128 * (64 + 32 + 64) + 2 * 128 * 160 * 3 * 3 * 1.5  # 3 active MLPs x capacity
    assert mem.activations[0] == pytest.approx(4 * per_layer + 4 * 128 * 1000, rel=1e-12)


def test_full_recompute_without_sequence_parallelism_keeps_whole_layer_inputs():
    full = memory(tp=2, micro_batch=2, recompute="full", fused=True)
    checkpoint = 2 * 256 * 64  # replicated on both TP ranks
    rebuilt = 10 * 256 * 64 + (2 * 256 * (64 + 32 + 64) + 2 * 256 * 160 * 3) / 2
    assert full.activations[0] == pytest.approx(4 * checkpoint + rebuilt + 4 * 256 * 1000 / 2, rel=1e-12)


def test_fewer_micro_batches_than_stages_are_all_in_flight():
    # pp 4 (one layer per stage), 4 sequences in micro-batches of 2: 2 micro-batches, both in flight.
    mem = memory(pp=4, micro_batch=2, global_batch=4, fused=True)
    per_layer = 10 * 256 * 64 + 2 * 256 * (64 + 32 + 64) + 2 * 256 * 160 * 3
    # the first stage holds both, the last one and the logits
    assert mem.activations[0] == pytest.approx(max(1 * 2 * per_layer, per_layer + 4 * 256 * 1000), rel=1e-12)


# A MoE model whose first layer keeps a dense MLP (DeepSeek-style): 4 experts of 32, top-2 + 1 shared, capacity 1.5.
DENSE_FIRST = LLAMA.model_copy(
    update={
        "dense_layers": 1,
        "moe": MoE(experts=4, top_k=2, shared_experts=1, expert_ffn_hidden=32, capacity_factor=1.5),
    }
)
EXPERT = 3 * 64 * 32


def test_leading_dense_layers_in_parameters_and_activations():
    # tp 2, dp 2 = ep 2: each expert split over the 2 TP ranks, half of them here.
    moe_layer = (ATTENTION + 64 * 4 + EXPERT) / 2 + 4 * EXPERT / 2 / 2 + 2 * NORM
    dense_layer = (ATTENTION + MLP) / 2 + 2 * NORM
    layers = arrays(tp=2, dp=2, ep=2)
    assert params_per_device(DENSE_FIRST, layers)[0] == pytest.approx(3 * moe_layer + dense_layer + 64_000 + NORM)
    # pp 2: the first stage holds the dense layer and one MoE layer, the last two MoE layers; the fuller counts.
    two = arrays(tp=2, pp=2, dp=1)
    moe_layer = (ATTENTION + 64 * 4 + EXPERT) / 2 + 4 * EXPERT / 2 + 2 * NORM
    stage = max(dense_layer + moe_layer, 2 * moe_layer)
    assert params_per_device(DENSE_FIRST, two)[0] == pytest.approx(stage + 32_000 + NORM)
    # Activations: the layers' average MLP (3 of 4 layers with 3 active experts x capacity, 1 dense).
    mem = memory(DENSE_FIRST, tp=2, dp=2, ep=2, global_batch=4, fused=True)
    inside = 2 * 128 * (64 + 32 + 64) + 0.75 * (2 * 128 * 32 * 3) * 3 * 1.5 + 0.25 * (2 * 128 * 160 * 3)
    per_layer = 10 * 128 * 64 + inside / 2
    assert mem.activations[0] == pytest.approx(4 * per_layer + 4 * 128 * 1000 / 2, rel=1e-12)
