"""The attention core's exponentials: one per score and pass on the special function units, after the products.

Published ground truth that no fit here has seen: FlashAttention-3's forward pass on an H100 SXM5 (FP16,
no mask, 16k tokens; Shah et al. 2024, arXiv 2407.08608, figure 5) at head dims 64, 128 and 256 reaches
497, 648 and 756 TFLOP/s. A kernel whose time were its products alone would reach one rate at every head
dim; the exponentials, one per score whatever the head dim, make a narrow head slower per FLOP.
"""

from __future__ import annotations

import dataclasses

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import efficiency_for
from clustersim.system import system_for_instance
from clustersim.training.pricing import operation_times
from clustersim.workload.ops import Operation, layer_operations
from clustersim.workload.transformer import Transformer

CATALOG = load_catalog(use_env=False)
FA3_H100_TFLOPS = {64: 497.0, 128: 648.0, 256: 756.0}  # forward, head dim -> TFLOP/s at 16k tokens


def _model(head_dim: int, heads: int = 16) -> Transformer:
    return Transformer(
        name=f"hd{head_dim}",
        layers=1,
        hidden=2048,
        ffn_hidden=8192,
        heads=heads,
        kv_heads=heads,
        head_dim=head_dim,
        vocab=32000,
        seq_len=16384,
    )


def _core_op(model: Transformer) -> Operation:
    """The fused attention core of one layer over 16k tokens on one device."""
    ops = layer_operations(model, tokens=16384.0, seq_len=16384, tp=1.0, sp_split=1.0, ep=1.0, fused_attention=True)
    (op,) = [o for o in ops if o.name == "attention core"]
    return op


def _core(model: Transformer, instance: str, precision: Dtype = Dtype.BF16, **kw: bool):
    system = system_for_instance(CATALOG, instance, 1)
    op = _core_op(model)
    (times,) = [t for t in operation_times([op], system, efficiency_for(system.accelerator), precision, **kw)]
    return op, times


def _forward_tflops(head_dim: int, instance: str = "p5.48xlarge") -> float:
    op, times = _core(_model(head_dim), instance)
    return float(op.flop) / float(times.forward_s) / 1e12


def test_one_exponential_per_score_whatever_the_head_dim():
    for head_dim in (64, 128, 256):
        op, _ = _core(_model(head_dim), "p5.48xlarge")
        scores = 16384 * 16384 / 2 * 16  # causal tokens x keys x heads
        assert float(op.exps) == pytest.approx(scores, rel=1e-3)


def test_flashattention3_head_dim_ratios_on_h100_out_of_sample():
    """The catalog's MUFU rate alone (no fitted constant cancels out of a ratio) gives FlashAttention-3's
    per-head-dim rates within 3%; products alone would put every ratio at 1."""
    rate = {d: _forward_tflops(d) for d in FA3_H100_TFLOPS}
    assert rate[64] / rate[128] == pytest.approx(FA3_H100_TFLOPS[64] / FA3_H100_TFLOPS[128], rel=0.03)
    assert rate[256] / rate[128] == pytest.approx(FA3_H100_TFLOPS[256] / FA3_H100_TFLOPS[128], rel=0.03)


def test_the_backward_pays_the_exponentials_once_not_two_and_a_half_times():
    op, times = _core(_model(128), "p5.48xlarge")
    system = system_for_instance(CATALOG, "p5.48xlarge", 1)
    eff = efficiency_for(system.accelerator)
    softmax_s = (
        float(op.exps) / system.exp_per_s * eff.softmax_exposed / float(eff.attention_fraction(op.keys_per_call))
    )
    products_s = float(times.forward_s) - softmax_s
    assert products_s > 0
    assert float(times.backward_s) == pytest.approx(op.backward_ratio * products_s + softmax_s, rel=1e-9)


def test_blackwell_ultra_doubles_the_exponential_rate_and_its_attention_is_faster():
    b200, b300 = CATALOG.accelerator("b200"), CATALOG.accelerator("b300")
    assert b200.exp_per_s is not None and b300.exp_per_s is not None
    per_sm_clock = b300.exp_per_s.value / b200.exp_per_s.value  # 148 SMs each, one clock assumed
    assert per_sm_clock == pytest.approx(2.0, rel=0.01)  # rounded to three figures
    _, blackwell = _core(_model(128), "p6-b200.48xlarge")
    _, ultra = _core(_model(128), "p6-b300.48xlarge")
    assert float(ultra.forward_s) < float(blackwell.forward_s)  # same BF16 tensor rate, faster softmax


def test_fp8_attention_leaves_the_exponentials_as_they_were():
    """An FP8 core doubles the products' rate, not the exponentials': less than twice as fast."""
    model = _model(128)
    _, bf16 = _core(model, "p6-b200.48xlarge", Dtype.FP8)
    _, fp8 = _core(model, "p6-b200.48xlarge", Dtype.FP8, fp8_attention=True)
    assert 1.0 < float(bf16.forward_s) / float(fp8.forward_s) < 2.0


def test_exponentials_a_family_hides_cost_nothing():
    model = _model(64)
    system = system_for_instance(CATALOG, "p5.48xlarge", 1)
    eff = efficiency_for(system.accelerator)
    op = [_core_op(model)]
    exposed, hidden = (
        operation_times(op, system, e, Dtype.BF16)[0] for e in (eff, eff.model_copy(update={"softmax_exposed": 0.0}))
    )
    fraction = float(eff.attention_fraction(op[0].keys_per_call))
    products_s = float(op[0].flop) / (system.peak_flop_per_s(Dtype.BF16) * fraction)
    assert float(hidden.forward_s) == pytest.approx(products_s, rel=1e-9)
    assert float(exposed.forward_s) > 1.5 * products_s  # head dim 64 on an H100: about as long again


def test_a_power_capped_device_takes_its_exponentials_at_its_lower_clock():
    """Below its TDP a device's sustained clock falls (``System.compute_clock_ratio``): its special function units'
    rate with it, as its tensor cores'. The core's time is then the uncapped one over the clock ratio."""
    system = system_for_instance(CATALOG, "p5.48xlarge", 1)
    capped = dataclasses.replace(system, board_power_watts=350.0)
    assert 0.0 < capped.compute_clock_ratio < 1.0
    model = _model(64)  # a narrow head: its exponentials a large share of the core
    op = [_core_op(model)]
    eff = efficiency_for(system.accelerator)
    full, slow = (operation_times(op, s, eff, Dtype.BF16)[0] for s in (system, capped))
    assert float(slow.forward_s) == pytest.approx(float(full.forward_s) / capped.compute_clock_ratio, rel=1e-9)
    assert float(slow.backward_s) == pytest.approx(float(full.backward_s) / capped.compute_clock_ratio, rel=1e-9)


def test_a_chip_without_a_recorded_rate_prices_attention_on_its_tensor_rate():
    system = system_for_instance(CATALOG, "trn1.32xlarge", 1)
    assert system.accelerator.exp_per_s is None and system.exp_per_s == float("inf")
    op, times = _core(_model(128), "trn1.32xlarge")
    eff = efficiency_for(system.accelerator)
    fraction = float(eff.attention_fraction(op.keys_per_call))
    expected = float(op.flop) / (system.peak_flop_per_s(Dtype.BF16) * fraction)
    assert float(times.forward_s) == pytest.approx(expected, rel=1e-9)
