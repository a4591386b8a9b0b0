"""ZeRO-3's gathers, activation offload and selective recompute by module, pinned where mutation testing found
them loose (``benchmarks/mutation.py`` group ``training_options``): an 8-bit job's parameter gathers in its own
format, one offloaded layer's copies, the tensor-parallel inputs an offloaded layer keeps, and a fused expert MLP's
activation in a recomputed module."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.catalog.schema import Dtype
from clustersim.choices import RecomputeModule
from clustersim.compute.memory import gathered_weight_bytes, layer_activation_bytes
from clustersim.execution import Layout, LayoutArrays
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from clustersim.training.offload import offloaded_layer_bytes
from clustersim.training.pricing import OperationTimes
from clustersim.training.recompute_modules import stated_modules_forward_s
from clustersim.workload.ops import layer_operations
from clustersim.workload.zoo import load_model

from .test_activation_offload import _estimate, _superchips, _term
from .test_step_closed_form import NVLINK, PARAMS, REL, SW, estimate, t_coll, terms


def _hand_fabric() -> Fabric:
    """Two nodes of two devices on a 1 GB/s network (the estimate's hierarchical ZeRO-3 groups)."""
    return Fabric("hand", 2, 2, NVLINK, 1e9, False)


@pytest.mark.parametrize(("precision", "gathered"), [(Dtype.BF16, False), (Dtype.FP8, True), (Dtype.FP8, False)])
def test_zero_3_gathers_an_8_bit_jobs_weights_in_its_own_format_where_the_framework_does(precision, gathered):
    """Megatron-FSDP with fp8_param_gather all-gathers an FP8 job's parameters a byte an element (and a scale per
    32 under MXFP8); the gradients are reduce-scattered in 16 bits either way."""
    sw = SW.model_copy(update={"zero3_prefetch": False, "fp8_param_gather": gathered})
    est = estimate(Layout(dp=4, zero=3), devices=4, per_node=2, global_batch=4, network=1e9, sw=sw, precision=precision)
    per_layer = PARAMS / 4
    weight = gathered_weight_bytes(precision, gathered)
    assert weight == (2.0 if precision is Dtype.BF16 or not gathered else pytest.approx(1.0, abs=0.05))
    gather = t_coll(Op.ALL_GATHER, per_layer * weight, _hand_fabric())
    scatter = t_coll(Op.REDUCE_SCATTER, per_layer * 2, _hand_fabric())
    assert terms(est)["dp comm"][0] == pytest.approx(4 * (2 * gather + scatter), rel=REL)


def test_one_offloaded_layer_copies_its_activations_out_and_back():
    system = _superchips("gb200")
    layout = Layout(dp=64, zero=3, micro_batch=2, offload_layers=1)
    est = _estimate(system, layout)
    term = _term(est, "activation offload")
    assert term.link_s > 0
    ten = _term(_estimate(system, layout.model_copy(update={"offload_layers": 10})), "activation offload")
    assert ten.link_s == pytest.approx(10 * term.link_s, rel=1e-12)


def test_an_offloaded_layer_keeps_the_tensor_parallel_inputs_its_framework_keeps():
    """torchtitan's TP keeps each block's gathered input for its weight gradients: an offloaded layer moves it."""
    model = load_model("llama3.1-70b", use_env=False)
    lay = LayoutArrays.of([Layout(tp=4, dp=2, sequence_parallel=True)])
    for keeps in (True, False):
        sw = SW.model_copy(update={"tp_keeps_gathered_inputs": keeps})
        moved = offloaded_layer_bytes(model, lay, seq_len=4096, precision=Dtype.BF16, sw=sw)
        expected = layer_activation_bytes(
            model, lay, seq_len=4096, fused=sw.fused_attention, float8_inputs=False, gathered_inputs=keeps
        )
        assert np.allclose(moved, expected, rtol=1e-12)
    kept = offloaded_layer_bytes(
        model, lay, seq_len=4096, precision=Dtype.BF16, sw=SW.model_copy(update={"tp_keeps_gathered_inputs": True})
    )
    assert float(kept[0]) > float(
        offloaded_layer_bytes(
            model, lay, seq_len=4096, precision=Dtype.BF16,
            sw=SW.model_copy(update={"tp_keeps_gathered_inputs": False}),
        )[0]
    )  # fmt: skip


def test_a_recomputed_expert_activation_follows_the_fused_expert_mlp():
    """A fused grouped expert MLP applies the routed experts' activation inside its GEMMs
    (``ops.activation_elements``): recomputing moe_act then repeats none of the layer's activation pass, where the
    unfused experts repeat their share of it."""
    model = load_model("qwen3-30b-a3b", use_env=False)
    one = np.ones(1)
    ops = layer_operations(
        model, tokens=4096 * one, seq_len=4096, tp=one, sp_split=one, ep=8 * one, fused_attention=True
    )
    times = [OperationTimes(op.name, one.copy(), one.copy(), False, op.kind) for op in ops]  # a second each
    lay = LayoutArrays.of([Layout(dp=8, ep=8, recompute_modules=(RecomputeModule.MOE_ACT,))])

    def repeated(fused: bool) -> float:
        return float(stated_modules_forward_s(model, lay, ops, times, np.zeros(1), fused_expert_mlp=fused)[0])

    assert repeated(True) == 0.0 < repeated(False) < 1.0
