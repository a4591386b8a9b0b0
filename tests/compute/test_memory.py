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
