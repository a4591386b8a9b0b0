"""Memory per device: the Korthikanti et al. accounting, ZeRO sharding, pipeline in-flight micro-batches."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.compute.memory import memory_per_device, params_per_device
from clustersim.execution import Layout, LayoutArrays
from clustersim.validation.cases import bundled_dir
from clustersim.validation.training import predict_memory_case
from clustersim.workload.zoo import load_model

VALIDATION = bundled_dir()
MEGATRON_22B = load_model("megatron-22b", use_env=False)


def _memory(layout: Layout, *, fused: bool = False, model=MEGATRON_22B, global_batch: int = 4):
    return memory_per_device(
        model, LayoutArrays.of([layout]), seq_len=2048, global_batch=global_batch, fused_attention=fused
    )


def test_korthikanti_activation_formula_without_recompute():
    """Per layer sbh(10 + 24/t + 5as/(ht)) bytes (Korthikanti eq. 2), 48 layers, plus 4-byte logits."""
    s, b, h, a, t, layers, vocab = 2048, 4, 6144, 64, 8, 48, 51200
    per_layer = s * b * h * (10 + 24 / t + 5 * a * s / (h * t))
    memory = _memory(Layout(tp=8, micro_batch=4))
    assert memory.activations[0] == pytest.approx(layers * per_layer + 4 * s * b * vocab / t, rel=1e-12)


def test_sequence_parallel_selective_is_34_sbh_over_t():
    s, b, h, t, layers, vocab = 2048, 4, 6144, 8, 48, 51200
    memory = _memory(Layout(tp=8, micro_batch=4, sequence_parallel=True, recompute="selective"))
    assert memory.activations[0] == pytest.approx(layers * 34 * s * b * h / t + 4 * s * b * vocab / t, rel=1e-12)


def test_zero_stages_shard_the_model_state():
    stages = [_memory(Layout(tp=8, dp=8, zero=z), global_batch=32) for z in range(4)]
    params = params_per_device(MEGATRON_22B, LayoutArrays.of([Layout(tp=8, dp=8)]))[0]
    assert stages[0].model_state[0] == pytest.approx(18 * params)
    assert stages[1].optimizer[0] == pytest.approx(12 * params / 8)
    assert stages[2].gradients[0] == pytest.approx(4 * params / 8)
    assert stages[3].weights[0] == pytest.approx(2 * params / 8)
    assert all(a.model_state[0] > b.model_state[0] for a, b in itertools.pairwise(stages))


def test_fused_attention_keeps_no_scores():
    unfused, fused = _memory(Layout(tp=8, micro_batch=4)), _memory(Layout(tp=8, micro_batch=4), fused=True)
    scores = 48 * 5 * 64 * 2048 * 2048 * 4 / 8
    assert unfused.activations[0] - fused.activations[0] == pytest.approx(scores)


def test_pipeline_holds_pp_micro_batches_and_interleaving_more():
    gpt3 = load_model("gpt3-175b", use_env=False)
    plain = _memory(Layout(tp=8, pp=8, micro_batch=1), model=gpt3, global_batch=64)
    interleaved = _memory(Layout(tp=8, pp=8, vp=3, micro_batch=1), model=gpt3, global_batch=64)
    few = _memory(Layout(tp=8, pp=8, micro_batch=1), model=gpt3, global_batch=2)
    assert interleaved.activations[0] / plain.activations[0] == pytest.approx(1 + 7 / 24, rel=0.01)
    assert few.activations[0] < plain.activations[0] / 3  # only 2 micro-batches can be in flight


def test_memory_cases_within_ten_percent():
    path = VALIDATION / "memory.jsonl"
    catalog = load_catalog(use_env=False)
    cases = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    errors = [
        predict_memory_case(c, field, catalog) / c["measured"][field] - 1
        for c in cases
        for field in ("total_GiB_per_device", "weights_and_optimizer_GiB_per_device", "activations_GiB_per_device")
    ]
    assert np.mean(np.abs(errors)) <= 0.10, errors
    assert max(abs(e) for e in errors) <= 0.15, errors


@pytest.mark.parametrize(
    ("model_id", "layout"),
    [
        ("mixtral-8x7b", Layout(tp=2, dp=32, ep=8, zero=1)),
        ("mixtral-8x7b", Layout(tp=1, dp=64, ep=8, zero=3)),
        ("qwen3-30b-a3b", Layout(tp=1, dp=16, ep=16, zero=2)),
        ("qwen3-30b-a3b", Layout(tp=4, dp=4, ep=8, zero=1)),  # ep wider than dp: folded over tp x dp
        ("deepseek-v3", Layout(tp=1, dp=512, ep=64, zero=1)),
    ],
)
def test_sharded_state_over_every_device_is_the_whole_models(model_id: str, layout: Layout) -> None:
    """ZeRO shards each parameter's state over the ranks that hold it: summed over the devices, the sharded
    state is the whole model's (routed experts sharded over the expert data-parallel group, not over all
    of dp, which would keep only 1/ep of them anywhere)."""
    model = load_model(model_id, use_env=False)
    lay = LayoutArrays.of([layout])
    memory = memory_per_device(model, lay, seq_len=4096, global_batch=layout.dp, fused_attention=True)
    devices = layout.num_devices
    replicated_norms = model.layers * model.layer_norm_params() * (layout.tp - 1)  # norms held on every tp rank
    # DeepSeek-V3 trains its multi-token-prediction module too: one more MoE block and its projection.
    mtp = model.mtp_layers * (model.layer_params() + model.mtp_module_params())
    whole = model.num_params() + mtp + replicated_norms
    assert memory.optimizer[0] * devices == pytest.approx(12 * whole, rel=1e-6)
    if layout.zero >= 3:
        assert memory.weights[0] * devices == pytest.approx(2 * whole, rel=1e-6)


def test_a_framework_keeps_its_own_bytes_per_parameter() -> None:
    """Megatron keeps 2 + 4 + 12 bytes per parameter; FSDP keeps fp32 parameters and gradients and no
    separate master copy, 4 + 4 + 8: at ZeRO 3 its state is 16/18 of Megatron's."""
    from clustersim.compute.software import software_profiles

    profiles = software_profiles()
    assert profiles["megatron"].state_bytes == (2.0, 4.0, 12.0)
    for name in ("fsdp", "torchtitan", "automodel"):
        assert profiles[name].state_bytes == (4.0, 4.0, 8.0), name
    lay = LayoutArrays.of([Layout(tp=1, dp=8, zero=3)])
    model = load_model("llama3-8b", use_env=False)
    memory = {
        name: memory_per_device(
            model, lay, seq_len=4096, global_batch=8, fused_attention=True, state_bytes=profiles[name].state_bytes
        )
        for name in ("megatron", "fsdp")
    }
    assert memory["fsdp"].model_state[0] == pytest.approx(memory["megatron"].model_state[0] * 16 / 18, rel=1e-12)


def test_the_data_parallel_groups_take_the_shape_an_open_grid_broadcasts_to() -> None:
    """Layout fields as an open grid (tp down one axis, dp across another): a dense model's one group holds every
    parameter in the shape the parameters take (what broadcasts over the grid), not one element per leading row; a
    MoE model's dense and expert groups add up to them, the experts over their expert data-parallel ranks."""
    from dataclasses import replace as with_fields

    from clustersim.compute.memory import data_parallel_groups, params_per_device

    one = LayoutArrays.of([Layout()])
    grid = with_fields(one, tp=np.array([[1], [2], [4]]), dp=np.array([[1, 2]]))
    dense_model = load_model("llama3-8b", use_env=False)
    ((held, ranks, stride),) = data_parallel_groups(dense_model, grid)
    assert np.array_equal(stride, grid.tp)
    params = params_per_device(dense_model, grid)
    assert held.shape == params.shape == (3, 1) and np.array_equal(held, params)
    assert np.broadcast_shapes(held.shape, (3, 2)) == (3, 2) and np.array_equal(ranks, grid.dp * grid.cp)
    moe_model = load_model("mixtral-8x7b", use_env=False)
    moe_grid = with_fields(one, tp=np.array([[1], [2]]), dp=np.array([[8, 16]]), ep=np.array([[8, 8]]))
    (dense, dense_ranks, _), (experts, expert_ranks, expert_stride) = data_parallel_groups(moe_model, moe_grid)
    np.testing.assert_array_equal(dense_ranks, moe_grid.dp * moe_grid.cp)
    np.testing.assert_allclose(dense + experts, params_per_device(moe_model, moe_grid), rtol=1e-12)
    assert (experts > dense).all()  # Mixtral's parameters are mostly its experts'
    np.testing.assert_array_equal(np.broadcast_to(expert_ranks, (2, 2)), moe_grid.tp * moe_grid.dp // 8 // moe_grid.etp)
    np.testing.assert_array_equal(np.broadcast_to(expert_stride, (2, 2)), moe_grid.ep_stride * 8)
